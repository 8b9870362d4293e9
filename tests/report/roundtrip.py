"""roundtrip.py SCHEMA_PY TRACE REPORT_JSON FORMAT WRITER: checks that every key of the log schema,
written by WRITER (c: tests/report/logkeys.c through shim/log.c; py: tests/report/pykeys.py through
the Python hook's writer) in FORMAT (text or json), comes back out of ncclguard-report --trace with
its value and its type, and that --json's first_error holds the fields it shows. Prints "good"."""
import json
import socket
import sys

sys.path.insert(0, sys.argv[1])
import _schema  # noqa: E402

trace = json.load(open(sys.argv[2]))
report = json.load(open(sys.argv[3]))
fmt, writer = sys.argv[4], sys.argv[5]
ev = trace["traceEvents"]
MSG = 'a "quoted" msg with = and \\ and a\nnewline'
STR = {"fn": "ncclCommWindowRegister", "decision": "error", "reason": "not_vmm",
       "result": "ncclInvalidArgument"}

want = {}
for i, (k, t, w) in enumerate(_schema.KEYS):
    if t == "int":
        v = 1000 + i
    elif t == "float":
        v = i + 0.5
    elif t == "ptr":
        v = "0x%x" % (0x1000 + i)
    elif t == "hex64":
        v = "%016x" % (0x0123456789abc000 + i)
    elif t == "any":
        k, v = "NCCLGUARD_TIMEOUT", "v_NCCLGUARD_"
    else:
        v = STR.get(k, "v_" + k)
    want[k] = v

calls = [e for e in ev if e["ph"] == "X" and e["name"] == "ncclCommWindowRegister"]
assert len(calls) == 1, calls
e = calls[0]
a = e["args"]
seen = set()
for k, t, w in _schema.KEYS:
    if t == "any":
        k = "NCCLGUARD_TIMEOUT"
    seen.add(k)
    if k == "ts":
        if fmt == "json":
            assert e["ts"] > 1.7e15, e["ts"]   # microseconds since the epoch, minus the duration
        else:
            assert "ts" not in a, a
        continue
    if k == "host":
        names = [m["args"]["name"] for m in ev if m["ph"] == "M" and m["name"] == "process_name" and m["pid"] == e["pid"]]
        assert names == ["host " + socket.gethostname().split(".")[0]], names
        continue
    if k == "fn":
        assert e["name"] == want["fn"]
        continue
    if k == "us":
        assert e["dur"] == want["us"] and type(e["dur"]) is float, e["dur"]
        continue
    if k in ("pid", "tid"):
        assert isinstance(a[k], int) and a[k] > 0, (k, a)
        continue
    if k == "dev":
        assert a[k] == 7, a
        continue
    if k == "level":
        assert a[k] == "WARN", a
        continue
    if k == "msg":
        assert a[k] == MSG, repr(a[k])
        continue
    if k == "truncated":
        if writer == "c":  # the C writer's second line did not fit
            cut = [x for x in ev if x["name"] == "ncclCommDestroy"]
            assert len(cut) == 1 and cut[0]["args"]["truncated"] is True and cut[0]["args"]["group"].endswith("..."), cut
            assert "state" not in cut[0]["args"] and "msg" not in cut[0]["args"], cut
        continue
    assert k in a, (k, sorted(a))
    assert a[k] == want[k] and type(a[k]) is type(want[k]), (k, a[k], want[k])
# the args hold nothing the schema lacks, and the writer kept the schema's order
assert set(a) <= seen, set(a) - seen
order = [k for k in a if k not in ("pid", "tid", "dev", "level")]
rows = {k: i for i, (k, t, w) in enumerate(_schema.KEYS)}
idx = [rows.get(k, rows["NCCLGUARD_"]) for k in order]
assert idx == sorted(idx), order
# the header line: schema version first
hdr = [x for x in ev if x["name"] == "log"]
assert len(hdr) == 1 and hdr[0]["args"]["schema"] == _schema.SCHEMA and hdr[0]["ph"] == "i", hdr
# the report's first error: the fields it shows, from the same line
f = report["first_error"]
for k in ("cid", "result", "decision", "reason", "msg"):
    assert f[k] == want[k] if k != "msg" else f[k] == MSG.replace("\n", " "), (k, f[k])
for k in ("rank", "seq", "bad_rank"):
    assert f[k] == want[k], (k, f[k], want[k])
assert f["level"] == "WARN" and f["fn"] == want["fn"] and f["host"] == socket.gethostname().split(".")[0], f
print("good")
