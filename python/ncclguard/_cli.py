"""The console scripts ncclguard-run, ncclguard-doctor, ncclguard-report: each execs the packaged
tool (ncclguard/bin/), which finds the packaged library by itself (../lib/libncclguard.so, the
same search as after `make install`). They do not turn ncclguard on in their own process."""

import os
import sys

from . import tool_path


def _exec(name, args):
    path = tool_path(name)
    if not os.path.isfile(path):
        sys.stderr.write("%s: %s is missing: reinstall ncclguard (pip install --force-reinstall ncclguard)\n"
                         % (name, path))
        return 127
    # The launcher is a POSIX sh script: run it through sh, whatever its mode bits.
    argv = ["/bin/sh", path] + args if name == "ncclguard-run" else [path] + args
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(argv[0], argv)
    except OSError as err:
        sys.stderr.write("%s: cannot run %s: %s\n" % (name, argv[0], err))
        return 127


def run(args=None):
    return _exec("ncclguard-run", sys.argv[1:] if args is None else list(args))


def doctor(args=None):
    return _exec("ncclguard-doctor", sys.argv[1:] if args is None else list(args))


def report(args=None):
    return _exec("ncclguard-report", sys.argv[1:] if args is None else list(args))
