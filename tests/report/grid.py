"""grid.py HTML REPORT_JSON [RANKS_MISSING SEQS]: the picture's cells (the JSON block ncclguard-grid
in the HTML file) are the text report's outcome grid: per registration the same count of ranks per
decision and the same status as `ncclguard-report --json`, and for each divergent registration the
same ranks per decision. The file is self-contained (nothing loaded from the network). Prints
"good <registrations> <divergent>"."""
import json
import re
import sys

html = open(sys.argv[1]).read()
rep = json.load(open(sys.argv[2]))
m = re.search(r'<script type="application/json" id="ncclguard-grid">(.*?)</script>', html, re.S)
assert m, "no grid data"
grid = json.loads(m.group(1))
for bad in ("http://", "https://", " src=", "<link", "@import", "url("):
    assert bad not in html, "not self-contained: %r" % bad
assert "<canvas" in html or "createElement('canvas')" in html
assert all(d in html for d in ("register", "degrade", "error", "missing", "divergent")), "legend"
code = {k: v["decision"] for k, v in grid["codes"].items()}


def expand(lst):
    out = []
    for part in lst.split(","):
        if part.startswith("..."):
            return None  # the report shortened a long list
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


assert len(grid["comms"]) == len(rep["comms"])
n = ndiv = 0
for gc, rc in zip(grid["comms"], rep["comms"]):
    assert gc["cid"] == rc["cid"] and len(gc["windows"]) == len(rc["windows"]), (gc["cid"], rc["cid"])
    for gw, rw in zip(gc["windows"], rc["windows"]):
        n += 1
        assert gw["seq"] == rw["seq"] and gw["status"] == rw["status"], (gw["seq"], gw["status"], rw)
        assert len(gw["cells"]) == rw["ranks"], (gw["seq"], len(gw["cells"]), rw["ranks"])
        for k, dec in code.items():
            assert gw["cells"].count(k) == rw[dec], (gw["seq"], dec, gw["cells"].count(k), rw[dec])
        assert gw["retried"] == rw["retried"]
        if gw["status"] != "ok":
            ndiv += gw["status"] == "divergent"
            for dec, lst in rw["rank_decisions"].items():
                ranks = expand(lst)
                if ranks is not None:
                    k = [c for c, d in code.items() if d == dec][0]
                    assert ranks == [r for r, c in enumerate(gw["cells"]) if c == k], (gw["seq"], dec)
assert ndiv == rep["divergent"] == grid["divergent"], (ndiv, rep["divergent"], grid["divergent"])
if len(sys.argv) > 3:  # RANK SEQ_FIRST: that rank is missing from SEQ_FIRST on, present before
    r, s0 = int(sys.argv[3]), int(sys.argv[4])
    for w in grid["comms"][0]["windows"]:
        assert (w["cells"][r] == "M") == (w["seq"] >= s0), (r, w["seq"], w["cells"][r])
        assert w["cells"].count("M") == (1 if w["seq"] >= s0 else 0)
print("good", n, ndiv)
