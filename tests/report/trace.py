"""trace.py TRACE EXPECT: the trace of ncclguard-report --trace is JSON in Chrome's object format,
with one track per rank and the expected slices. EXPECT is a JSON object: "ranks" (number of rank
tracks), "per_rank" ({rank: X slices}, "*" for every other rank), "args" (a list of [rank, seq,
{key: value}]: the registration slice of that rank and seq has these args), "ts" (optional
[rank, seq, ts, dur]). Prints "good <slices>"."""
import collections
import json
import sys

d = json.load(open(sys.argv[1]))
exp = json.loads(sys.argv[2])
ev = d["traceEvents"]
assert isinstance(ev, list) and ev, "no traceEvents"
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
x = [e for e in ev if e["ph"] == "X"]
for e in x:
    assert (e["pid"], e["tid"]) in names and e["pid"] in procs, e
    assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and e["name"] and "decision" in e["args"], e
    assert names[(e["pid"], e["tid"])] == "rank %d" % e["tid"] == "rank %d" % e["args"]["rank"], e
per = collections.Counter(e["tid"] for e in x)
assert len(per) == exp["ranks"], (len(per), exp["ranks"])
for r, n in per.items():
    want = exp["per_rank"].get(str(r), exp["per_rank"].get("*"))
    assert n == want, (r, n, want)
# slices of one track do not overlap (calls of one rank, end to end or at their times)
by = collections.defaultdict(list)
for e in x:
    by[(e["pid"], e["tid"])].append((e["ts"], e["dur"]))
for k, l in by.items():
    l.sort()
    for (a, da), (b, _) in zip(l, l[1:]):
        assert a + da <= b + 1e-3, (k, a, da, b)
reg = {(e["tid"], e["args"].get("seq")): e for e in x if e["name"] == "ncclCommWindowRegister"}
for r, s, kv in exp.get("args", []):
    a = reg[(r, s)]["args"]
    for k, v in kv.items():
        assert a.get(k) == v and type(a.get(k)) is type(v), (r, s, k, a.get(k), v)
if "ts" in exp:
    r, s, ts, dur = exp["ts"]
    e = reg[(r, s)]
    assert abs(e["ts"] - ts) < 1 and e["dur"] == dur, (e["ts"], ts, e["dur"], dur)
print("good", len(x))
