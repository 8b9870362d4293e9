"""ncclguard: safe NCCL window registration (see README.md).

Importing this package turns ncclguard on in the current process (the first line of a script:
`import ncclguard`), unless NCCLGUARD is set to a false value (0/false/no/off); with
NCCLGUARD=1 in the environment, the ncclguard.pth start-up file of this environment imports it
before the program starts. Turning on means: libncclguard.so is loaded into the global symbol
scope (before NCCL, which PyTorch loads later), LD_PRELOAD and NCCLGUARD=1 are exported so child
processes are guarded too, and the PyTorch hook (ncclguard_hook) is installed. If NCCL is already
loaded, one line says so and nothing is done. Details: ncclguard._boot.

ncclguard's own console scripts (ncclguard-run, ncclguard-doctor, ncclguard-report) and
`python -m ncclguard` import this package only to find their files; they do not turn it on in
their own process.
"""

import os as _os
import sys as _sys

try:
    from ._version import __revision__, __version__
except ImportError:  # a source checkout, not a build: VERSION two levels up
    __revision__ = ""
    try:
        with open(_os.path.join(_os.path.dirname(__file__), "..", "..", "VERSION")) as _f:
            __version__ = _f.read().strip()
    except OSError:
        __version__ = "unknown"

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def library_path():
    """The absolute path of this package's libncclguard.so (for LD_PRELOAD=...); in a source checkout
    used without installing, the checkout's build/libncclguard.so where it is built."""
    packaged = _os.path.join(_HERE, "lib", "libncclguard.so")
    built = _os.path.normpath(_os.path.join(_HERE, "..", "..", "build", "libncclguard.so"))
    if not _os.path.isfile(packaged) and _os.path.isfile(built):
        return built
    return packaged


def docs_path():
    """The folder of the documentation (README.md, CHANGELOG.md, docs/, tools/README.md,
    tools/python/README.md, in the source tree's layout): in the package when installed with pip,
    else the source tree this package is in."""
    installed = _os.path.join(_HERE, "docs")
    if _os.path.isfile(_os.path.join(installed, "README.md")):
        return installed
    return _os.path.normpath(_os.path.join(_HERE, "..", ".."))


def tool_path(name):
    """The absolute path of one of the packaged tools: ncclguard-run, -doctor, -report."""
    return _os.path.join(_HERE, "bin", name)


def activate():
    """Turn ncclguard on in this process (what `import ncclguard` does; idempotent).
    Returns a short state string: see ncclguard._boot.activate."""
    from . import _boot
    return _boot.activate()


def state():
    """What activation did in this process: None (not tried), or a string such as 'loaded',
    'preloaded', 'nccl_already_loaded', 'off', 'load_failed'."""
    from . import _boot
    return _boot.STATE.get("state")


def _own_cli():
    """True in ncclguard's own console scripts and `python -m ncclguard` (3.10+: sys.orig_argv)."""
    a0 = _sys.argv[0] if getattr(_sys, "argv", None) else ""
    if _os.path.basename(a0) in ("ncclguard-run", "ncclguard-doctor", "ncclguard-report"):
        return True
    if a0 == "-m":  # runpy is locating the module: is it us?
        o = list(getattr(_sys, "orig_argv", ()))
        for i in range(1, len(o)):
            if o[i] == "-m":
                return o[i + 1:i + 2] == ["ncclguard"]
            if o[i].startswith("-m"):
                return o[i][2:] == "ncclguard"
    return False


if not _own_cli():
    activate()
