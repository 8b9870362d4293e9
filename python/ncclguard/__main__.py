"""python -m ncclguard [ncclguard-run options] [--] COMMAND [ARGS...]: the same as ncclguard-run.
python -m ncclguard (no arguments): version, paths, and whether it is on in this interpreter.
python -m ncclguard --library-path: the library's path alone (LD_PRELOAD=$(python -m ncclguard --library-path))."""

import os
import sys

import ncclguard
from ncclguard import _boot, _cli


def info():
    st = _boot.STATE.get("state")
    print("ncclguard %s (%s)" % (ncclguard.__version__, ncclguard.__revision__))
    print("library:  %s" % ncclguard.library_path())
    print("tools:    %s" % os.path.dirname(ncclguard.tool_path("ncclguard-run")))
    print("python:   %s" % sys.executable)
    print("here:     %s" % ("not turned on by python -m ncclguard" if st is None else st))
    print("turn on:  NCCLGUARD=1 python train.py | `import ncclguard` first in the script | "
          "ncclguard-run -- COMMAND | python -m ncclguard COMMAND")
    return 0


def main(argv):
    if not argv:
        return info()
    if argv == ["--library-path"]:
        print(ncclguard.library_path())
        return 0
    # Python < 3.10 cannot tell `python -m ncclguard` from other imports: the package may have
    # turned itself on here; the launcher must see the environment as the user set it.
    _boot.undo_exports()
    return _cli.run(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
