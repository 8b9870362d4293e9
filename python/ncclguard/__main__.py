"""python -m ncclguard [ncclguard-run options] [--] COMMAND [ARGS...]: the same as ncclguard-run.
python -m ncclguard (no arguments): version, paths, and whether it is on in this interpreter.
python -m ncclguard --library-path: the library's path alone (LD_PRELOAD=$(python -m ncclguard --library-path)).
python -m ncclguard --help (-h): these options, then ncclguard-run's."""

import os
import subprocess
import sys

import ncclguard
from ncclguard import _boot, _cli


def info():
    st = _boot.STATE.get("state")
    rev = ncclguard.__revision__
    print("ncclguard %s%s" % (ncclguard.__version__, " (%s)" % rev if rev else ""))
    print("library:  %s" % ncclguard.library_path())
    print("tools:    %s" % os.path.dirname(ncclguard.tool_path("ncclguard-run")))
    print("python:   %s" % sys.executable)
    print("here:     %s" % ("not turned on by python -m ncclguard" if st is None else st))
    print("turn on:  NCCLGUARD=1 python train.py | `import ncclguard` first in the script | "
          "ncclguard-run -- COMMAND | python -m ncclguard COMMAND")
    return 0


USAGE = """\
Usage: python -m ncclguard [ncclguard-run options] [--] COMMAND [ARGS...]
       python -m ncclguard [--library-path | --help]

Runs COMMAND under ncclguard, as ncclguard-run does (its options follow).

Options of python -m ncclguard itself:
  (none)             the version, the library's and tools' paths, and whether ncclguard is
                     on in this interpreter
  --library-path     print the path of the packaged libncclguard.so alone
                     (LD_PRELOAD=$(python -m ncclguard --library-path) COMMAND)
  -h, --help         this text, then ncclguard-run's

Other ways to turn it on: NCCLGUARD=1 python train.py, or `import ncclguard` first in the script.
"""


def usage():
    sys.stdout.write(USAGE)
    run = ncclguard.tool_path("ncclguard-run")
    sys.stdout.write("\nncclguard-run's options (ncclguard-run --help):\n\n")
    sys.stdout.flush()
    out = ""
    if os.path.isfile(run):
        try:
            out = subprocess.run(["/bin/sh", run, "--help"], stdout=subprocess.PIPE, universal_newlines=True).stdout
        except OSError:
            pass
    sys.stdout.write(out if out.strip() else "(%s is missing: reinstall ncclguard)\n" % run)
    return 0


def main(argv):
    if not argv:
        return info()
    if argv[0] in ("-h", "--help"):
        return usage()
    if argv == ["--library-path"]:
        print(ncclguard.library_path())
        return 0
    # Python < 3.10 cannot tell `python -m ncclguard` from other imports: the package may have
    # turned itself on here; the launcher must see the environment as the user set it.
    _boot.undo_exports()
    return _cli.run(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
