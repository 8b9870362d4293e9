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
