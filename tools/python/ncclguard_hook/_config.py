"""The NCCLGUARD_* variables as the library reads them (shim/vars.c), for the Python hook.

The table itself is _vars.py, generated from shim/vars.def by the build (genvars --py): names,
kinds, defaults, ranges, choices, and the value grammar (the words of a boolean, the regular
expressions of numbers). Nothing of it is written here.
"""

import os
import re

try:
    from . import _vars
except ImportError:  # an unbuilt checkout: no table, every variable keeps its default
    _vars = None


def _parse(kind, v, lo, hi, choices):
    """The parsed value of text v, or None when v is not valid (shim/vars.c ng_var_check)."""
    if kind == "BOOL":
        s = v.lower()
        if s in _vars.BOOL_TRUE:
            return True
        if s in _vars.BOOL_FALSE:
            return False
        return None
    if kind == "ENUM":
        s = v.lower()
        return s if s in choices else None
    if kind in ("INT", "NUM"):
        if not re.fullmatch(_vars.INT_RE if kind == "INT" else _vars.NUM_RE, v):
            return None
        x = int(v) if kind == "INT" else float(v)
        return x if lo <= x <= hi else None
    if kind == "PATH":
        return v if len(v.encode("utf-8", "surrogateescape")) < _vars.PATH_MAX else None
    return None


def get(name, environ=None):
    """(value, warning) of variable `name`: its parsed value (bool, str, int or float; a PATH's
    text, "" when unset) and None, or the default and the library's warning for a bad value."""
    env = os.environ if environ is None else environ
    if _vars is None or name not in _vars.VARS:
        raise KeyError(name)
    kind, default, lo, hi, choices, expect = _vars.VARS[name]
    v = env.get(name)
    if kind == "PATH":
        return (v or "", None) if v is None or _parse(kind, v, lo, hi, choices) is not None \
            else ("", _vars.BAD_VALUE_FMT % (name, "(too long)", expect, default))
    dflt = _parse(kind, default, lo, hi, choices)
    if v is None:
        return dflt, None
    x = _parse(kind, v, lo, hi, choices)
    if x is None:
        return dflt, _vars.BAD_VALUE_FMT % (name, v, expect, default)
    return x, None


def available():
    """Whether the generated table is there (run `make` in a checkout)."""
    return _vars is not None


def _distance(a, b):
    """Edit distance of a and b, in any case (shim/vars.c's, for the closest name)."""
    a, b = a.lower()[:63], b.lower()[:63]
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        diag, row[0] = row[0], i
        for j in range(1, len(b) + 1):
            up = row[j]
            row[j] = min(diag + (a[i - 1] != b[j - 1]), up + 1, row[j - 1] + 1)
            diag = up
    return row[len(b)]


def closest(name):
    """The variable of the table whose name is closest to `name` (the first of equals, in the table's
    order), as the library and ncclguard-run name it."""
    best, bd = "-", None
    for n in _vars.VARS:
        if n == "NCCLGUARD":
            continue
        d = _distance(name, n)
        if bd is None or d < bd:
            best, bd = n, d
    return best


def problems(environ=None):
    """The refusal line of each NCCLGUARD_* variable of the environment that has a value that is not
    valid or is no variable of the table, in name order (NCCLGUARD itself is the caller's)."""
    env = os.environ if environ is None else environ
    out = []
    if _vars is None:
        return out
    for name in sorted(k for k in env if k.startswith("NCCLGUARD_")):
        if name not in _vars.VARS:
            out.append(_vars.REFUSED_VAR_FMT % (name, closest(name)))
        elif get(name, env)[1]:
            v = env[name]
            kind, expect = _vars.VARS[name][0], _vars.VARS[name][5]
            out.append(_vars.REFUSED_VALUE_FMT % (name, "(too long)" if kind == "PATH" else v, expect))
    lf = log_file_problem(env.get("NCCLGUARD_LOG_FILE"))
    if lf:
        out.append(lf)
    return out


def log_file_problem(path):
    """Why the library could not write NCCLGUARD_LOG_FILE=path (it would fall back to stderr in every
    process), or None: the launcher's check. A directory naming %h, %p or %r is known only in each process."""
    if not path:
        return None
    d = os.path.dirname(path) or "."
    if any(x in d for x in ("%h", "%p", "%r")):
        return None
    real = os.path.realpath(d)
    if real in ("/proc", "/sys") or real.startswith(("/proc/", "/sys/")):
        return "NCCLGUARD_LOG_FILE=%s: %s is a kernel file system, where no log file can be created (name a file " \
            "in a directory of yours)" % (path, d)
    if not os.path.isdir(d):
        return "NCCLGUARD_LOG_FILE=%s: directory %s does not exist (create it, or use ncclguard-run --log-dir DIR, " \
            "which does)" % (path, d)
    f = path if "%" not in os.path.basename(path) else None
    if f and os.path.exists(f):
        if os.path.isdir(f):
            return "NCCLGUARD_LOG_FILE=%s is a directory (name a file in it, or use ncclguard-run --log-dir)" % path
        if not os.access(f, os.W_OK):
            return "NCCLGUARD_LOG_FILE=%s: the file is not writable by this user (name another)" % path
    elif not os.access(d, os.W_OK | os.X_OK):
        return "NCCLGUARD_LOG_FILE=%s: directory %s is not writable by this user (name a writable one)" % (path, d)
    return None


def strict(environ=None):
    """NCCLGUARD_STRICT: True unless set to a valid false value."""
    if _vars is None or "NCCLGUARD_STRICT" not in _vars.VARS:
        return True
    return get("NCCLGUARD_STRICT", environ)[0] is not False
