"""python -m ncclguard [ncclguard-run options] [--] COMMAND [ARGS...]: the same as ncclguard-run.
python -m ncclguard (no arguments): whether ncclguard is on in this interpreter and why, what NCCLGUARD
does for the other Python programs of this environment, the version and the paths.
python -m ncclguard --library-path: the library's path alone (LD_PRELOAD=$(python -m ncclguard --library-path)).
python -m ncclguard --docs: the folder of the documentation (the paths the tools' --help names are in it).
python -m ncclguard --help (-h): these options, then ncclguard-run's."""

import os
import subprocess
import sys

import ncclguard
from ncclguard import _boot, _cli


def here():
    """(answer, why): whether ncclguard is on in this interpreter, and why, in words."""
    guards = [p for p in _boot._mapped() if _boot._is_guard(p)]
    st = _boot.STATE.get("state")
    if guards:
        how = "loaded by import ncclguard" if st == "loaded" else "preloaded (LD_PRELOAD or ncclguard-run)"
        return "yes", "%s is %s" % (guards[0], how)
    return "no", "python -m ncclguard does not turn it on in its own interpreter"


def switch_line():
    """What NCCLGUARD does for the other Python programs of this environment, in words."""
    on, bad = _boot.switch()
    pth = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ncclguard.__file__))), "ncclguard.pth")
    try:
        from ncclguard_hook import _config
        strict = _config.strict()
        problems = _config.problems() if strict and _config.available() else []
    except Exception:  # noqa: BLE001 - no table: the default
        strict, problems = True, []
    refused = "Python programs of this environment run, and the NCCL communicators they create are refused " \
        "(ncclInvalidUsage, reason=config_refused); import ncclguard refuses to start (status 2); " \
        "NCCLGUARD_STRICT=0: warn and run"
    if bad:
        if strict:
            return bad.replace("; not turned on", "") + ": " + refused
        return bad.replace("; not turned on", "") + ": Python programs start without ncclguard, and " \
            "import ncclguard does not turn it on"
    if on is True and problems and os.path.isfile(pth):
        return "NCCLGUARD=%s, but %s: %s" % (os.environ["NCCLGUARD"], "; ".join(problems), refused)
    if on is None:
        return "not set: a program turns ncclguard on with `import ncclguard` first, or NCCLGUARD=1 at start"
    if on is False:
        return "NCCLGUARD=%s: off: neither the start of a program nor import ncclguard turns it on" \
            % os.environ["NCCLGUARD"]
    if os.path.isfile(pth):
        return "NCCLGUARD=%s: every other Python program of this environment starts with ncclguard on " \
            "(%s)" % (os.environ["NCCLGUARD"], pth)
    return "NCCLGUARD=%s, but %s is missing (not installed with pip): a program turns ncclguard on with " \
        "`import ncclguard` first" % (os.environ["NCCLGUARD"], pth)


def info():
    rev = ncclguard.__revision__
    answer, why = here()
    print("ncclguard %s%s" % (ncclguard.__version__, " (%s)" % rev if rev else ""))
    print("on here:   %s: %s" % (answer, why))
    print("NCCLGUARD: %s" % switch_line())
    print("library:   %s" % ncclguard.library_path())
    print("tools:     %s" % os.path.dirname(ncclguard.tool_path("ncclguard-run")))
    print("python:    %s" % sys.executable)
    print("docs:      %s" % ncclguard.docs_path())
    print("turn on:   NCCLGUARD=1 python train.py | `import ncclguard` first in the script | "
          "ncclguard-run -- COMMAND | python -m ncclguard COMMAND")
    return 0


USAGE = """\
Usage: python -m ncclguard [ncclguard-run options] [--] COMMAND [ARGS...]
       python -m ncclguard [--library-path | --docs | --help]

Runs COMMAND under ncclguard, as ncclguard-run does (its options follow).

Options of python -m ncclguard itself:
  (none)             whether ncclguard is on in this interpreter and why, what NCCLGUARD
                     does for other Python programs, the version, the library's and tools' paths
  --library-path     print the path of the packaged libncclguard.so alone
                     (LD_PRELOAD=$(python -m ncclguard --library-path) COMMAND)
  --docs             print the folder of the documentation installed with the package
                     (README.md, docs/, tools/README.md: the paths the tools' --help names)
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
    if argv == ["--docs"]:
        print(ncclguard.docs_path())
        return 0
    # Python < 3.10 cannot tell `python -m ncclguard` from other imports: the package may have
    # turned itself on here; the launcher must see the environment as the user set it.
    _boot.undo_exports()
    return _cli.run(argv)


if __name__ == "__main__":
    try:
        rc = main(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:  # `python -m ncclguard | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        rc = 0
    sys.exit(rc)
