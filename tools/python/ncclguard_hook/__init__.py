"""ncclguard's Python start-up hook (see tools/python/README.md).

sitecustomize.py calls start() at interpreter start-up. start() does two things:

1. unless NCCLGUARD_PYHOOK is false or NCCLGUARD_DISABLE is true, it puts a small finder on
   sys.meta_path that waits for `torch.distributed._symmetric_memory` to be imported by the
   program and then wraps its `rendezvous` (ncclguard_hook._symm). torch is never imported here;
   a program that never imports it sees nothing but one finder that declines every other name.
2. it runs the next `sitecustomize` on sys.path, the one this directory shadows, so a user's or
   a distribution's own sitecustomize keeps working.

Everything is guarded: an error here never stops the program.
"""

import os
import sys

TARGET = "torch.distributed._symmetric_memory"
_WATCH = (TARGET, "torch.distributed")

_installed = False
_finder = None


def enabled():
    """(on, warnings): whether the hook should be installed in this process. The variables are
    read as the library reads them (_config, from the table shim/vars.def)."""
    from . import _config
    warnings = []
    if not _config.available():  # _vars.py missing (a damaged install): say so, keep the default (on)
        return True, ["the hook's table of variables (_vars.py) is missing: NCCLGUARD_* are read as their defaults"]
    on, bad = _config.get("NCCLGUARD_PYHOOK")
    if bad is not None:
        warnings.append(bad)
    # The library reports a bad NCCLGUARD_DISABLE itself; its default (not disabled) is kept.
    disabled, _ = _config.get("NCCLGUARD_DISABLE")
    return (on and not disabled), warnings


class _Loader(object):
    """Runs the real loader, then lets `after` patch the fresh module. Everything else is
    delegated, and the module's __loader__/__spec__.loader are put back to the real one."""

    def __init__(self, real, after):
        self._real = real
        self._after = after

    def __getattr__(self, name):
        return getattr(self._real, name)

    def create_module(self, spec):
        create = getattr(self._real, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        try:
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self._real
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self._real
        except Exception:  # noqa: BLE001
            pass
        self._real.exec_module(module)
        try:
            self._after(module)
        except Exception:  # noqa: BLE001 - never break the user's import
            pass


class _Finder(object):
    """A meta path finder that only answers for the names in _WATCH (and only once each)."""

    def __init__(self):
        self._busy = set()
        self._done = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _WATCH or fullname in self._busy or fullname in self._done:
            return None
        self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self:
                    continue
                fs = getattr(finder, "find_spec", None)
                if fs is None:
                    continue
                try:
                    spec = fs(fullname, path, target)
                except Exception:  # noqa: BLE001
                    spec = None
                if spec is not None:
                    break
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return None
            self._done.add(fullname)
            spec.loader = _Loader(spec.loader, _after_import)
            return spec
        finally:
            self._busy.discard(fullname)

    # Python < 3.4 style; not needed, kept so old tools that call it get "not mine".
    def find_module(self, fullname, path=None):  # pragma: no cover
        return None


def _after_import(module):
    from . import _symm
    name = getattr(module, "__name__", "")
    if name == TARGET:
        _symm.patch_module(module)
    elif name == "torch.distributed":
        _symm.check_torch_distributed(module)
    _maybe_remove_finder()


def _maybe_remove_finder():
    if _finder is not None and all(n in _finder._done for n in _WATCH):
        try:
            sys.meta_path.remove(_finder)
        except ValueError:
            pass


def install():
    """Install the import hook (idempotent). Safe to call by hand: `import ncclguard_hook;
    ncclguard_hook.install()` in a program that was not started by ncclguard-run."""
    global _installed, _finder
    if _installed:
        return
    _installed = True
    mod = sys.modules.get(TARGET)
    if mod is not None:  # already imported (install() called late): patch now
        from . import _symm
        _symm.patch_module(mod)
        return
    _finder = _Finder()
    if "torch.distributed" in sys.modules:
        _finder._done.add("torch.distributed")
    sys.meta_path.insert(0, _finder)


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def chain_sitecustomize(our_file):
    """Import the next sitecustomize on sys.path after the directory of our_file, under the
    name sitecustomize (it replaces ours in sys.modules), the way site.py would have."""
    try:
        # The import system's own modules, loaded in every interpreter: importing importlib.util
        # would cost a program that never uses torch several milliseconds of start-up.
        boot = sys.modules.get("_frozen_importlib")
        ext = sys.modules.get("_frozen_importlib_external")
        if boot is None or ext is None or not hasattr(boot, "module_from_spec"):
            import importlib.machinery as ext
            import importlib.util as boot
        our_dir = os.path.dirname(os.path.abspath(our_file))
        entries = list(sys.path)
        start = None
        for i, e in enumerate(entries):
            d = os.path.abspath(e or os.getcwd())
            if os.path.isdir(d) and _same_file(d, our_dir):
                start = i + 1
                break
        if start is None:
            return None
        for e in entries[start:]:
            d = os.path.abspath(e or os.getcwd())
            if os.path.isdir(d) and _same_file(d, our_dir):
                continue
            try:
                spec = ext.PathFinder.find_spec("sitecustomize", [e])
            except Exception:  # noqa: BLE001
                spec = None
            if spec is None or spec.loader is None:
                continue
            if spec.origin and _same_file(spec.origin, our_file):
                continue
            module = boot.module_from_spec(spec)
            ours = sys.modules.get("sitecustomize")
            sys.modules["sitecustomize"] = module
            try:
                spec.loader.exec_module(module)
            except Exception as err:  # noqa: BLE001 - as site.py does for its own sitecustomize
                if ours is not None:
                    sys.modules["sitecustomize"] = ours
                if sys.flags.verbose:
                    sys.excepthook(*sys.exc_info())
                else:
                    sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                                     "%s: %s\n" % (err.__class__.__name__, err))
            return spec.origin
    except Exception:  # noqa: BLE001
        pass
    return None


def start(our_file):
    """Called by sitecustomize.py."""
    try:
        on, warnings = enabled()
        if warnings:
            from . import _log
            for w in warnings:
                _log.log(_log.WARN, [("fn", "config")], w)
        if on:
            install()
    except Exception:  # noqa: BLE001
        pass
    chain_sitecustomize(our_file)
