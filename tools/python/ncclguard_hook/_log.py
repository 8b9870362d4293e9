"""Log lines in the library's format (docs/LOG.md), to the library's destination.

Text:  host:pid:tid [dev] NCCLGUARD LEVEL key=value ... msg="..."
JSON:  {"ts":..,"host":..,"pid":..,"tid":..,"dev":..,"level":..,<keys>..,"msg":..}

The keys, their order and their types come from the library's table (shim/logschema.def), through
the generated _schema.py; a file this module creates begins with the schema's header line.

Settings are read once, at the first line: NCCLGUARD_LOG (off|warn|info|trace, default warn),
NCCLGUARD_LOG_FORMAT (text|json), NCCLGUARD_LOG_FILE (%h host, %p pid, %r rank, %% percent;
stderr when unset). Bad values fall back to the defaults silently: the library reports them.
The file is opened in append mode without following a symbolic link, mode 0644, and each line
is written with one os.write, so lines from the library and from Python never interleave.
"""

import os
import sys
import threading

from . import _schema

OFF, WARN, INFO, TRACE = 0, 1, 2, 3
_LEVELS = {"off": OFF, "warn": WARN, "info": INFO, "trace": TRACE}
_NAMES = {WARN: "WARN", INFO: "INFO", TRACE: "TRACE"}

# The variables the library reads for %r, in its order (shim/log.c env_rank).
_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID",
              "MV2_COMM_WORLD_RANK")

# The schema: the prefix keys (the line's fixed start), then each key's type and place in a line.
_PREFIX = tuple(k for k, _t, w in _schema.KEYS if w == "prefix")
_TYPE = {k: t for k, t, _w in _schema.KEYS}
_ORDER = {k: i for i, (k, _t, _w) in enumerate(_schema.KEYS)}
_PREFIXED = tuple((k, t) for k, t, _w in _schema.KEYS if k.endswith("_"))  # NCCLGUARD_*: a prefix


def key_type(k):
    """The schema's type of key k (KeyError when the table has no such key)."""
    t = _TYPE.get(k)
    if t is None:
        for p, pt in _PREFIXED:
            if k.startswith(p):
                return pt
        raise KeyError(k)
    return t


def _typed(k, v):
    """v as the schema's type of k says: int, float, or the string the library writes."""
    try:
        t = key_type(k)
    except KeyError:
        t = "any"
    if isinstance(v, bool):
        v = int(v)
    try:
        if t == "int" or t == "bool":
            return int(v)
        if t == "float":
            return round(float(v), 1)  # the library prints %.1f
        if t == "ptr":
            return v if isinstance(v, str) and v.startswith("0x") else ptr(v)
        if t == "hex64":
            return v if isinstance(v, str) else "%016x" % (int(v) & (2 ** 64 - 1))
    except (TypeError, ValueError):
        pass
    return v if isinstance(v, (int, float)) and t == "any" else str(v)


def _ordered(kvs):
    """kvs in the schema's order (stable; keys the table lacks keep their place at the end)."""
    n = len(_ORDER)
    return sorted(kvs, key=lambda kv: _ORDER.get(kv[0], _ORDER.get("NCCLGUARD_", n) if kv[0].startswith("NCCLGUARD_") else n))


_lock = threading.Lock()
_cfg = None  # (level, json, file pattern) once read
_fd = None
_fd_pid = None
_host = None


def _config():
    global _cfg
    if _cfg is None:
        level = _LEVELS.get(os.environ.get("NCCLGUARD_LOG", "warn").strip().lower(), WARN)
        json_ = os.environ.get("NCCLGUARD_LOG_FORMAT", "text").strip().lower() == "json"
        _cfg = (level, json_, os.environ.get("NCCLGUARD_LOG_FILE", ""))
    return _cfg


def enabled(level):
    lvl = _config()[0]
    return lvl != OFF and level <= lvl


def _hostname():
    global _host
    if _host is None:
        try:
            import socket
            h = socket.gethostname()
        except Exception:  # noqa: BLE001
            h = ""
        _host = (h or "unknown").split(".", 1)[0]
    return _host


def _rank():
    for v in _RANK_VARS:
        s = os.environ.get(v, "")
        if s.isdigit() and int(s) < (1 << 30):
            return str(int(s))
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return str(dist.get_rank())
    except Exception:  # noqa: BLE001
        pass
    return "p%d" % os.getpid()


def expand_path(pat):
    out = []
    i = 0
    while i < len(pat):
        c = pat[i]
        if c == "%" and i + 1 < len(pat):
            i += 1
            c = pat[i]
            if c == "h":
                out.append(_hostname())
            elif c == "p":
                out.append(str(os.getpid()))
            elif c == "r":
                out.append(_rank())
            elif c == "%":
                out.append("%")
            else:
                out.append("%" + c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _write_all(fd, data):
    while data:
        try:
            n = os.write(fd, data)
        except InterruptedError:
            continue
        except OSError:
            return
        if n <= 0:
            return
        data = data[n:]


def _get_fd():
    """The log's file descriptor: the file opened at the first line, or 2."""
    global _fd, _fd_pid
    pid = os.getpid()
    pat = _config()[2]
    # A forked child with %p in the pattern opens its own file, as the library does.
    if _fd is not None and (_fd_pid == pid or "%p" not in pat):
        return _fd
    fd = 2
    if pat:
        path = expand_path(pat)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        for f in ("O_CLOEXEC", "O_NOFOLLOW", "O_NOCTTY"):
            flags |= getattr(os, f, 0)
        try:
            fd = os.open(path, flags, 0o644)
            if os.fstat(fd).st_size == 0:  # this process created it: the schema's header line
                _write_all(fd, _format(INFO, -1, [("fn", "log"), ("schema", _schema.SCHEMA)],
                                       "ncclguard Python hook log, schema %d: keys and types in docs/LOG.md"
                                       % _schema.SCHEMA))
        except OSError as e:
            fd = 2
            line = _format(WARN, -1, [("fn", "log")],
                           "cannot open NCCLGUARD_LOG_FILE %s: %s (a symbolic link is refused); "
                           "logging to stderr" % (pat, e.strerror or e), force_text=True)
            _write_all(2, line)
    if _fd is not None and _fd > 2 and _fd_pid != pid:
        try:
            os.close(_fd)
        except OSError:
            pass
    _fd, _fd_pid = fd, pid
    return fd


def _escape(s):
    out = []
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif o < 0x20:
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    return "".join(out)


def _text_value(v):
    """The library's rule: quoted when empty or holding a space, tab, quote or '='."""
    s = str(v)
    if not s or any(c in s for c in ' \t"='):
        return '"' + _escape(s) + '"'
    return _escape(s)


def _format(level, dev, kvs, msg, force_text=False):
    import time
    json_ = _config()[1] and not force_text
    tid = threading.get_native_id() if hasattr(threading, "get_native_id") else 0
    kvs = [(k, _typed(k, v)) for k, v in _ordered(kvs) if k not in _PREFIX and k != "msg"]
    prefix = {"ts": round(time.time(), 6), "host": _hostname(), "pid": os.getpid(), "tid": tid,
              "dev": dev, "level": _NAMES.get(level, "TRACE")}
    if json_:
        import json
        obj = {k: prefix[k] for k in _PREFIX}
        for k, v in kvs:
            obj[k] = v
        if msg is not None:
            obj["msg"] = str(msg)
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8", "replace")
    parts = ["%s:%d:%d [%d] NCCLGUARD %s" % (prefix["host"], prefix["pid"], tid, dev, prefix["level"])]
    for k, v in kvs:
        if isinstance(v, float):
            parts.append("%s=%.1f" % (k, v))
        elif isinstance(v, int):
            parts.append("%s=%d" % (k, v))
        else:
            parts.append("%s=%s" % (k, _text_value(v)))
    if msg is not None:
        parts.append('msg="' + _escape(str(msg)) + '"')
    return (" ".join(parts) + "\n").encode("utf-8", "replace")


def ptr(v):
    """A pointer the way the library prints it: 0x... , 0x0 for NULL."""
    try:
        return "0x%x" % int(v)
    except Exception:  # noqa: BLE001
        return "0x0"


def log(level, kvs, msg, dev=-1):
    """kvs: list of (key, value) in the DESIGN.md order, starting with fn. Never raises."""
    try:
        if not enabled(level):
            return
        line = _format(level, dev, kvs, msg)
        with _lock:
            _write_all(_get_fd(), line)
    except Exception:  # noqa: BLE001 - logging must never break the program
        pass


def reset_for_tests():
    global _cfg, _fd, _fd_pid
    _cfg = None
    if _fd is not None and _fd > 2:
        try:
            os.close(_fd)
        except OSError:
            pass
    _fd = _fd_pid = None
