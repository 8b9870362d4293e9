"""Turning ncclguard on from Python (`import ncclguard`, or NCCLGUARD=1 through ncclguard.pth).

activate(), once per process:
0. NCCLGUARD set to a false value (0/false/no/off): nothing, nothing checked. Otherwise every
   NCCLGUARD_* variable of the environment and NCCLGUARD are judged by the table: under
   NCCLGUARD_STRICT (the default) a value that is not valid or an unknown NCCLGUARD_* name (the
   closest variable named) refuses: one line each on stderr; after `import ncclguard`, status 2
   (SystemExit); at interpreter start (NCCLGUARD=1 through ncclguard.pth), where most programs never use
   NCCL, the program runs and ncclguard is turned on refusing its NCCL communicators (ncclInvalidUsage,
   the library's ncclguard_refuse_communicators, reason=config_refused), an invalid NCCLGUARD included.
   NCCLGUARD_STRICT=0: warnings (the library's at load).
1. NCCLGUARD neither true nor false (not strict): one WARN line, nothing else.
   The verdict on a value is the table's (shim/vars.def, through ncclguard_hook._config: the words
   in any case, nothing stripped), the one the launcher and the doctor give: switch().
2. libncclguard.so already mapped (LD_PRELOAD, ncclguard-run, a parent that exported it, or
   another installed copy): not loaded again.
   Otherwise, if a libnccl.so* is already mapped: one WARN line saying so, and nothing else
   (too late: calls already bound to NCCL would bypass ncclguard).
   Otherwise: ctypes.CDLL(lib, RTLD_GLOBAL), so that a library loaded later with RTLD_LOCAL
   (PyTorch's libtorch_cuda.so and its libnccl.so.2) binds its NCCL calls to ncclguard. The library
   is $NCCLGUARD_LIB if set, else the packaged one.
3. For child processes: LD_PRELOAD gets the library prepended (unless a libncclguard is already
   in it: never two copies), so non-Python children (and Python children without this package)
   are guarded from their start; NCCLGUARD=1 is exported so Python children of this environment
   install the PyTorch hook too. A child that has it preloaded does not load it again (step 2).
4. The PyTorch hook: ncclguard_hook.install() unless NCCLGUARD_PYHOOK is false or
   NCCLGUARD_DISABLE is true (ncclguard_hook.enabled(), the launcher's rule).
5. The ctypes hook (loaded or preloaded): ctypes bindings that load libnccl themselves and look its
   functions up by attribute (vLLM's legacy pynccl_wrapper.py, SGLang's and LightLLM's pynccl) do
   dlsym(handle, name). Preloaded on x86_64, ncclguard's own dlsym answers those; loaded here, glibc's
   dlsym comes first in the global scope and would hand them NCCL's functions. So CDLL.__getitem__
   (which attribute access goes through) asks the library's ncclguard_handle_sym(handle, name) for every
   name starting with "nccl" after ctypes' own lookup: for a wrapped name on a libnccl's handle,
   ncclguard's function (or, on a second copy of libnccl, ncclguard's entry point for that copy);
   else None and ctypes' answer stands (collectives, other libraries, NCCLGUARD_DLSYM=0). Before it,
   on CDLL(None), a name the loaded NCCL lacks raises AttributeError (ctypes alone would find
   ncclguard's export answering NULL). Every other behaviour of ctypes is unchanged.
Messages go through the hook's logger: the library's line format, NCCLGUARD_LOG level and
NCCLGUARD_LOG_FILE (stderr by default), fn=python.activate. Nothing here raises but the refusal (step 0).
"""

import importlib.util
import os
import sys

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

STATE = {}


def _hook_from_checkout():
    """A source checkout used without installing (PYTHONPATH=python): ncclguard_hook, the table every
    NCCLGUARD_* value is judged by, lives in tools/python beside it; that folder goes last on
    sys.path so the checks and the hook are the installed package's. Installed, nothing is done."""
    try:
        if importlib.util.find_spec("ncclguard_hook") is not None:
            return
    except (ImportError, ValueError):
        return
    d = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "python"))
    if os.path.isfile(os.path.join(d, "ncclguard_hook", "_vars.py")) and d not in sys.path:
        sys.path.append(d)


_hook_from_checkout()


def _warn(msg):
    try:
        from ncclguard_hook import _log
        _log.log(_log.WARN, [("fn", "python.activate")], msg)
    except Exception:  # noqa: BLE001 - the hook's logger missing or changed: a plain line
        try:
            sys.stderr.write("ncclguard: %s\n" % msg)
        except Exception:  # noqa: BLE001
            pass


def switch(environ=None):
    """NCCLGUARD's verdict: (None, None) unset; (True or False, None) a valid value; (False, warning)
    a value that is not valid (not turned on). The table's reader when it is there (a built checkout,
    the wheel), else the same words."""
    env = os.environ if environ is None else environ
    v = env.get("NCCLGUARD")
    if v is None:
        return None, None
    expect = "1/0, true/false, yes/no or on/off"
    try:
        from ncclguard_hook import _config, _vars
        if _config.available():
            x, bad = _config.get("NCCLGUARD", {"NCCLGUARD": v})
            if not bad:
                return bool(x), None
            expect = _vars.VARS["NCCLGUARD"][5]
            x = None
        else:
            raise ImportError
    except Exception:  # noqa: BLE001 - no table (an unbuilt checkout): the same words
        s = v.lower()
        x = True if s in _TRUE else False if s in _FALSE else None
    if x is not None:
        return x, None
    return False, "NCCLGUARD=%.60s is not valid (expected %s); not turned on" % (v, expect)


def _mapped():
    """The files mapped into this process, in load order (/proc/self/maps)."""
    seen, out = set(), []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    p = parts[5].rstrip("\n")
                    if p.endswith(" (deleted)"):
                        p = p[:-10]
                    if p not in seen:
                        seen.add(p)
                        out.append(p)
    except OSError:
        pass
    return out


def _is_guard(path):
    return os.path.basename(path).startswith("libncclguard")


def _is_nccl(path):
    return os.path.basename(path).startswith("libnccl.so")


def _export_for_children(lib):
    pre = os.environ.get("LD_PRELOAD", "")
    entries = [e for e in pre.replace(" ", ":").split(":") if e]
    if not any(_is_guard(e) for e in entries):
        os.environ["LD_PRELOAD"] = lib + (":" + pre if pre else "")
        STATE["exported_preload"] = pre if pre else None
    on, bad = switch()
    if on is not True and not bad:  # (a value that is not valid stays: the children judge it as this one did)
        STATE["exported_ncclguard"] = os.environ.get("NCCLGUARD")
        os.environ["NCCLGUARD"] = "1"


def undo_exports():
    """Put back the environment activate() changed (for a process about to exec something that
    must not inherit them: `python -m ncclguard` on Python < 3.10)."""
    if "exported_preload" in STATE:
        old = STATE.pop("exported_preload")
        if old is None:
            os.environ.pop("LD_PRELOAD", None)
        else:
            os.environ["LD_PRELOAD"] = old
    if "exported_ncclguard" in STATE:
        old = STATE.pop("exported_ncclguard")
        if old is None:
            os.environ.pop("NCCLGUARD", None)
        else:
            os.environ["NCCLGUARD"] = old


def _install_hook():
    try:
        import ncclguard_hook
        on, warnings = ncclguard_hook.enabled()
        if warnings:
            for w in warnings:
                _warn(w)
        if on:
            ncclguard_hook.install()
        STATE["pyhook"] = bool(on)
    except Exception:  # noqa: BLE001 - the hook is optional; the library does the rest
        STATE["pyhook"] = False


def _hook_ctypes(guard):
    """Step 5. `guard`: a ctypes.CDLL of the loaded libncclguard.so."""
    import ctypes
    orig = ctypes.CDLL.__getitem__
    if getattr(orig, "_ncclguard", False):
        return
    try:
        pick = guard.ncclguard_handle_sym
    except AttributeError:  # an older library without it: ctypes stays as it is
        return
    pick.restype = ctypes.c_void_p
    pick.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

    def __getitem__(self, name_or_ordinal):
        if isinstance(name_or_ordinal, str) and name_or_ordinal.startswith("nccl"):
            try:
                absent = pick(self._handle, name_or_ordinal.encode()) == 1
            except Exception:  # noqa: BLE001 - ctypes' answer
                absent = False
            if absent:  # CDLL(None) of a name the loaded NCCL lacks: not found, as without ncclguard
                raise AttributeError("%s: undefined symbol: %s" % (self._name, name_or_ordinal))
        func = orig(self, name_or_ordinal)  # ctypes' own answer first: a missing name raises as before
        if isinstance(name_or_ordinal, str) and name_or_ordinal.startswith("nccl"):
            try:
                addr = pick(self._handle, name_or_ordinal.encode())
            except Exception:  # noqa: BLE001 - keep ctypes' answer
                addr = None
            if addr:
                func = self._FuncPtr(addr)
                func.__name__ = name_or_ordinal
        return func

    __getitem__._ncclguard = True
    __getitem__.__wrapped__ = orig
    ctypes.CDLL.__getitem__ = __getitem__
    STATE["ctypes_hook"] = True


def activate():
    if "state" in STATE:
        return STATE["state"]
    try:
        return _activate()
    except Exception as err:  # noqa: BLE001 - never break the program's start
        STATE["state"] = "error"
        _warn("not turned on: %s: %s" % (err.__class__.__name__, err))
        return "error"


def _in_site():
    """True while the interpreter's start-up runs this (ncclguard.pth, through the site module)."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_globals.get("__name__") == "site":
            return True
        f = f.f_back
    return False


def _refuse(lines, switch_bad=False):
    """NCCLGUARD_STRICT: one line each on stderr, then the program does not start (status 2). At
    interpreter start (ncclguard.pth) os._exit: an exception there is a fatal error of the site
    module with its traceback; after it (import ncclguard) SystemExit, so that finally clauses and
    atexit handlers run."""
    try:
        for i, line in enumerate(lines):
            sys.stderr.write("ncclguard: %s%s\n" % (line, "; not started (NCCLGUARD_STRICT=0: %s)" % (
                "warn and run without ncclguard" if switch_bad else "warn and run") if i == len(lines) - 1 else ""))
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - still refused
        pass
    STATE["state"] = "refused"
    if _in_site():
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(2)
    raise SystemExit(2)


def _check(bad):
    """Step 0: the NCCLGUARD_* variables of the environment and NCCLGUARD (`bad`: its refusal, or None)
    judged by the table. NCCLGUARD_STRICT (the default): any that is wrong refuses the start. Not
    strict: NCCLGUARD's warning here, the others' from the library at load."""
    lines = []
    try:
        from ncclguard_hook import _config
        if _config.available():
            if not _config.strict():
                return
            lines = _config.problems()
    except Exception:  # noqa: BLE001 - no table (an unbuilt checkout): NCCLGUARD's own verdict alone
        pass
    if bad:
        lines.insert(0, bad.split("; not turned on")[0])
    if lines:
        if _in_site():
            _defer(lines)
            return True
        _refuse(lines, switch_bad=bool(bad))
    return False


def _defer(lines):
    """NCCLGUARD_STRICT at interpreter start (NCCLGUARD=1 through ncclguard.pth): most Python programs of
    the environment never use NCCL (pip, Jupyter, the doctor), so none is stopped; ncclguard is turned on
    and refuses the NCCL communicators this program creates (the library's
    ncclguard_refuse_communicators), naming the lines. The lines go to stderr once, at the start."""
    STATE["refuse"] = "; ".join(lines)
    try:
        for i, line in enumerate(lines):
            sys.stderr.write("ncclguard: %s%s\n" % (line, "; this program runs, its NCCL communicators are refused "
                             "(NCCLGUARD_STRICT=0: warn and run)" if i == len(lines) - 1 else ""))
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - the library still refuses
        pass


def _refuse_comms(guard):
    """Hands the deferred refusal (STATE["refuse"]) to the library: its root communicators fail from now on."""
    why = STATE.get("refuse")
    if not why or guard is None:
        return
    try:
        guard.ncclguard_refuse_communicators(why.encode("utf-8", "replace"))
        STATE["refusing"] = True
    except (AttributeError, TypeError, ValueError) as err:
        _warn("the refusal of NCCL communicators is not in effect: %s: %s" % (err.__class__.__name__, err))


def _activate():
    on, bad = switch()
    if on is False and not bad:
        STATE["state"] = "off"
        return "off"
    deferred = _check(bad)
    if on is False and not deferred:
        _warn(bad)
        STATE["state"] = "off"
        return "off"
    from . import library_path
    lib = os.environ.get("NCCLGUARD_LIB") or library_path()
    maps = _mapped()
    guards = [p for p in maps if _is_guard(p)]
    guard = None
    if guards:
        STATE["state"] = "preloaded"
        lib = guards[0]
        try:
            import ctypes
            guard = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        except (OSError, AttributeError):
            guard = None
    else:
        nccl = [p for p in maps if _is_nccl(p)]
        if nccl:
            STATE["state"] = "nccl_already_loaded"
            _warn("not turned on: NCCL is already loaded in this process (%s); turn ncclguard on "
                  "before NCCL is loaded: NCCLGUARD=1 in the environment at start, `import ncclguard` "
                  "before torch, or ncclguard-run" % nccl[0])
            return STATE["state"]
        lib = os.path.abspath(lib)
        try:
            import ctypes
            guard = ctypes.CDLL(lib, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
        except OSError as err:
            STATE["state"] = "load_failed"
            _warn("not turned on: cannot load %s (%s)" % (lib, err))
            return STATE["state"]
        STATE["state"] = "loaded"
    STATE["lib"] = lib
    _refuse_comms(guard)
    _export_for_children(lib)
    if guard is not None:
        try:
            _hook_ctypes(guard)
        except Exception as err:  # noqa: BLE001 - the library still guards everything else
            _warn("ctypes bindings are not reached: %s: %s" % (err.__class__.__name__, err))
    _install_hook()
    return STATE["state"]
