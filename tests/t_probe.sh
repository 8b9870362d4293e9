#!/bin/sh
# ncclguard-doctor --probe (tools/probe.c) against the fakes: its table for NCCL 2.27, 2.28.9, 2.29 and
# 2.30.7 (each row what the fake models for that version: tests/fake/README.md), the exit statuses (0
# nothing worse, 1 a REGRESSION, 2 could not probe), the --json schema, the time budget, how it finds NCCL.
. "$(dirname "$0")/lib.sh"

DOC="$B/ncclguard-doctor"
# The probe preloads the library into its scenario programs: a sanitizer build would need its runtime
# first (and reports a crash as its own exit status, not a signal): the plain variant runs this script.
if [ "${NG_VARIANT:-plain}" != plain ]; then
  echo "# skip t_probe: the plain variant runs it (the probe preloads the library into its programs)"
  exit 0
fi
mkdir -p "$T/home"
# probe ENV...: the probe against the fakes, nothing else of the caller's environment
probe() {
  env -i PATH="$PATH" HOME="$T/home" ${FAKE_NCCL_MISMATCH_FILE:+FAKE_NCCL_MISMATCH_FILE="$FAKE_NCCL_MISMATCH_FILE"} \
    LD_LIBRARY_PATH="$FAKE" "$@"
}
# rows FILE: "scenario|NCCL alone|with ncclguard|verdict" from the probe's table
rows() {
  awk -F' [|] ' 'NF == 4 && $1 !~ /^scenario/ { for (i = 1; i <= 4; i++) sub(/ +$/, "", $i); print $1 "|" $2 "|" $3 "|" $4 }' "$1"
}

# ---------------------------------------------------------------- the table, per NCCL version
# What the fakes model (tests/fake/README.md, "Modelled behaviour"), per row: NULL communicator (SIGSEGV
# before 2.29), nonblocking first registration (2.28 an error, 2.29+ a silent NULL window), cudaMalloc and
# misaligned buffers (2.27: a NULL window for a base or size off 2 MiB, nothing about the offset; 2.28+
# errors), capture (an error and a lost capture before 2.30.7), deregistration after destroy (an error),
# NULL window pointer (2.27 SIGSEGV, 2.28 success written to no one, 2.29+ an error), the same allocation
# again and again in a 4 GiB symmetric space (2.30.7 runs out), a buffer one rank cannot register (its peer
# hangs), a peer 3 s late (both succeed).
expect() {
  case "$1" in
  22703) cat <<'EOF'
normal|ok|ok|same
null-comm|crash (SIGSEGV)|ok, reg=ncclInvalidArgument|fixed
first-op-nonblocking|fail: registration: ncclInvalidArgument|ok|fixed
cudaMalloc-all|ok, win=NULL|ok, win=NULL|same
misaligned-offset-1000|ok|ok|same
graph-capture|ok|ok|same
dereg-after-destroy|fail: deregister after destroy: ncclUnhandledCudaError|ok|fixed
null-win|crash (SIGSEGV)|ok, reg=ncclInvalidArgument|fixed
repeat-registration|ok|ok|same
asym-cudaMalloc-rank0|hang (rank 0 in ncclAllReduce)|ok, win=NULL|fixed
late-peer|ok|ok|same
torch-lazy|skip: --no-python|skip: --no-python|skip
torch-eager|skip: --no-python|skip: --no-python|skip
EOF
  ;;
  22809) cat <<'EOF'
normal|ok|ok|same
null-comm|crash (SIGSEGV)|ok, reg=ncclInvalidArgument|fixed
first-op-nonblocking|fail: registration: ncclInvalidArgument|ok|fixed
cudaMalloc-all|fail: registration: ncclUnhandledCudaError|ok, win=NULL|fixed
misaligned-offset-1000|fail: registration: ncclInvalidArgument|ok, win=NULL|fixed
graph-capture|fail: the caller's capture was invalidated; registration: ncclUnhandledCudaError|ok|fixed
dereg-after-destroy|fail: deregister after destroy: ncclUnhandledCudaError|ok|fixed
null-win|fail: registration returned ncclSuccess, an error was expected|ok, reg=ncclInvalidArgument|fixed
repeat-registration|ok|ok|same
asym-cudaMalloc-rank0|hang (rank 0 in ncclAllReduce)|ok, win=NULL|fixed
late-peer|ok|ok|same
torch-lazy|skip: --no-python|skip: --no-python|skip
torch-eager|skip: --no-python|skip: --no-python|skip
EOF
  ;;
  22903) cat <<'EOF'
normal|ok|ok|same
null-comm|ok, reg=ncclInvalidArgument|ok, reg=ncclInvalidArgument|same
first-op-nonblocking|ok, win=NULL|ok|same, changed: ok
cudaMalloc-all|fail: registration: ncclUnhandledCudaError|ok, win=NULL|fixed
misaligned-offset-1000|fail: registration: ncclInvalidArgument|ok, win=NULL|fixed
graph-capture|fail: the caller's capture was invalidated; registration: ncclUnhandledCudaError|ok|fixed
dereg-after-destroy|fail: deregister after destroy: ncclUnhandledCudaError|ok|fixed
null-win|ok, reg=ncclInvalidArgument|ok, reg=ncclInvalidArgument|same
repeat-registration|ok|ok|same
asym-cudaMalloc-rank0|hang (rank 0 in ncclAllReduce)|ok, win=NULL|fixed
late-peer|ok|ok|same
torch-lazy|skip: --no-python|skip: --no-python|skip
torch-eager|skip: --no-python|skip: --no-python|skip
EOF
  ;;
  23007) cat <<'EOF'
normal|ok|ok|same
null-comm|ok, reg=ncclInvalidArgument|ok, reg=ncclInvalidArgument|same
first-op-nonblocking|ok, win=NULL|ok|same, changed: ok
cudaMalloc-all|fail: registration: ncclUnhandledCudaError|ok, win=NULL|fixed
misaligned-offset-1000|fail: registration: ncclInvalidArgument|ok, win=NULL|fixed
graph-capture|ok|ok|same
dereg-after-destroy|fail: deregister after destroy: ncclUnhandledCudaError|ok|fixed
null-win|ok, reg=ncclInvalidArgument|ok, reg=ncclInvalidArgument|same
repeat-registration|fail: 64 of 72 windows, first failure ncclInternalError "Allocation failed. No suitable sp|ok|fixed
asym-cudaMalloc-rank0|hang (rank 0 in ncclAllReduce)|ok, win=NULL|fixed
late-peer|ok|ok|same
torch-lazy|skip: --no-python|skip: --no-python|skip
torch-eager|skip: --no-python|skip: --no-python|skip
EOF
  ;;
  esac
}
# newest first: a REGRESSION shows where NCCL alone answers what older versions crash on
for v in 23007 22903 22809 22703; do
  probe FAKE_NCCL_VERSION=$v FAKE_CUDA_DEVICES=2 timeout 120 "$DOC" --probe --no-python --gpus 2 --timeout 6 \
    >"$T/p$v.out" 2>"$T/p$v.err"; rc=$?
  rows "$T/p$v.out" >"$T/p$v.rows"
  expect $v >"$T/p$v.want"
  if [ $rc -eq 0 ] && cmp -s "$T/p$v.rows" "$T/p$v.want" && has "$T/p$v.out" '^ncclguard-doctor --probe: [0-9.]+ s; nothing is worse with ncclguard' \
     && has "$T/p$v.err" '\[10/13\] asym-cudaMalloc-rank0 +NCCL alone: hang'; then
    pass "probe-table-$v"
  else
    fail "probe-table-$v" "rc=$rc; $(tail -n 1 "$T/p$v.out"); differences (want / got): $(diff "$T/p$v.want" "$T/p$v.rows" | grep '^[<>]' | tr '\n' ' ')"
  fi
done

# one GPU (the default --gpus 1): the one-rank scenarios; the two-rank one is listed as skipped, with how to run it
probe FAKE_NCCL_VERSION=22809 FAKE_CUDA_DEVICES=2 timeout 60 "$DOC" --probe --no-python >"$T/one.out" 2>"$T/one.err"; rc=$?
if [ $rc -eq 0 ] && rows "$T/one.out" | grep -qx 'asym-cudaMalloc-rank0|skip: needs 2 GPUs (--gpus 2)|skip: needs 2 GPUs (--gpus 2)|skip' \
   && rows "$T/one.out" | grep -qx 'null-comm|crash (SIGSEGV)|ok, reg=ncclInvalidArgument|fixed' \
   && has "$T/one.err" '1 of 2 GPUs' && has "$T/one.out" '4 skipped'; then pass probe-one-gpu
else fail probe-one-gpu "rc=$rc $(tail -4 "$T/one.out" | tr '\n' ' ')"; fi
probe FAKE_NCCL_VERSION=22809 FAKE_CUDA_DEVICES=1 timeout 60 "$DOC" --probe --no-python --gpus 4 --only asym >"$T/g1.out" 2>&1; rc=$?
if [ $rc -eq 0 ] && rows "$T/g1.out" | grep -qx 'asym-cudaMalloc-rank0|skip: needs 2 GPUs, 1 here|skip: needs 2 GPUs, 1 here|skip'; then pass probe-gpus-capped
else fail probe-gpus-capped "rc=$rc $(cat "$T/g1.out" | tr '\n' ' ')"; fi

# ---------------------------------------------------------------- --json
probe FAKE_NCCL_VERSION=22809 FAKE_CUDA_DEVICES=2 timeout 60 "$DOC" --probe --no-python --json --gpus 2 --timeout 6 \
  --only 'normal|null-comm|asym' >"$T/j.out" 2>"$T/j.err"; rc=$?
if [ $rc -eq 0 ] && python3 - "$T/j.out" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, "one JSON object on one line, got %d lines" % len(lines)
d = json.loads(lines[0])
want = {"probe": int, "exit": int, "summary": str, "seconds": float, "budget": int, "timeout": int, "nccl": dict,
        "gpus": dict, "ranks": dict, "ncclguard": dict, "outdir": type(None), "scenarios": list}
assert set(d) == set(want), sorted(d)
for k, t in want.items():
    assert isinstance(d[k], t), (k, d[k])
assert d["probe"] == 1 and d["exit"] == 0 and d["budget"] == 60 and d["timeout"] == 6
assert set(d["nccl"]) == {"version", "code", "path", "found_by"} and d["nccl"]["version"] == "2.28.9" and d["nccl"]["code"] == 22809
assert d["nccl"]["found_by"].startswith("the library path"), d["nccl"]
assert d["gpus"] == {"present": 2, "used": 2, "name": "Fake H200"}, d["gpus"]
assert d["ranks"] == {"count": 2, "hosts": 1, "layout": "2 of 2 GPUs"}, d["ranks"]
assert set(d["ncclguard"]) == {"version", "lib"} and d["ncclguard"]["lib"].endswith("libncclguard.so")
names = [s["name"] for s in d["scenarios"]]
assert names == ["normal", "null-comm", "asym-cudaMalloc-rank0"], names
keys = {"name", "ranks", "what", "bare", "guard", "verdict", "nccl", "bare_exit", "guard_exit", "bare_seconds", "guard_seconds"}
for s in d["scenarios"]:
    assert set(s) == keys, sorted(s)
    assert s["nccl"] == "2.28.9", s  # the NCCL the row ran on
    assert isinstance(s["ranks"], int) and isinstance(s["bare_seconds"], float) and s["what"]
nc = d["scenarios"][1]
assert (nc["bare"], nc["guard"], nc["verdict"], nc["bare_exit"], nc["guard_exit"]) == \
    ("crash (SIGSEGV)", "ok, reg=ncclInvalidArgument", "fixed", 139, 0), nc
a = d["scenarios"][2]
# the scenario program's own watchdog (124) names the step, before the probe's time limit (137)
assert a["ranks"] == 2 and a["bare"] == "hang (rank 0 in ncclAllReduce)" and a["bare_exit"] == 124 and a["verdict"] == "fixed", a
EOF
then pass probe-json-schema; else fail probe-json-schema "rc=$rc $(head -c 600 "$T/j.out")"; fi
probe FAKE_NCCL_VERSION=22809 timeout 60 "$DOC" --probe --no-python --json --nccl "$T/none/libnccl.so.2" >"$T/j2.out" 2>"$T/j2.err"; rc=$?
if [ $rc -eq 2 ] && python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert set(d) == {"probe", "exit", "error"} and d["exit"] == 2 and "--nccl" in d["error"], d' "$T/j2.out"; then pass probe-json-cannot
else fail probe-json-cannot "rc=$rc $(cat "$T/j2.out" "$T/j2.err")"; fi

# ---------------------------------------------------------------- exit 1: a REGRESSION
# a stand-in for the library whose registration always fails: the normal scenario works with NCCL alone only
mkdir -p "$T/bad"
cat >"$T/bad/bad.c" <<'EOF'
int ncclCommWindowRegister(void* comm, void* buff, unsigned long size, void** win, int flags) {
  (void)comm, (void)buff, (void)size, (void)win, (void)flags;
  return 3; /* ncclInternalError */
}
EOF
${CC:-cc} -shared -fPIC -o "$T/bad/libncclguard.so" "$T/bad/bad.c"
probe NCCLGUARD_LIB="$T/bad/libncclguard.so" FAKE_NCCL_VERSION=22809 timeout 60 "$DOC" --probe --no-python \
  --only 'normal|null-comm' --outdir "$T/reg" >"$T/r.out" 2>"$T/r.err"; rc=$?
if [ $rc -eq 1 ] && rows "$T/r.out" | grep -qx 'normal|ok|fail: registration: ncclInternalError|REGRESSION' \
   && [ "$(tail -n 1 "$T/r.out")" != "" ] && tail -n 1 "$T/r.out" | grep -q "REGRESSION in normal: worked with NCCL alone, not with ncclguard; the runs are in $T/reg" \
   && has "$T/reg/runs/normal.guard.txt" '^# exit status 1$'; then pass probe-regression-exit-1
else fail probe-regression-exit-1 "rc=$rc $(tail -3 "$T/r.out" | tr '\n' ' ')"; fi

# ---------------------------------------------------------------- exit 2: could not probe, each in one line
cannot_case() { # NAME WANT-REGEX ENV/ARGS...: exit 2, the last line of stderr says why (the only such line), no table
  n=$1 w=$2; shift 2
  probe "$@" >"$T/c.out" 2>"$T/c.err"; rc=$?
  if [ $rc -eq 2 ] && [ "$(grep -c 'could not probe' "$T/c.err")" -eq 1 ] \
     && tail -n 1 "$T/c.err" | grep -Eq "^ncclguard-doctor --probe: could not probe: $w" && [ ! -s "$T/c.out" ]; then pass "$n"
  else fail "$n" "rc=$rc stdout '$(head -c 200 "$T/c.out")' stderr '$(head -c 300 "$T/c.err")'"; fi
}
cannot_case probe-no-gpu-exit-2 'no GPU visible .*run it on a compute node' FAKE_CUDA_DEVICES=0 timeout 30 "$DOC" --probe --no-python
cannot_case probe-no-nccl-exit-2 "--nccl $T/none/libnccl.so.2: .*cannot open" timeout 30 "$DOC" --probe --no-python --nccl "$T/none/libnccl.so.2"
mkdir -p "$T/lonely"
cp "$DOC" "$T/lonely/ncclguard-doctor"
cannot_case probe-not-installed-exit-2 "the probe's programs are not installed next to ncclguard-doctor .*make install" \
  timeout 30 "$T/lonely/ncclguard-doctor" --probe --no-python
# NCCL alone cannot even do the normal thing (here: a libnccl whose registration always fails): nothing to compare
cp "$T/bad/libncclguard.so" "$T/bad/libbroken.so"
cannot_case probe-nccl-broken-exit-2 'NCCL alone fails the normal scenario on this node \(fail: registration: ncclInternalError\)' \
  LD_PRELOAD="$T/bad/libbroken.so" FAKE_NCCL_VERSION=22809 timeout 30 "$DOC" --probe --no-python --only normal
out=$(probe timeout 30 "$DOC" --probe --gpus 0 2>&1); rc=$?
out2=$(probe timeout 30 "$DOC" --probe --frobnicate 2>&1); rc2=$?
out3=$(probe timeout 30 "$DOC" --probe --repeat-size 7X 2>&1); rc3=$?
if [ $rc -eq 2 ] && [ "$out" = "ncclguard-doctor --probe: --gpus needs 1..64, not '0' (see ncclguard-doctor --probe --help)" ] \
   && [ $rc2 -eq 2 ] && echo "$out2" | grep -q "unknown option '--frobnicate'" \
   && [ $rc3 -eq 2 ] && echo "$out3" | grep -q -- "--repeat-size needs a size such as 64M"; then pass probe-usage-exit-2
else fail probe-usage-exit-2 "rc=$rc '$out' rc2=$rc2 '$out2' rc3=$rc3 '$out3'"; fi
# --repeat-size bounds the one large allocation; 0 leaves that scenario out
probe FAKE_NCCL_VERSION=23007 timeout 60 "$DOC" --probe --no-python --only 'repeat' --repeat-size 0 >"$T/rs0.out" 2>&1; rc=$?
probe FAKE_NCCL_VERSION=23007 timeout 60 "$DOC" --probe --no-python --only 'repeat' --repeat-size 1G --outdir "$T/rs1" >"$T/rs1.out" 2>&1; rc1=$?
if [ $rc -eq 0 ] && rows "$T/rs0.out" | grep -qx 'repeat-registration|skip: --repeat-size 0|skip: --repeat-size 0|skip' \
   && [ $rc1 -eq 0 ] && rows "$T/rs1.out" | grep -q '^repeat-registration|fail: 4 of 12 windows, .*|ok|fixed$' \
   && has "$T/rs1/runs/repeat-registration.bare.txt" '^\$ NCCL_WIN_STRIDE=8388608 .*/repeat -n 1 --size 1073741824 --times 12 --expect-all$'; then
  pass probe-repeat-size
else fail probe-repeat-size "rc=$rc/$rc1 $(rows "$T/rs0.out") $(rows "$T/rs1.out") $(head -1 "$T/rs1/runs/repeat-registration.bare.txt")"; fi

# ---------------------------------------------------------------- the time budget
# a slow nonblocking init (3 s) against a budget of 4 s: a scenario starts only where its two runs can fit
# (3 s left); a run the budget stops is "stopped (time budget)", not a hang, and its row is not run; the next
# scenario is not started; the total stays near the budget
probe FAKE_NCCL_VERSION=22809 FAKE_NCCL_INIT_DELAY_MS=3000 timeout 60 "$DOC" --probe --no-python --budget 4 \
  --only 'normal|first-op-nonblocking|cudaMalloc-all' >"$T/b.out" 2>"$T/b.err"; rc=$?
secs=$(sed -n 's/^ncclguard-doctor --probe: \([0-9.]*\) s; .*/\1/p' "$T/b.out")
if [ $rc -eq 0 ] && rows "$T/b.out" | grep -q '^normal|ok|ok|same' \
   && rows "$T/b.out" | grep -Eq '^first-op-nonblocking\|.*stopped \(time budget\).*\|not run \(time budget\)$' \
   && ! rows "$T/b.out" | grep -q 'hang' \
   && rows "$T/b.out" | grep -qx 'cudaMalloc-all|not run|not run|not run (time budget)' \
   && awk -v s="$secs" 'BEGIN { exit !(s != "" && s < 7) }' && has "$T/b.out" 'some not run: raise --budget' \
   && has "$T/b.err" 'cudaMalloc-all +not run \(time budget\)'; then pass probe-budget
else fail probe-budget "rc=$rc secs=$secs $(rows "$T/b.out" | tr '\n' ' ')"; fi

# ---------------------------------------------------------------- which NCCL
# --nccl names the library and says so; without it, a Python environment's nvidia-nccl wheel (here a copy of
# the fake in a package tree of that layout), the NCCL its PyTorch loads, comes before the library path's,
# which is named in a note
mkdir -p "$T/py/nvidia/nccl/lib"
cp "$FAKE/libnccl.so.2" "$T/py/nvidia/nccl/lib/libnccl.so.2"
probe FAKE_NCCL_VERSION=22809 timeout 60 "$DOC" --probe --no-python --nccl "$FAKE/libnccl.so.2" --only normal >"$T/n.out" 2>"$T/n.err"; rc=$?
if [ $rc -eq 0 ] && has "$T/n.err" "^ncclguard-doctor --probe: NCCL 2.28.9, $FAKE/libnccl.so.2 \(found by --nccl\)$"; then pass probe-nccl-option
else fail probe-nccl-option "rc=$rc $(head -2 "$T/n.err" | tr '\n' ' ')"; fi
probe PYTHONPATH="$T/py" FAKE_NCCL_VERSION=22809 timeout 60 "$DOC" --probe --only normal >"$T/w.out" 2>"$T/w.err"; rc=$?
if [ $rc -eq 0 ] && has "$T/w.err" "^ncclguard-doctor --probe: NCCL 2.28.9, $T/py/nvidia/nccl/lib/libnccl.so.2 \(found by the nvidia-nccl wheel of python3\)$" \
   && has "$T/w.err" "note: libnccl.so.2 on the library path is $FAKE/libnccl.so.2 \(NCCL 2.28.9\): --nccl $FAKE/libnccl.so.2 probes that one" \
   && has "$T/w.out" "^ncclguard-doctor --probe: NCCL 2.28.9 \($T/py/nvidia/nccl/lib/libnccl.so.2, found by the nvidia-nccl wheel of python3\)"; then
  pass probe-wheel-note
else fail probe-wheel-note "rc=$rc $(head -3 "$T/w.err" | tr '\n' ' ')"; fi
# PyTorch: its scenarios run when the Python's torch imports (and sees a GPU); here a Python without it
mkdir -p "$T/notorch"
probe PYTHONPATH="$T/notorch" FAKE_NCCL_VERSION=22809 timeout 60 "$DOC" --probe --only 'normal|torch' >"$T/t.out" 2>"$T/t.err"; rc=$?
probe FAKE_NCCL_VERSION=22809 timeout 60 "$DOC" --probe --no-torch --only 'torch-eager' >"$T/t2.out" 2>&1; rc2=$?
if [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && rows "$T/t.out" | grep -Eq '^torch-lazy\|skip: (ModuleNotFoundError|RuntimeError|ImportError)' \
   && rows "$T/t.out" | grep -q '^torch-eager|skip: ' && rows "$T/t2.out" | grep -qx 'torch-eager|skip: --no-torch|skip: --no-torch|skip'; then
  pass probe-torch-skipped
else fail probe-torch-skipped "rc=$rc/$rc2 $(rows "$T/t.out" | tr '\n' ' ') $(rows "$T/t2.out")"; fi
# the two runs of a PyTorch scenario go side by side (each mostly Python's start-up): a stand-in Python that
# "imports torch", and under torch.distributed.run takes 3 s and notes when it began and ended. Both PyTorch
# rows fit in a budget of 22 s (one after the other, 32 s would be set aside for each and neither would
# start), and each row's two runs overlap.
mkdir -p "$T/spy"
cat >"$T/spy/python3" <<EOS
#!/bin/sh
case "\$1" in
  -c) echo "NGP torch=0.0-standin"; exit 0 ;;
  -m) echo "start \$(date +%s.%N) \$LD_PRELOAD" >>"$T/spy/times"; sleep 3
      echo "end \$(date +%s.%N)" >>"$T/spy/times"; echo "rank 0/1: RESULT ok rendezvous=ok peer=ok allreduce=ok"; exit 0 ;;
esac
exit 1
EOS
chmod +x "$T/spy/python3"
: >"$T/spy/times"
probe FAKE_NCCL_VERSION=22809 timeout 60 "$DOC" --probe --python "$T/spy/python3" --only 'torch' --budget 22 >"$T/sp.out" 2>"$T/sp.err"; rc=$?
# overlap: in each pair of starts, the second began before the first ended (starts and ends alternate s s e e)
seq_ok=$(awk '{print $1}' "$T/spy/times" | tr '\n' ' ')
if [ $rc -eq 0 ] && [ "$seq_ok" = "start start end end start start end end " ] \
   && rows "$T/sp.out" | grep -qx 'torch-lazy|ok|ok|same' && rows "$T/sp.out" | grep -qx 'torch-eager|ok|ok|same'; then
  pass probe-torch-side-by-side
else fail probe-torch-side-by-side "rc=$rc order: $seq_ok $(rows "$T/sp.out" | grep torch | tr '\n' ' ') $(tail -2 "$T/sp.err" | tr '\n' ' ')"; fi
# a GPU in exclusive-process compute mode holds one context at a time: the runs go one after the other there
: >"$T/spy/times"
probe FAKE_NCCL_VERSION=22809 FAKE_CUDA_COMPUTE_MODE=3 timeout 90 "$DOC" --probe --python "$T/spy/python3" --only 'torch' --budget 60 >"$T/sx.out" 2>"$T/sx.err"; rc=$?
seq_x=$(awk '{print $1}' "$T/spy/times" | tr '\n' ' ')
if [ $rc -eq 0 ] && [ "$seq_x" = "start end start end start end start end " ] \
   && rows "$T/sx.out" | grep -qx 'torch-lazy|ok|ok|same' && rows "$T/sx.out" | grep -qx 'torch-eager|ok|ok|same'; then
  pass probe-torch-exclusive-gpu-one-at-a-time
else fail probe-torch-exclusive-gpu-one-at-a-time "rc=$rc order: $seq_x $(rows "$T/sx.out" | grep torch | tr '\n' ' ')"; fi
# --nccl other than the NCCL PyTorch would load (the stand-in Python's nvidia-nccl wheel): the PyTorch rows run on
# --nccl, put first with LD_PRELOAD in both runs (ncclguard before it in the guarded one), and say so
mkdir -p "$T/spy2" "$T/other"
cp "$FAKE/libnccl.so.2" "$T/other/libnccl.so.2"
cat >"$T/spy2/python3" <<EOS
#!/bin/sh
case "\$1" in
  -c) echo "NGP wheel=$T/py/nvidia/nccl/lib/libnccl.so.2"; echo "NGP torch=0.0-standin"; exit 0 ;;
  -m) echo "run \$LD_PRELOAD" >>"$T/spy2/preloads"; echo "rank 0/1: RESULT ok rendezvous=ok peer=ok allreduce=ok"; exit 0 ;;
esac
exit 1
EOS
chmod +x "$T/spy2/python3"
: >"$T/spy2/preloads"
probe FAKE_NCCL_VERSION=22809 timeout 90 "$DOC" --probe --python "$T/spy2/python3" --nccl "$T/other/libnccl.so.2" --only 'torch' \
  --json >"$T/tn.out" 2>"$T/tn.err"; rc=$?
nrun=$(grep -c . "$T/spy2/preloads"); nother=$(grep -c "^run \(.*/libncclguard.so:\)\{0,1\}$T/other/libnccl.so.2\$" "$T/spy2/preloads")
nguard=$(grep -c "^run .*/libncclguard.so:$T/other/libnccl.so.2\$" "$T/spy2/preloads")
if [ $rc -eq 0 ] && [ "$nrun" = 4 ] && [ "$nother" = 4 ] && [ "$nguard" = 2 ] \
   && has "$T/tn.err" "^ncclguard-doctor --probe: every row runs on NCCL 2.28.9, the PyTorch rows too \(put first with LD_PRELOAD\)$" \
   && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["nccl"]["path"] == sys.argv[2] and d["nccl"]["found_by"] == "--nccl", d["nccl"]
rows = {s["name"]: s for s in d["scenarios"]}
for n in ("torch-lazy", "torch-eager"):
    assert rows[n]["verdict"] == "same" and rows[n]["nccl"] == "2.28.9", rows[n]' "$T/tn.out" "$T/other/libnccl.so.2"; then
  pass probe-torch-runs-on-nccl-option
else fail probe-torch-runs-on-nccl-option "rc=$rc runs=$nrun on --nccl=$nother guarded=$nguard: $(tr '\n' ' ' <"$T/spy2/preloads") $(tail -2 "$T/tn.err" | tr '\n' ' ')"; fi

# a row that goes from a crash to a clean failure reads "clean error (was crash)", and so does the closing count:
# a stand-in Python whose PyTorch run dies of SIGSEGV without ncclguard and fails cleanly with it
mkdir -p "$T/spy3"
cat >"$T/spy3/python3" <<EOS
#!/bin/sh
case "\$1" in
  -c) echo "NGP torch=0.0-standin"; exit 0 ;;
  -m) case "\$LD_PRELOAD" in
        *libncclguard.so*) echo "rank 0/1: RESULT fail rendezvous=error(invalid_argument) peer=n/a allreduce=n/a"; exit 1 ;;
        *) kill -SEGV \$\$ ;;
      esac ;;
esac
exit 1
EOS
chmod +x "$T/spy3/python3"
probe FAKE_NCCL_VERSION=22809 timeout 90 "$DOC" --probe --python "$T/spy3/python3" --only 'torch' >"$T/tc.out" 2>"$T/tc.err"; rc=$?
if [ $rc -eq 0 ] && rows "$T/tc.out" | grep -q '^torch-lazy|crash (SIGSEGV)|fail: .*|clean error (was crash)$' \
   && rows "$T/tc.out" | grep -q '^torch-eager|crash (SIGSEGV)|fail: .*|clean error (was crash)$' \
   && grep -q 'nothing is worse with ncclguard (0 fixed, 2 clean error' "$T/tc.out" "$T/tc.err"; then
  pass probe-clean-error-was-crash
else fail probe-clean-error-was-crash "rc=$rc $(rows "$T/tc.out" | grep torch | tr '\n' ' ') $(tail -2 "$T/tc.err" | tr '\n' ' ')"; fi

# --ranks N beyond the GPUs: N ranks on one GPU, each rank process a host of its own to NCCL (NGTEST_HOST_PER_PROCESS:
# NCCL_HOSTID per process); the fake takes ranks of different host ids for nodes of their own (no symmetric support
# across nodes from 2.29: success with a NULL window on every rank, where ranks of one host hang on rank 0's
# cudaMalloc buffer: the control below); the scenarios of several ranks run with N
probe FAKE_NCCL_VERSION=22903 FAKE_CUDA_DEVICES=1 timeout 90 "$DOC" --probe --no-python --ranks 3 --timeout 6 \
  --only 'normal|asym|late' --outdir "$T/r3" >"$T/r3.out" 2>"$T/r3.err"; rc=$?
probe FAKE_NCCL_VERSION=22903 FAKE_CUDA_DEVICES=1 NGTEST_TIMEOUT=4 timeout 30 "$B/probe/ngtest" -n 3 -m proc --alloc cuda0 \
  >"$T/r3c.out" 2>&1; rcc=$?
if [ $rc -eq 0 ] && has "$T/r3.err" '^ncclguard-doctor --probe: 3 ranks on 1 GPU as 3 hosts \(network transport\): rank r on GPU r mod 1' \
   && has "$T/r3.out" '; 3 ranks on 1 GPU as 3 hosts \(network transport\); ' \
   && rows "$T/r3.out" | grep -qx 'asym-cudaMalloc-rank0|ok, win=NULL|ok, win=NULL|same' \
   && rows "$T/r3.out" | grep -qx 'late-peer|ok, win=NULL|ok, win=NULL|same' && rows "$T/r3.out" | grep -qx 'normal|ok|ok|same' \
   && has "$T/r3/runs/asym-cudaMalloc-rank0.bare.txt" '^\$ NGTEST_HOST_PER_PROCESS=1 .*/ngtest -n 3 -m proc --alloc cuda0$' \
   && has "$T/r3/runs/late-peer.guard.txt" '^\$ NGTEST_HOST_PER_PROCESS=1 LD_PRELOAD=.*/faults late --late 3 -n 3$' \
   && [ $rcc = 124 ] && has "$T/r3c.out" 'RESULT fail hang in'; then pass probe-ranks-as-hosts
else fail probe-ranks-as-hosts "rc=$rc control rc=$rcc $(rows "$T/r3.out" | tr '\n' ' ') $(grep 'hosts' "$T/r3.err" | head -1)"; fi
probe FAKE_NCCL_VERSION=22809 timeout 30 "$DOC" --probe --no-python --ranks 1 --only asym >"$T/r1.out" 2>&1; rc=$?
out=$(probe timeout 30 "$DOC" --probe --ranks 0 2>&1); rc0=$?
if [ $rc -eq 0 ] && rows "$T/r1.out" | grep -qx 'asym-cudaMalloc-rank0|skip: needs 2 ranks (--ranks 2)|skip: needs 2 ranks (--ranks 2)|skip' \
   && [ $rc0 -eq 2 ] && [ "$out" = "ncclguard-doctor --probe: --ranks needs 1..64, not '0' (see ncclguard-doctor --probe --help)" ]; then
  pass probe-ranks-option
else fail probe-ranks-option "rc=$rc/$rc0 $(rows "$T/r1.out") '$out'"; fi

# the wheel alone (nothing on the library path but the driver): used, and said so
if ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
  echo "# skip probe-wheel-used: this machine has a libnccl.so.2 in ld.so.cache, which comes first"
else
  mkdir -p "$T/drv"
  ln -sf "$FAKE/libcuda.so.1" "$T/drv/libcuda.so.1"
  env -i PATH="$PATH" HOME="$T/home" LD_LIBRARY_PATH="$T/drv" PYTHONPATH="$T/py" FAKE_NCCL_VERSION=22809 \
    timeout 60 "$DOC" --probe --only normal >"$T/w2.out" 2>"$T/w2.err"; rc=$?
  if [ $rc -eq 0 ] && has "$T/w2.err" "found by the nvidia-nccl wheel of python3"; then pass probe-wheel-used
  else fail probe-wheel-used "rc=$rc $(head -3 "$T/w2.err" | tr '\n' ' ')"; fi
fi

# ---------------------------------------------------------------- help and the installed layout
out=$("$DOC" --probe --help); rc=$?
out2=$("$DOC" --help)
if [ $rc -eq 0 ] && echo "$out" | grep -q '^Usage: ncclguard-doctor --probe' && echo "$out" | grep -q -- '--budget S' \
   && echo "$out2" | grep -q -- '--probe'; then pass probe-help
else fail probe-help "rc=$rc"; fi
# make install: the programs in libexec/ncclguard, found from bin/ (no compiler, no header at run time)
if make -C "$NG_ROOT" -s BUILD="$B" install DESTDIR="$T/inst" PREFIX=/usr >"$T/inst.log" 2>&1 \
   && [ -x "$T/inst/usr/libexec/ncclguard/ngtest" ] && [ -x "$T/inst/usr/libexec/ncclguard/repeat" ] \
   && [ -x "$T/inst/usr/libexec/ncclguard/faults" ] && [ -f "$T/inst/usr/libexec/ncclguard/torch_symm.py" ]; then
  probe FAKE_NCCL_VERSION=22809 timeout 60 "$T/inst/usr/bin/ncclguard-doctor" --probe --no-python --only 'normal|null-comm' \
    >"$T/i.out" 2>"$T/i.err"; rc=$?
  if [ $rc -eq 0 ] && rows "$T/i.out" | grep -qx 'null-comm|crash (SIGSEGV)|ok, reg=ncclInvalidArgument|fixed' \
     && has "$T/i.err" "ncclguard .*\($T/inst/usr/lib/libncclguard.so\)" \
     && ! readelf -d "$T/inst/usr/libexec/ncclguard/ngtest" | grep -Eq 'NEEDED.*(nccl|cuda)'; then pass probe-installed
  else fail probe-installed "rc=$rc $(tail -3 "$T/i.err" | tr '\n' ' ')"; fi
else
  fail probe-installed "make install: $(tail -3 "$T/inst.log" | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- tests/gpu/run and multirank without a GPU
# (the GPU suite runs on a GPU node only): bad arguments are one line and exit 2; no GPU is one line and exit 1
# (multirank: 3) before anything is built. An nvidia-smi that lists nothing stands for a node without GPUs.
mkdir -p "$T/nosmi"
printf '#!/bin/sh\nexit 9\n' >"$T/nosmi/nvidia-smi"; chmod +x "$T/nosmi/nvidia-smi"
gr() { env -u NG_GPU_COUNT -u CUDA_VISIBLE_DEVICES PATH="$T/nosmi:$PATH" BUILD="$T/gpubuild" timeout 60 "$@"; }
o1=$(gr "$NG_ROOT/tests/gpu/run" --ranks 0 2>&1); r1=$?
o2=$(gr "$NG_ROOT/tests/gpu/run" --quick --frob 2>&1); r2=$?
o3=$(gr "$NG_ROOT/tests/gpu/run" --quick --no-torch --ranks 4 --outdir "$T/gpuout" 2>&1); r3=$?
o4=$(gr "$NG_ROOT/tests/gpu/multirank" --ranks "2 x" 2>&1); r4=$?
o5=$(gr "$NG_ROOT/tests/gpu/multirank" --outdir "$T/mrout" 2>&1); r5=$?
if [ $r1 = 2 ] && [ "$o1" = "tests/gpu/run: --ranks needs a whole number 1..64, not '0' (see tests/gpu/run --help)" ] \
   && [ $r2 = 2 ] && [ "$o2" = "tests/gpu/run: unknown option --frob (see tests/gpu/run --help)" ] \
   && [ $r3 = 1 ] && [ "$o3" = "gpu/run: no GPU visible (nvidia-smi lists none): run it on a GPU node, or set NG_GPU_COUNT" ] \
   && [ ! -e "$T/gpubuild" ] && [ $r4 = 2 ] && echo "$o4" | grep -q "^tests/gpu/multirank: --ranks needs rank counts 1..64, not 'x'" \
   && [ $r5 = 3 ] && echo "$o5" | grep -q 'no GPU visible' && [ ! -e "$T/gpubuild" ] \
   && "$NG_ROOT/tests/gpu/run" --help | grep -q -- '--ranks N' && "$NG_ROOT/tests/gpu/multirank" --help | grep -q -- '--nccl V|PATH'; then
  pass gpu-run-without-gpu-fails-cleanly
else fail gpu-run-without-gpu-fails-cleanly "$r1 '$o1' | $r2 '$o2' | $r3 '$o3' | $r4 '$o4' | $r5 '$(echo "$o5" | tail -2 | tr '\n' ' ')'"; fi
