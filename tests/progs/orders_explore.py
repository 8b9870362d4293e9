#!/usr/bin/env python3
"""The differential explorer of orders: every small multi-rank program in which the ranks place or group the
same registrations differently among their collectives (tests/progs/orders.c, `spec` mode), run on the fake
NCCL alone and with ncclguard. A program NCCL alone completes must complete with ncclguard with the same
outcome of every operation on every rank (each registration's result and window, each all-reduce's data),
and the fake's collective-matching checker must record nothing.

  orders_explore.py --orders BUILD/progs/orders --shim BUILD/libncclguard.so --fake BUILD/fake
                    [--jobs J] [--limit N] [--out DIR]

The programs (one per rank, operations A<c> all-reduce, R<c> registration, D<c> deregistration, [ ] a group):
  2 ranks, one communicator: every interleaving on each rank of r registrations and a all-reduces for (r, a) in
    (1,1) (2,1) (1,2) (2,2), each run of consecutive registrations grouped or not; and the same with a
    deregistration and a second registration after the first (R D R with an all-reduce anywhere);
  2 ranks, two communicators: every order on each rank of R0 R1 A0 A1 with R0 before R1 (NCCL alone needs the
    registrations of two communicators in one order on every rank), R0 R1 grouped or not where adjacent;
  3 ranks, one communicator: every interleaving of (1,1) and (2,1) on each rank, grouping as above.
Prints one line per violation and, last, "orders-explore: RESULT programs=P alone-completes=C same=S
violations=V seconds=T"; exit 1 if any violation."""
import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def interleavings(ops):
    """distinct orders of a multiset of operations that keep each kind's own order"""
    seen = set()
    for p in itertools.permutations(range(len(ops))):
        seq = tuple(ops[i] for i in p)
        if seq not in seen:
            seen.add(seq)
            yield seq


def groupings(seq):
    """each maximal run of two or more consecutive registrations grouped or not"""
    runs, i = [], 0
    while i < len(seq):
        j = i
        while j < len(seq) and seq[j][0] == "R":
            j += 1
        if j - i >= 2:
            runs.append((i, j))
        i = max(j, i + 1)
    for choice in itertools.product((0, 1), repeat=len(runs)):
        out = list(seq)
        for (a, b), g in zip(runs, choice):
            if g:
                out[a] = "[" + out[a]
                out[b - 1] = out[b - 1] + "]"
        yield " ".join(out)


def rank_programs(ops, keep=lambda s: True):
    progs = []
    for seq in interleavings(ops):
        if keep(seq):
            progs.extend(groupings(seq))
    return progs


def programs():
    out = []
    for r, a in ((1, 1), (2, 1), (1, 2), (2, 2)):
        per = rank_programs(["R0"] * r + ["A0"] * a)
        out += ["|".join(p) for p in itertools.product(per, repeat=2)]
    # a deregistration between two registrations, an all-reduce anywhere
    per = [" ".join(s) for s in interleavings(["R0", "D0", "R0", "A0"])
           if s.index("D0") > s.index("R0") and [x for x in s if x != "A0"] == ["R0", "D0", "R0"]]
    out += ["|".join(p) for p in itertools.product(per, repeat=2)]
    # two communicators, the registrations in one order on every rank
    per = rank_programs(["R0", "R1", "A0", "A1"], keep=lambda s: s.index("R0") < s.index("R1"))
    out += ["|".join(p) for p in itertools.product(per, repeat=2)]
    for r, a in ((1, 1), (2, 1)):
        per = rank_programs(["R0"] * r + ["A0"] * a)
        out += ["|".join(p) for p in itertools.product(per, repeat=3)]
    return out


def run(args, prog, guard, tmp, k):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = args.fake + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    mm = os.path.join(tmp, "mm.%d.%s" % (k, "guard" if guard else "alone"))
    env["FAKE_NCCL_MISMATCH_FILE"] = mm
    env.pop("LD_PRELOAD", None)
    if guard:
        env["LD_PRELOAD"] = (env.get("NG_PRELOAD_PREFIX") or "") + args.shim
        env["NCCLGUARD_TIMEOUT"] = "5"
        env.setdefault("NCCLGUARD_LOG", "warn")
    n = prog.count("|") + 1
    cmd = [args.orders, "-n", str(n), "--wait", "4", "--timeout", "12", "spec", prog]
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30, text=True)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired:
        rc, out = 124, ""
    ranks = {}
    for line in out.splitlines():
        if line.startswith("RESULT rank="):
            f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            ranks[f.get("rank")] = " ".join("%s=%s" % (key, f.get(key, "-")) for key in ("ops", "ar", "ar2"))
    mismatch = os.path.exists(mm) and os.path.getsize(mm) > 0
    complete = rc == 0 and len(ranks) == n
    return complete, ranks, rc, mismatch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--orders", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--limit", type=int, default=0, help="run every k-th program only, k chosen to run about N")
    args = ap.parse_args()
    progs = programs()
    if args.limit and len(progs) > args.limit:
        step = (len(progs) + args.limit - 1) // args.limit
        progs = progs[::step]
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="orders-explore.")

    def one(item):
        k, prog = item
        alone = run(args, prog, False, tmp, k)
        if not alone[0]:
            return prog, "alone-incomplete", alone, None
        guard = run(args, prog, True, tmp, k)
        same = guard[0] and guard[1] == alone[1] and not guard[3]
        return prog, "same" if same else "violation", alone, guard

    completes = same = 0
    violations = []
    with ThreadPoolExecutor(max_workers=args.jobs) as ex:
        for prog, verdict, alone, guard in ex.map(one, enumerate(progs)):
            if verdict == "alone-incomplete":
                continue
            completes += 1
            if verdict == "same":
                same += 1
            else:
                violations.append(prog)
                print("VIOLATION program=%r alone=%s with=%s rc=%d mismatch=%s" %
                      (prog, alone[1], guard[1], guard[2], guard[3]), flush=True)
    print("orders-explore: RESULT programs=%d alone-completes=%d same=%d violations=%d seconds=%.0f" %
          (len(progs), completes, same, len(violations), time.time() - t0))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
