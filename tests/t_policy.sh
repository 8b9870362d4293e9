# Registration policy against the fake NCCL: each scenario runs WITHOUT ncclguard (what NCCL alone
# does, as docs/ records it) and WITH it; every case checks exit codes, results and the log.
. "$NG_ROOT/tests/lib.sh"
NG=$PROGS/ngtest
export NCCLGUARD_TIMEOUT=${NCCLGUARD_TIMEOUT:-8}

# g NAME ARGS...: run ngtest with ncclguard, logs at info into $T/NAME.*.log; sets $rc and $out
g() {
  n=$1; shift
  out=$(NCCLGUARD_LOG=${NCCLGUARD_LOG:-info} NCCLGUARD_LOG_FILE="$T/$n.%p.log" fake_run "$NG" "$@" 2>"$T/$n.err"); rc=$?
}
# b NAME ARGS...: the same without ncclguard
b() {
  n=$1; shift
  out=$(bare_run "$NG" "$@" 2>"$T/$n.err"); rc=$?
}
logs() { cat "$T/$1".*.log 2>/dev/null; }
lhas() { logs "$1" | grep -Eq -- "$2"; }
nok() { echo "$out" | grep -c 'RESULT ok'; }
why() { echo "rc=$rc $(echo "$out" | tail -4 | tr '\n' ' ') | $(logs "$1" | grep -E 'WARN' | head -3)"; }

# --- the normal path: registered, symmetric, results right, in the three launch modes ----------
for m in proc thread group; do
  g normal-$m -m $m --expect-win nonnull --iters 3
  [ $rc = 0 ] && [ "$(nok)" = 2 ] && lhas normal-$m 'fn=ncclCommWindowRegister .*decision=register reason=ok' \
    && ! lhas normal-$m 'decision=(degrade|error)' && pass normal-path-$m || fail normal-path-$m "$(why normal-$m)"
done
g normal4 -m thread -n 4 --expect-win nonnull
[ $rc = 0 ] && [ "$(nok)" = 4 ] && pass normal-path-4-ranks || fail normal-path-4-ranks "$(why normal4)"
# one rank: no round runs (nothing to agree on) and no channel is made; two
# ranks run a round for every registration
NCCLGUARD_LOG=trace g solo1 -n 1 -m thread --twice --expect-win nonnull
rc1=$rc
NCCLGUARD_LOG=trace g solo2 -n 2 -m thread --twice --expect-win nonnull
[ $rc1 = 0 ] && [ $rc = 0 ] && [ "$(logs solo1 | grep -c 'registration round: set-up')" = 0 ] \
  && [ "$(logs solo1 | grep -c 'registration round: not run (one rank')" = 2 ] && ! lhas solo1 'fn=channel' \
  && [ "$(logs solo1 | grep -c 'decision=register reason=ok')" = 2 ] \
  && [ "$(logs solo2 | grep -c 'registration round: set-up')" = 4 ] && ! lhas solo2 'not run' \
  && pass one-rank-no-round || fail one-rank-no-round "$(why solo1) $(logs solo1 | grep -c round)"

# --- NULL communicator (PyTorch's lazy init, docs/PYTORCH.md §1) ----------------------------------
b nullc-bare -n 1 -m thread --null-comm
crashed $rc && pass null-comm-2.28-crashes-without \
  || fail null-comm-2.28-crashes-without "rc=$rc (the fake should SIGSEGV like NCCL 2.28.9)"
g nullc -n 1 -m thread --null-comm
[ $rc = 0 ] && lhas nullc 'reason=null_comm .*result=|result=ncclInvalidArgument.*reason=null_comm' \
  && lhas nullc 'init_process_group\(\.\.\., device_id=' && pass null-comm-clean-error || fail null-comm-clean-error "$(why nullc)"
FAKE_NCCL_VERSION=22903 g nullc29 -n 1 -m thread --null-comm
[ $rc = 0 ] && lhas nullc29 'result=ncclInvalidArgument.*reason=null_comm' && pass null-comm-2.29 || fail null-comm-2.29 "$(why nullc29)"
# NULL win: nowhere to write a window, an error on every version; NULL buffer and size 0: NCCL 2.28
# answers success without registering (2.27: a NULL window), 2.29+ ncclInvalidArgument - ncclguard
# gives the same answer on every rank (degraded, or that error)
for a in null-win null-buff zero-size; do
  r=$(echo $a | tr - _)
  g $a -n 2 -m thread --$a --no-allreduce --expect-reg any
  case $a in null-win) want='result=ncclInvalidArgument .*decision=error reason=null_win' ;;
             *) want="result=ncclSuccess .*decision=degrade reason=$r" ;; esac
  [ $rc = 0 ] && [ "$(logs $a | grep -Ec "$want")" = 2 ] && pass bad-arg-$a-2.28 || fail bad-arg-$a-2.28 "$(why $a)"
  FAKE_NCCL_VERSION=22903 g $a-29 -n 2 -m thread --$a --no-allreduce --expect-reg any
  [ $rc = 0 ] && [ "$(logs $a-29 | grep -Ec "result=ncclInvalidArgument .*decision=error reason=$r")" = 2 ] \
    && pass bad-arg-$a-2.29 || fail bad-arg-$a-2.29 "$(why $a-29)"
done

# --- asymmetric buffers: cudaMalloc on rank 0, ncclMemAlloc on rank 1 (docs/NCCL.md §7: hangs) -------
b asym-bare --alloc cuda0 --timeout 5
[ $rc = 124 ] && pass asym-hangs-without || fail asym-hangs-without "rc=$rc: expected a hang (124) without ncclguard"
g asym --alloc cuda0 --iters 3 --timeout 30
[ $rc = 0 ] && [ "$(nok)" = 2 ] && lhas asym 'decision=degrade reason=not_vmm' && lhas asym 'decision=degrade reason=peer_not_vmm .*bad_rank=0' \
  && pass asym-degrades-all-ranks || fail asym-degrades-all-ranks "$(why asym)"
# the same agreed answer on both ranks (the application's result and ncclguard's reason naming rank 0),
# reached by the agreement in less than NCCLGUARD_TIMEOUT (8 s; about 1 s under TSan, unloaded): without the
# agreement rank 1 gets a timeout after NCCLGUARD_TIMEOUT instead, so the whole run could not end sooner
t0=$(date +%s%N)
NCCLGUARD_ON_FAILURE=error g asym-err --alloc cuda0 --expect-reg error --no-allreduce --timeout 30
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 0 ] && [ "$(logs asym-err | grep -c 'decision=error')" -ge 2 ] \
  && [ "$(echo "$out" | grep -Ec '^rank [01]/2: RESULT ok reg=ncclInvalidArgument win=null ')" = 2 ] \
  && [ "$(logs asym-err | grep -Ec '\[0\] NCCLGUARD WARN fn=ncclCommWindowRegister .* win=0x0 .*result=ncclInvalidArgument .*decision=error reason=not_vmm bad_rank=0 msg="registration refused on every rank \(not_vmm\)')" = 1 ] \
  && [ "$(logs asym-err | grep -Ec '\[1\] NCCLGUARD WARN fn=ncclCommWindowRegister .* win=0x0 .*result=ncclInvalidArgument .*decision=error reason=peer_not_vmm bad_rank=0 msg="registration refused on every rank \(not_vmm\)')" = 1 ] \
  && ! lhas asym-err 'reason=timeout' && [ "$ms" -lt $((NCCLGUARD_TIMEOUT * 1000)) ] \
  && pass asym-error-policy-same-on-all || fail asym-error-policy-same-on-all "${ms}ms $(why asym-err)"
NCCLGUARD_AGREE=0 g asym-noagree --alloc cuda0 --timeout 6
[ $rc = 124 ] && echo "$out" | grep -q '^rank 1/2: RESULT fail hang in ncclCommWindowRegister ' \
  && ! echo "$out" | grep -q 'RESULT fail killed by signal' \
  && pass asym-needs-agreement || fail asym-needs-agreement "rc=$rc: without the agreement rank 1 should hang (124) $(echo "$out" | grep RESULT | tr '\n' ' ')"

# --- cudaMalloc on every rank (docs/NCCL.md §7: error, then the communicator is damaged) ------------
b cuda-bare --alloc cuda --iters 2 --timeout 10
# an error (ngtest: 1, a rank failed), not a crash (128+signal, a sanitizer's code) nor a hang (124)
! crashed $rc && [ $rc = 1 ] \
  && [ "$(echo "$out" | grep -Ec '^rank [01]/2: RESULT fail registration: ncclUnhandledCudaError ')" = 2 ] \
  && pass cuda-all-fails-without || fail cuda-all-fails-without "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
g cuda --alloc cuda --iters 3 --timeout 30
[ $rc = 0 ] && [ "$(nok)" = 2 ] && [ "$(logs cuda | grep -c 'decision=degrade reason=not_vmm')" = 2 ] \
  && pass cuda-all-degrades-comm-healthy || fail cuda-all-degrades-comm-healthy "$(why cuda)"

# --- ranks that share a machine as hosts of their own (NCCL_HOSTID per process) ---------------------
# NCCL's host is the hash of NCCL_HOSTID when it is set at all (empty too), else of the host name and boot id
# (getHostHashOnce, src/misc/utils.cc); ranks of different ids are different nodes. 2.27 and 2.28.3 have
# symmetric support on one node only (init.cc: `isAllDirectP2p && nNodes == 1 && ...`), so there a buffer the
# symmetric path would refuse goes to NCCL, which registers it locally on every rank, and ncclguard, whose host
# is NCCL's, passes it on; ranks of one id are one node and it degrades. 2.28.7+ keep symmetric support across
# nodes: the host id does not count there (docs/NCCL.md §1).
unset NCCL_HOSTID # (rank 1 of the empty-id case has none)
wins() { echo "$out" | grep -Ec "^rank [01]/2: RESULT ok reg=ncclSuccess win=0x[0-9a-f]+ $1"; }
NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_HOSTID=hb FAKE_NCCL_VERSION=22803 FAKE_CUDA_DEVICES=1 \
  b hosts283-bare --alloc cuda --expect-win nonnull
rc1=$rc n1=$(wins 'ar=ok')
NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_HOSTID=hb FAKE_NCCL_VERSION=22803 FAKE_CUDA_DEVICES=1 \
  g hosts283 --alloc cuda --expect-win nonnull --timeout 30
[ $rc1 = 0 ] && [ "$n1" = 2 ] && [ $rc = 0 ] && [ "$(wins 'ar=ok')" = 2 ] \
  && [ "$(logs hosts283 | grep -c 'decision=register reason=ok')" -ge 2 ] && ! lhas hosts283 'decision=(degrade|error)' \
  && lhas hosts283 'would refuse this buffer \(not_vmm\), but its ranks span several hosts' \
  && pass hosts-2.28.3-cudaMalloc-registered-locally-as-nccl || fail hosts-2.28.3-cudaMalloc-registered-locally-as-nccl "bare rc=$rc1 windows=$n1 | $(why hosts283)"
# one id on both ranks: one node, symmetric support; NCCL fails the cudaMalloc buffer, ncclguard degrades it
NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_HOSTID=ha FAKE_NCCL_VERSION=22803 FAKE_CUDA_DEVICES=1 \
  b hosts283s-bare --alloc cuda --expect-reg any --no-allreduce
n1=$(echo "$out" | grep -Ec '^rank [01]/2: RESULT ok reg=ncclUnhandledCudaError win=null')
NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_HOSTID=ha FAKE_NCCL_VERSION=22803 FAKE_CUDA_DEVICES=1 \
  g hosts283s --alloc cuda --expect-reg any --timeout 30
[ "$n1" = 2 ] && [ $rc = 0 ] && [ "$(logs hosts283s | grep -c 'decision=degrade reason=not_vmm')" = 2 ] \
  && pass hosts-2.28.3-one-id-one-node-degrades || fail hosts-2.28.3-one-id-one-node-degrades "bare errors=$n1 | $(why hosts283s)"
# an empty NCCL_HOSTID is an id (the empty string's hash), not the host name: a host of its own beside a rank without
NGTEST_ENV_RANK0=NCCL_HOSTID= FAKE_NCCL_VERSION=22803 FAKE_CUDA_DEVICES=1 g hosts283e --alloc cuda --expect-win nonnull --timeout 30
[ $rc = 0 ] && [ "$(wins 'ar=ok')" = 2 ] && ! lhas hosts283e 'decision=(degrade|error)' \
  && pass hosts-2.28.3-empty-id-is-a-host || fail hosts-2.28.3-empty-id-is-a-host "$(why hosts283e)"
# 2.27 under a capture: a local registration keeps the capture (capture-2.27-local-registers-without above)
NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_HOSTID=hb FAKE_NCCL_VERSION=22703 FAKE_CUDA_DEVICES=1 \
  b hosts27-bare -m proc --capture --expect-win nonnull
rc1=$rc n1=$(wins 'ar=ok capture=intact')
NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_HOSTID=hb FAKE_NCCL_VERSION=22703 FAKE_CUDA_DEVICES=1 \
  g hosts27 -m proc --capture --expect-win nonnull --timeout 30
[ $rc1 = 0 ] && [ "$n1" = 2 ] && [ $rc = 0 ] && [ "$(wins 'ar=ok capture=intact')" = 2 ] \
  && ! lhas hosts27 'decision=(degrade|error)' && lhas hosts27 'would refuse this buffer \(capturing\), but its ranks span several hosts' \
  && pass hosts-2.27-capture-registered-locally-as-nccl || fail hosts-2.27-capture-registered-locally-as-nccl "bare rc=$rc1 windows=$n1 | $(why hosts27)"
# 2.28.3, NCCL_P2P_DISABLE=1 on one of two hosts: its rules say no symmetric path, the other's yes (on one host):
# no symmetric support on either, NCCL registers locally on both (on one host ncclguard gives both a NULL window, the split of null-window-mixed below)
NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_P2P_DISABLE=1 FAKE_NCCL_VERSION=22803 FAKE_CUDA_DEVICES=1 \
  b hosts283p-bare --expect-win nonnull
rc1=$rc n1=$(wins 'ar=ok')
NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_P2P_DISABLE=1 FAKE_NCCL_VERSION=22803 FAKE_CUDA_DEVICES=1 \
  g hosts283p --expect-win nonnull --timeout 30
[ $rc1 = 0 ] && [ "$n1" = 2 ] && [ $rc = 0 ] && [ "$(wins 'ar=ok')" = 2 ] && ! lhas hosts283p 'decision=(degrade|error)' \
  && pass hosts-2.28.3-p2p-off-on-one-host-registered-locally || fail hosts-2.28.3-p2p-off-on-one-host-registered-locally "bare rc=$rc1 windows=$n1 | $(why hosts283p)"
# 2.28.9: symmetric across the two hosts (NVIDIA/nccl's isAllCudaP2p is per node): rank 0's cudaMalloc buffer
# still degrades on both ranks (NCCL alone: rank 1 hangs, fake_two_hosts_* in t_fake)
NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_HOSTID=hb FAKE_NCCL_VERSION=22809 FAKE_CUDA_DEVICES=1 \
  g hosts289 --alloc cuda0 --expect-win null --timeout 30
[ $rc = 0 ] && [ "$(nok)" = 2 ] && lhas hosts289 'decision=degrade reason=not_vmm' && lhas hosts289 'decision=degrade reason=peer_not_vmm' \
  && pass hosts-2.28.9-symmetric-across-hosts-degrades || fail hosts-2.28.9-symmetric-across-hosts-degrades "$(why hosts289)"

# --- nonblocking communicator, registration right after init (docs/NCCL.md §7) ---------------------
b nb-bare --nonblocking --no-allreduce
! crashed $rc && [ $rc = 1 ] \
  && [ "$(echo "$out" | grep -Ec '^rank [01]/2: RESULT fail registration: ncclInvalidArgument ')" = 2 ] \
  && pass nonblocking-fails-without || fail nonblocking-fails-without "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
g nb --nonblocking --expect-win nonnull
[ $rc = 0 ] && [ "$(nok)" = 2 ] && lhas nb 'fn=ready-wait' && lhas nb 'decision=register' \
  && pass nonblocking-ready-wait || fail nonblocking-ready-wait "$(why nb)"
# 2.29+ answer a communicator still initialising with success and a NULL window, silently (the
# matrix, tests/gpu/results/2026-11-30-matrix.md: 2.29.7 and 2.30.7 "ok, win=NULL"); ncclguard waits
# for the communicator and registers a real window ("ok")
for v in 22903 23007; do
  FAKE_NCCL_VERSION=$v b nb-bare-$v --nonblocking --no-allreduce
  [ $rc = 0 ] && [ "$(echo "$out" | grep -Ec '^rank [01]/2: RESULT ok reg=ncclSuccess win=null ')" = 2 ] \
    && pass nonblocking-$v-null-window-without || fail nonblocking-$v-null-window-without "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
  FAKE_NCCL_VERSION=$v g nb-$v --nonblocking --expect-win nonnull
  [ $rc = 0 ] && [ "$(nok)" = 2 ] && lhas nb-$v 'fn=ready-wait' && [ "$(logs nb-$v | grep -c 'decision=register reason=ok')" = 2 ] \
    && pass nonblocking-$v-ready-wait-registers || fail nonblocking-$v-ready-wait-registers "$(why nb-$v)"
done

# --- NCCLGUARD_RETRIES: NCCL says "invalid argument" while the communicator is not ready ------------
# tests/progs/libnotready.so (preloaded after ncclguard, so between it and NCCL) answers the first
# NOTREADY_FAILS registrations with ncclInvalidArgument and the next ncclCommGetAsyncError with
# ncclInProgress: the one case ncclguard registers again for, at most NCCLGUARD_RETRIES times
# nr NAME ARGS...: like g, with libnotready.so preloaded after ncclguard
nr() {
  n=$1; shift
  out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$n.%p.log" env LD_LIBRARY_PATH="$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM:$PROGS/libnotready.so" timeout -k 2 "$NG_TIMEOUT" "$NG" "$@" 2>"$T/$n.err"); rc=$?
}
if ! nm -D --defined-only "$PROGS/libnotready.so" 2>/dev/null | grep -q ' notready_active$'; then
  echo "# skip retries-*: tests/progs/libnotready.so has no trampolines on $(uname -m) (x86-64, aarch64 only)"
else
NOTREADY_FAILS=2 NCCLGUARD_RETRIES=3 nr retry --expect-win nonnull
[ $rc = 0 ] && [ "$(nok)" = 2 ] && [ "$(logs retry | grep -c 'decision=retry .*communicator not ready')" = 4 ] \
  && [ "$(logs retry | grep -c 'decision=register .*msg="registered"')" = 2 ] \
  && pass retries-register-again-when-not-ready || fail retries-register-again-when-not-ready "$(why retry)"
NOTREADY_FAILS=4 NCCLGUARD_RETRIES=3 nr retry-bound --expect-win null
[ $rc = 0 ] && [ "$(nok)" = 2 ] && [ "$(logs retry-bound | grep -c 'decision=retry ')" = 6 ] \
  && [ "$(logs retry-bound | grep -c 'decision=degrade reason=nccl_error')" = 2 ] \
  && pass retries-bounded-by-setting || fail retries-bounded-by-setting "$(why retry-bound)"
NOTREADY_FAILS=1 NCCLGUARD_RETRIES=0 nr retry-off --expect-win null
[ $rc = 0 ] && [ "$(nok)" = 2 ] && ! lhas retry-off 'decision=retry ' \
  && [ "$(logs retry-off | grep -c 'decision=degrade reason=nccl_error')" = 2 ] \
  && pass retries-0-no-retry || fail retries-0-no-retry "$(why retry-off)"
fi

# --- misaligned offset (2.28: not a multiple of 4096 from the allocation base) ----------------------
b mis-bare --offset 1000 --size 65536 --no-allreduce --timeout 10
! crashed $rc && [ $rc = 1 ] \
  && [ "$(echo "$out" | grep -Ec '^rank [01]/2: RESULT fail registration: ncclInvalidArgument ')" = 2 ] \
  && pass misaligned-fails-without || fail misaligned-fails-without "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
g mis --offset 1000 --size 65536 --iters 2
[ $rc = 0 ] && lhas mis 'decision=degrade reason=misaligned' && pass misaligned-degrades || fail misaligned-degrades "$(why mis)"
# 2.27: the allocation's base and size must be multiples of 2 MiB (docs/NCCL.md §2). --alloc small maps
# 1 MiB of a 2 MiB handle (the fake CUDA allows a mapping below its granularity; real CUDA's is 2 MiB):
# NCCL alone WARNs and answers a NULL window; ncclguard's preflight finds it first and degrades. The two
# rank processes share stderr: what counts is that each of them WARNed (two process ids), not the lines
FAKE_NCCL_VERSION=22703 b small-bare --alloc small --size 1M --expect-win null
[ $rc = 0 ] && [ "$(nok)" = 2 ] \
  && [ "$(grep -oE 'fake-nccl [0-9]+ WARN NCCL window registration requires a 2MB aligned allocation' "$T/small-bare.err" | sort -u | wc -l)" = 2 ] \
  && pass misaligned-2m-2.27-null-window-without || fail misaligned-2m-2.27-null-window-without "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
FAKE_NCCL_VERSION=22703 g small --alloc small --size 1M --expect-win null
[ $rc = 0 ] && [ "$(nok)" = 2 ] && [ "$(logs small | grep -c 'decision=degrade reason=misaligned')" = 2 ] \
  && ! grep -q 'requires a 2MB aligned' "$T/small.err" \
  && pass misaligned-2m-2.27-degrades || fail misaligned-2m-2.27-degrades "$(why small)"
FAKE_NCCL_VERSION=22809 g small-2.28 --alloc small --size 1M --expect-win nonnull
[ $rc = 0 ] && [ "$(nok)" = 2 ] && ! lhas small-2.28 'decision=(degrade|error)' \
  && pass small-mapping-2.28-registers || fail small-mapping-2.28-registers "$(why small-2.28)"
g mis4k --offset 4096 --size 65536 --expect-win nonnull
[ $rc = 0 ] && lhas mis4k 'decision=register' && pass aligned-offset-registers || fail aligned-offset-registers "$(why mis4k)"

# --- groups: one thread drives every GPU; registrations inside ncclGroupStart/End -------------------
g grp -m group --reg-in-group --expect-win nonnull --iters 2 --timeout 30
[ $rc = 0 ] && [ "$(nok)" = 2 ] && lhas grp 'decision=register' && pass group-registers || fail group-registers "$(why grp)"
# NCCL alone, one thread driving both ranks, rank 0 on cudaMalloc: two registration jobs, the failing one aborts
# the other's communicator too (asyncJobLaunch, src/group.cc; from the source, not measured: needs one process
# on two GPUs, tests/fake/README.md): ncclGroupEnd fails on both ranks, both communicators are dead after
b grp-asym-bare -m group --reg-in-group --alloc cuda0 --timeout 5
[ $rc != 124 ] && [ "$(echo "$out" | grep -c 'RESULT fail .*reg=ncclUnhandledCudaError win=null ar=error:ncclInternalError')" = 2 ] \
  && pass group-asym-fails-without || fail group-asym-fails-without "rc=$rc $out"
g grp-asym -m group --reg-in-group --alloc cuda0 --iters 2 --timeout 30
[ $rc = 0 ] && [ "$(nok)" = 2 ] && [ "$(logs grp-asym | grep -c 'decision=degrade')" = 2 ] \
  && pass group-asym-degrades-no-deadlock || fail group-asym-degrades-no-deadlock "$(why grp-asym)"
g thr-grp -m thread --reg-in-group --alloc cuda0 --iters 2 --timeout 30
[ $rc = 0 ] && [ "$(nok)" = 2 ] && pass group-per-thread-asym || fail group-per-thread-asym "$(why thr-grp)"

# --- graph capture (2.28: registration fails and invalidates the capture) ---------------------------
b cap-bare -m proc --capture --no-allreduce --expect-reg any
echo "$out" | grep -q 'invalidated' && pass capture-invalidated-without || fail capture-invalidated-without "rc=$rc $out"
g cap -m proc --capture --expect-win nonnull
# default NCCLGUARD_CAPTURE=relaxed: this thread switches to relaxed capture mode around the real call,
# so NCCL's allocations are allowed and the caller's capture survives (measured on 2 x H200, 2.28.9)
[ $rc = 0 ] && lhas cap 'decision=register' && ! echo "$out" | grep -q 'capture=invalidated' \
  && pass capture-relaxed-registers-capture-kept || fail capture-relaxed-registers-capture-kept "$(why cap)"
NCCLGUARD_CAPTURE=degrade g capd -m proc --capture --expect-reg any
[ $rc = 0 ] && lhas capd 'decision=degrade reason=capturing' && ! echo "$out" | grep -q 'capture=invalidated' \
  && pass capture-degrade-capture-kept || fail capture-degrade-capture-kept "$(why capd)"
FAKE_NCCL_VERSION=22703 b cap27-bare -m proc --capture --no-allreduce --expect-reg any
echo "$out" | grep -q 'capture=invalidated' && pass capture-2.27-invalidated-without \
  || fail capture-2.27-invalidated-without "the fake should model 2.27 failing under capture: $out"
FAKE_NCCL_VERSION=22703 g cap27 -m proc --capture --expect-reg any
[ $rc = 0 ] && lhas cap27 'decision=degrade reason=capturing' && ! echo "$out" | grep -q 'capture=invalidated' \
  && pass capture-2.27-degrades-capture-kept || fail capture-2.27-degrades-capture-kept "$(why cap27)"
# 2.27 without symmetric support (one rank; NCCL_WIN_ENABLE=0) registers locally with the capture
# intact (measured on 1 x H200, 2.27.7): passed to NCCL, as without ncclguard
FAKE_NCCL_VERSION=22703 b cap27-1-bare -n 1 -m proc --capture --expect-win nonnull
[ $rc = 0 ] && ! echo "$out" | grep -q 'capture=invalidated' && pass capture-2.27-local-registers-without \
  || fail capture-2.27-local-registers-without "rc=$rc $out"
FAKE_NCCL_VERSION=22703 g cap27-1 -n 1 -m proc --capture --expect-win nonnull
[ $rc = 0 ] && lhas cap27-1 'decision=register reason=ok' && ! echo "$out" | grep -q 'capture=invalidated' \
  && pass capture-2.27-local-one-rank-registers || fail capture-2.27-local-one-rank-registers "$(why cap27-1)"
FAKE_NCCL_VERSION=22703 NCCL_WIN_ENABLE=0 g cap27-w0 -m proc --capture --expect-win nonnull
[ $rc = 0 ] && [ "$(logs cap27-w0 | grep -c 'decision=register reason=ok .*msg="registered"')" = 2 ] && ! echo "$out" | grep -q 'capture=invalidated' \
  && pass capture-2.27-win0-registers || fail capture-2.27-win0-registers "$(why cap27-w0)"
# without agreement (NCCLGUARD_AGREE=0) this rank's rules decide: symmetric by them, so degraded
FAKE_NCCL_VERSION=22703 NCCLGUARD_AGREE=0 g cap27-na -m proc --capture --expect-reg any
[ $rc = 0 ] && [ "$(logs cap27-na | grep -c 'decision=degrade reason=capturing')" = 2 ] && ! echo "$out" | grep -q 'capture=invalidated' \
  && pass capture-2.27-no-agree-degrades || fail capture-2.27-no-agree-degrades "$(why cap27-na)"
# 2.27 with NCCL_LOCAL_REGISTER=0 registers nothing, on every path: success with a NULL window
# (register.cc at v2.27.7-1); ncclguard passes it to NCCL and reports NCCL's NULL window
FAKE_NCCL_VERSION=22703 NCCL_LOCAL_REGISTER=0 b lr0-bare -m proc --expect-win null
[ $rc = 0 ] && pass local-register-0-2.27-null-window-without || fail local-register-0-2.27-null-window-without "rc=$rc $out"
FAKE_NCCL_VERSION=22703 NCCL_LOCAL_REGISTER=0 g lr0 -m proc --expect-win null
[ $rc = 0 ] && ! lhas lr0 'decision=(degrade|error)' && lhas lr0 'NCCL_LOCAL_REGISTER=0' \
  && pass local-register-0-2.27-passed-to-nccl || fail local-register-0-2.27-passed-to-nccl "$(why lr0) $(logs lr0 | grep -c WindowRegister)"
FAKE_NCCL_VERSION=23007 g cap30 -m proc --capture --expect-win nonnull
[ $rc = 0 ] && lhas cap30 'decision=register' && pass capture-2.30.7-registers || fail capture-2.30.7-registers "$(why cap30)"
# one thread registering on two communicators in one group under a capture: 2.28 - 2.30.6 run the two
# registration jobs in threads of their own, whose capture mode is not this thread's relaxed one
# (tests/fake/README.md: source): NCCL alone and relaxed mode both lose the capture; ncclguard degrades both
# windows (reason capturing) and the capture survives; 2.30.7 relaxes inside the job: both register
b capjobs-bare -m group --reg-in-group --capture --expect-reg any --no-allreduce --timeout 20
[ $rc != 124 ] && [ "$(echo "$out" | grep -c 'RESULT fail .*reg=ncclUnhandledCudaError .*capture=invalidated')" = 2 ] \
  && pass capture-two-jobs-invalidated-without || fail capture-two-jobs-invalidated-without "rc=$rc $out"
g capjobs -m group --reg-in-group --capture --expect-reg any --no-allreduce --timeout 20
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok reg=ncclSuccess win=null .*capture=intact')" = 2 ] \
  && [ "$(logs capjobs | grep -c 'decision=degrade reason=capturing')" = 2 ] \
  && pass capture-two-jobs-degrade-capture-kept || fail capture-two-jobs-degrade-capture-kept "$(why capjobs)"
FAKE_NCCL_VERSION=23007 g capjobs30 -m group --reg-in-group --capture --expect-win nonnull --no-allreduce --timeout 20
[ $rc = 0 ] && [ "$(logs capjobs30 | grep -c 'decision=register')" = 2 ] && ! echo "$out" | grep -q 'capture=invalidated' \
  && pass capture-two-jobs-2.30.7-register || fail capture-two-jobs-2.30.7-register "$(why capjobs30)"

# --- PyTorch's teardown: deregistration after destroy (docs/PYTORCH.md §3) ----------------------------
# the specific error on each rank (tests/fake/README.md: ncclUnhandledCudaError, last error "Cuda
# failure 101 'invalid device ordinal'"), and an error exit (1), not a crash
b dad-bare --dereg-after-destroy --expect-reg any
! crashed $rc && [ $rc = 1 ] \
  && [ "$(echo "$out" | grep -Ec "^rank [01]/2: ncclCommWindowDeregister\(comm=.*\) \[after destroy\] -> ncclUnhandledCudaError .* last=\"Cuda failure 101 'invalid device ordinal'\"")" = 2 ] \
  && [ "$(echo "$out" | grep -Ec '^rank [01]/2: RESULT fail deregister after destroy: ncclUnhandledCudaError ')" = 2 ] \
  && pass dereg-after-destroy-errors-without || fail dereg-after-destroy-errors-without "rc=$rc $(echo "$out" | grep -E 'after destroy|RESULT' | tr '\n' ' ')"
NCCLGUARD_LOG=trace g dad --dereg-after-destroy
[ $rc = 0 ] && lhas dad 'fn=ncclCommWindowDeregister .*decision=noop reason=comm_destroyed' \
  && pass dereg-after-destroy-noop || fail dereg-after-destroy-noop "$(why dad)"
# ncclCommDestroy deregisters the remaining windows itself, through the public symbol (docs/NCCL.md §6)
lhas dad 'fn=ncclCommWindowDeregister .*decision=internal' && pass nccl-internal-calls-pass-through \
  || fail nccl-internal-calls-pass-through "no internal deregistration seen (fake ncclCommDestroy calls it through the PLT)"

# --- split communicators --------------------------------------------------------------------------
g split -n 4 -m thread --split --iters 2 --expect-win nonnull
[ $rc = 0 ] && [ "$(nok)" = 4 ] && lhas split 'fn=ncclCommSplit .*parent=' && pass split-registers || fail split-registers "$(why split)"

# --- device communicators never see a degraded window ---------------------------------------------
g dc --alloc cuda --devcomm --expect-reg any
lhas dc 'fn=ncclDevCommCreate .*result=ncclInvalidUsage .*reason=degraded_windows' && pass devcomm-refused-after-degrade \
  || fail devcomm-refused-after-degrade "$(why dc)"
g dcok --devcomm --expect-win nonnull
[ $rc = 0 ] && lhas dcok 'fn=ncclDevCommCreate .*result=ncclSuccess' && pass devcomm-normal || fail devcomm-normal "$(why dcok)"
# NCCL 2.29+ refuse requirements without NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER's magic (2.28's device API: PyTorch 2.11
# on a newer NCCL; the fake models it, tests/fake/README.md): NCCL's answer kept (ncclInvalidUsage, as alone), and one
# WARN line per rank naming the cause and the fix; 2.28 (that layout is its own) passes as before
FAKE_NCCL_VERSION=23007 b dcm-bare -n 2 --devcomm --no-allreduce
rcb=$rc; nb=$(echo "$out" | grep -c 'ncclDevCommCreate(.*-> ncclInvalidUsage')
FAKE_NCCL_VERSION=23007 g dcm -n 2 --devcomm --no-allreduce
ng=$(echo "$out" | grep -c 'ncclDevCommCreate(.*-> ncclInvalidUsage')
if [ $rcb != 0 ] && [ $rc != 0 ] && [ "$nb" = 2 ] && [ "$ng" = 2 ] \
   && [ "$(logs dcm | grep -c 'fn=ncclDevCommCreate .*result=ncclInvalidUsage .*carry no NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER magic.*Fix: load the NCCL the program was built with')" = 2 ] \
   && [ "$(logs dcm | grep 'fn=ncclDevCommCreate' | grep -c WARN)" = 2 ] && ! lhas dcok 'NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER'; then
  pass devcomm-no-magic-named-answer-kept
else fail devcomm-no-magic-named-answer-kept "rc=$rcb/$rc bare=$nb guard=$ng $(logs dcm | grep ncclDevCommCreate | head -2)"; fi

# --- NCCL's own NULL window (2.29+: no symmetric support) --------------------------------------------
FAKE_NCCL_VERSION=22903 FAKE_NCCL_NO_SYMMETRIC=1 g nw -m thread --expect-win null
[ $rc = 0 ] && lhas nw 'reason=null_window' && pass null-window-detected || fail null-window-detected "$(why nw)"
FAKE_NCCL_VERSION=22903 FAKE_NCCL_NO_SYMMETRIC=1 NCCLGUARD_NULL_WINDOW=error g nwe -m thread --expect-reg error --no-allreduce
[ $rc = 0 ] && [ "$(logs nwe | grep -c 'decision=error reason=null_window')" = 2 ] && pass null-window-error-policy || fail null-window-error-policy "$(why nwe)"

# --- the same buffer twice: two windows -------------------------------------------------------------
g twice -m thread --twice --expect-win nonnull
[ $rc = 0 ] && [ "$(logs twice | grep -c 'decision=register')" = 4 ] && pass register-twice || fail register-twice "$(why twice)"

# --- a library loaded RTLD_LOCAL (as PyTorch loads NCCL) against the fake --------------------------------
out=$(cd "$PROGS" && NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/dl.%p.log" fake_run "$PROGS/dlopen_local" "$PROGS/libconsumer.so" 2>&1); rc=$?
[ $rc = 0 ] && lhas dl 'found via loaded libnccl \(RTLD_NOLOAD\)' && lhas dl 'decision=register' \
  && pass rtld-local-consumer || fail rtld-local-consumer "rc=$rc $out $(logs dl | head -3)"

# --- fork after communicators and windows exist -----------------------------------------------------
out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/fork.%p.log" fake_run "$PROGS/fork_after" 2>&1); rc=$?
[ $rc = 0 ] && [ "$(ls "$T"/fork.*.log 2>/dev/null | wc -l)" -ge 2 ] && pass fork-child-works || fail fork-child-works "rc=$rc $out"

# --- disabled: exactly NCCL's behaviour (the asymmetric case hangs again) ------------------------------
NCCLGUARD_DISABLE=1 g dis --alloc cuda0 --timeout 5
[ $rc = 124 ] && [ -z "$(logs dis)" ] && pass disable-is-pass-through || fail disable-is-pass-through "rc=$rc"

# --- the log file's size bound: past NCCLGUARD_LOG_MAX_MB only WARN lines, the summary counts the rest
out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_MAX_MB=1 NCCLGUARD_LOG_FILE="$T/cap.log" fake_run "$PROGS/soak" -n 1 -c 4000 -k 2 2>&1); rc=$?
sz=$(stat -c %s "$T/cap.log" 2>/dev/null || echo 0)
[ $rc = 0 ] && [ "$sz" -le $((1024 * 1024 + 8192)) ] && has "$T/cap.log" 'reached NCCLGUARD_LOG_MAX_MB=1' \
  && has "$T/cap.log" 'fn=summary .*log_dropped=[1-9]' && pass log-size-bound || fail log-size-bound "rc=$rc size=$sz $(tail -2 "$T/cap.log")"

# --- warm-up modes: one all-reduce when a blocking communicator becomes ready, before the application can
# have issued anything on it (auto, always: the same; also without the agreement), none (never) -------------
for wm in auto always; do
  NCCLGUARD_WARMUP=$wm g wu-$wm -m thread --no-allreduce
  # one per rank, each before that rank's first registration (its log in order: creation, warm-up, registration)
  first=$(logs wu-$wm | grep -m1 -oE 'fn=(warmup|ncclCommWindowRegister)')
  [ $rc = 0 ] && [ "$(logs wu-$wm | grep -c 'fn=warmup msg="warm-up all-reduce on communicator .* (ncclCommInitRank): ncclSuccess, enqueued')" = 2 ] \
    && [ "$first" = fn=warmup ] && pass warmup-$wm-at-creation || fail warmup-$wm-at-creation "$(why wu-$wm)"
done
NCCLGUARD_AGREE=0 g wu-noagree -m thread --no-allreduce
[ $rc = 0 ] && [ "$(logs wu-noagree | grep -c 'warm-up all-reduce on communicator')" = 2 ] && pass warmup-auto-without-agreement \
  || fail warmup-auto-without-agreement "$(why wu-noagree)"
NCCLGUARD_AGREE=0 NCCLGUARD_WARMUP=never g wu-never -m thread --no-allreduce
[ $rc = 0 ] && ! lhas wu-never 'fn=warmup' && lhas wu-never 'decision=register' && pass warmup-never \
  || fail warmup-never "$(why wu-never)"
# communicators created inside a group (ncclCommInitAll, and -m group's group of inits) are warmed up at its end
g wu-group -m group --no-allreduce
[ $rc = 0 ] && [ "$(logs wu-group | grep -c 'fn=warmup msg="warm-up all-reduce on communicator')" -ge 2 ] \
  && pass warmup-group-created-at-group-end || fail warmup-group-created-at-group-end "$(why wu-group)"

# --- end to end: the launcher's per-rank logs, read back by the report ------------------------------
rm -rf "$T/job"
out=$(env LD_LIBRARY_PATH="$FAKE" NCCLGUARD_LIB="$SHIM" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}" timeout 30 \
      "$B/ncclguard-run" --log-dir "$T/job" -- "$NG" -n 2 --alloc cuda0 --iters 2 2>&1); rc=$?
rep=$("$B/ncclguard-report" "$T/job" 2>&1); rrc=$?
# one file per rank, named by the communicator's rank (%r) although no launcher variable gives it
[ $rc = 0 ] && [ "$(ls "$T/job" | grep -c '\.[01]\.log$')" = 2 ] && echo "$rep" | grep -qi 'degrade' && echo "$rep" | grep -q 'not_vmm' \
  && pass launcher-logs-to-report || fail launcher-logs-to-report "rc=$rc rrc=$rrc files=$(ls "$T/job" | tr '\n' ' ') $(echo "$rep" | head -12)"

# --- never degrade where device code reads windows: a communicator with a device communicator -------
out=$(bare_run "$PROGS/devcomm_then_bad" 2>&1)
echo "$out" | grep -q 'RESULT first=0 devcomm=0 second=1 ' && pass devcomm-then-cudamalloc-fails-without \
  || fail devcomm-then-cudamalloc-fails-without "$out"
out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/dcb.%p.log" fake_run "$PROGS/devcomm_then_bad" 2>&1)
echo "$out" | grep -q 'RESULT first=0 devcomm=0 second=5 win2=(nil)' && lhas dcb 'decision=error reason=not_vmm .*device communicator' \
  && pass devcomm-then-cudamalloc-error-not-degrade || fail devcomm-then-cudamalloc-error-not-degrade "$out $(logs dcb | grep WARN | head -2)"

# --- `buff + size` that wraps past the top of the address space, on both ranks (docs/NCCL.md §2;
# tests/fake/README.md): 2.27 and 2.28 register it (2.28.9 measured: success on every rank), so
# ncclguard passes it to NCCL; 2.29 finds no allocation (an error on every rank) and 2.30.7 aborts:
# ncclguard degrades on every rank, reason out_of_range
for v in 22703 22809; do
  FAKE_NCCL_VERSION=$v b wrap-$v-bare -m thread --wrap-size --no-allreduce --expect-win nonnull --timeout 20
  rcb=$rc
  FAKE_NCCL_VERSION=$v g wrap-$v -m thread --wrap-size --no-allreduce --expect-win nonnull --timeout 20
  [ $rcb = 0 ] && [ $rc = 0 ] && [ "$(logs wrap-$v | grep -c 'fn=ncclCommWindowRegister .*decision=register reason=ok')" = 2 ] \
    && ! lhas wrap-$v 'decision=(degrade|error)' && lhas wrap-$v 'fn=ncclCommWindowRegister .* size=[0-9]{19,20} ' \
    && pass wrap-$v-registers-as-nccl || fail wrap-$v-registers-as-nccl "bare rc=$rcb; $(why wrap-$v)"
done
FAKE_NCCL_VERSION=22903 b wrap-22903-bare -m thread --wrap-size --no-allreduce --expect-reg error --timeout 20
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok reg=ncclUnhandledCudaError win=null')" = 2 ] \
  && pass wrap-22903-fails-without || fail wrap-22903-fails-without "rc=$rc $out"
FAKE_NCCL_VERSION=23007 b wrap-23007-bare -m thread --wrap-size --no-allreduce --expect-reg any --timeout 20
crashed $rc && grep -q 'Assertion .numSegments == 1. failed' "$T/wrap-23007-bare.err" && pass wrap-23007-aborts-without \
  || fail wrap-23007-aborts-without "rc=$rc $out"
for v in 22903 23007; do
  FAKE_NCCL_VERSION=$v g wrap-$v -m thread --wrap-size --no-allreduce --expect-win null --timeout 20
  [ $rc = 0 ] && [ "$(nok)" = 2 ] && [ "$(logs wrap-$v | grep -c 'fn=ncclCommWindowRegister .*decision=degrade reason=out_of_range')" = 2 ] \
    && pass wrap-$v-degrades || fail wrap-$v-degrades "$(why wrap-$v)"
done

# --- 2.27 inside one group, one thread driving both ranks (docs/NCCL.md §6: the checks and *win in the
# call, the exchange at group end; the fake deadlocked here before): NCCL alone registers on both ranks,
# ncclguard too; with cudaMalloc on rank 0 ncclguard degrades on both, no hang
FAKE_NCCL_VERSION=22703 b group27-bare -m group --reg-in-group --expect-win nonnull --iters 2 --timeout 20
[ $rc = 0 ] && [ "$(nok)" = 2 ] && pass group-2.27-registers-without || fail group-2.27-registers-without "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
FAKE_NCCL_VERSION=22703 g group27 -m group --reg-in-group --expect-win nonnull --iters 2 --timeout 20
[ $rc = 0 ] && [ "$(nok)" = 2 ] && [ "$(logs group27 | grep -c 'fn=ncclCommWindowRegister .*decision=register reason=ok')" = 2 ] \
  && pass group-2.27-registers || fail group-2.27-registers "$(why group27)"
FAKE_NCCL_VERSION=22703 g group27-asym -m group --reg-in-group --alloc cuda0 --expect-win null --timeout 20
[ $rc = 0 ] && [ "$(nok)" = 2 ] && lhas group27-asym 'fn=ncclCommWindowRegister .*decision=degrade reason=not_vmm' \
  && lhas group27-asym 'fn=ncclCommWindowRegister .*decision=degrade reason=peer_not_vmm' \
  && pass group-2.27-asym-degrades-no-deadlock || fail group-2.27-asym-degrades-no-deadlock "$(why group27-asym)"

# --- a peer that never takes part (here: rank 1 runs without ncclguard and registers cudaMalloc
# memory, so it fails locally and never joins): the agreement gives up after NCCLGUARD_TIMEOUT
# with a clear error instead of hanging forever (NCCL alone: hang, asym-hangs-without above)
NCCLGUARD_TIMEOUT=3 NGTEST_ENV_RANK1=NCCLGUARD_DISABLE=1 g peer-missing --alloc cuda --expect-reg any --no-allreduce --timeout 25
# (the peer without ncclguard does not run the warm-up at creation: the warm-up's connection setup waits for it
# until the watchdog revokes the communicator, and its registration is refused)
lhas peer-missing 'the warm-up all-reduce has not returned after 3.[0-9] s' && lhas peer-missing 'decision=error reason=comm_broken' \
  && lhas peer-missing 'ncclCommDestroy|ncclCommAbort' && [ $rc != 124 ] && ! crashed $rc && pass peer-missing-times-out || fail peer-missing-times-out "$(why peer-missing)"

# --- buffers only the preflight can judge, on each modelled NCCL version (one rank): where NCCL alone
# registers, ncclguard registers too; where NCCL alone refuses (or 2.27 gives a NULL window),
# ncclguard degrades and names the reason (docs/NCCL.md: 2.27 and 2.29 check the range, 2.28 does not,
# 2.30 wants mapped VMM memory to the last byte; a buffer on another GPU is NCCL's business)
for v in 22703 22809 22903 23007; do
  for c in wrong-device:- out-of-range:out_of_range host:not_device; do
    name=${c%%:*} reason=${c#*:}
    bare=$(FAKE_NCCL_VERSION=$v bare_run "$PROGS/preflight_cases" "$name" 2>/dev/null | grep RESULT)
    out=$(FAKE_NCCL_VERSION=$v NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/pf-$name-$v.%p.log" fake_run "$PROGS/preflight_cases" "$name" 2>&1 | grep RESULT)
    case "$bare" in
      *"reg=0 win=(nil)"*|*"reg=0 win=0x"*) # NCCL alone succeeded: the same answer with ncclguard
        want=$(echo "$bare" | sed 's/win=0x[0-9a-f]*/win=0x/'); got=$(echo "$out" | sed 's/win=0x[0-9a-f]*/win=0x/')
        [ "$got" = "$want" ] && ! lhas "pf-$name-$v" 'decision=(degrade|error)' && pass "preflight-$name-$v-same-as-nccl ($bare)" \
          || fail "preflight-$name-$v-same-as-nccl" "NCCL alone: $bare; with ncclguard: $out $(logs "pf-$name-$v" | grep WARN | head -1)" ;;
      *) # NCCL alone refused it: degraded, with the reason
        echo "$out" | grep -q "reg=0 win=(nil)" && lhas "pf-$name-$v" "decision=degrade reason=$reason" \
          && pass "preflight-$name-$v-degrades ($bare)" \
          || fail "preflight-$name-$v-degrades" "NCCL alone: $bare; with: $out $(logs "pf-$name-$v" | grep WARN | head -1)" ;;
    esac
  done
done

# --- one window layout on every rank (faults layout-*: step 0 differs on the last rank, step 1 is the same
# everywhere and its all-reduce is checked). Sizes: before 2.30.7 each rank places its symmetric window by
# its own size, so the step-1 windows sit at different offsets and the symmetric all-reduce reads the wrong
# memory (the fake: garbage, silently); ncclguard refuses step 0 on every rank (degraded) and the all-reduce
# is right. From 2.30.7 (the largest size reserved on every rank) unequal sizes are registered, logged at INFO.
L=$PROGS/faults
for v in 22809 22907; do
  out=$(FAKE_NCCL_VERSION=$v bare_run "$L" layout-sizes --timeout 20 2>/dev/null); rc=$?
  [ "$(echo "$out" | grep -c 'RESULT fail .*sum=wrong')" -ge 1 ] && pass "layout-sizes-$v-wrong-data-without" \
    || fail "layout-sizes-$v-wrong-data-without" "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
  out=$(FAKE_NCCL_VERSION=$v NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/lay-$v.%p.log" fake_run "$L" layout-sizes --timeout 20 2>/dev/null); rc=$?
  [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*win0=null .*win1=set .*sum=ok')" = 2 ] \
    && [ "$(logs lay-$v | grep -c 'seq=0 .*decision=degrade reason=layout_mismatch')" = 2 ] \
    && [ "$(logs lay-$v | grep -c 'fn=layout msg="the ranks of communicator .* allocations of different sizes at step 0: from 2097152 to 4194304 bytes')" = 2 ] \
    && pass "layout-mismatch (NCCL $v: refused on every rank)" || fail "layout-mismatch (NCCL $v: refused on every rank)" "$(why lay-$v)"
done
# the same with flags 0 at step 0: NCCL places every window of a communicator with symmetric support in the
# space, whatever its flags (symMemoryObtain at v2.28.9-1, the flag gates only the symmetric kernels), so the
# step-1 window moves alike (at eb3cf18 registered with an INFO "not a symmetric window here": wrong sum)
for v in 22809 22907 23004; do
  out=$(FAKE_NCCL_VERSION=$v bare_run "$L" layout-sizes-flags0 --timeout 20 2>/dev/null); rc=$?
  out2=$(FAKE_NCCL_VERSION=$v NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/lays0-$v.%p.log" fake_run "$L" layout-sizes-flags0 --timeout 20 2>/dev/null); rc2=$?
  [ "$(echo "$out" | grep -c 'RESULT fail .*sum=wrong')" -ge 1 ] \
    && [ $rc2 = 0 ] && [ "$(echo "$out2" | grep -c 'RESULT ok .*win0=null .*win1=set .*sum=ok')" = 2 ] \
    && [ "$(logs lays0-$v | grep -c 'flags=0 .*seq=0 .*decision=degrade reason=layout_mismatch')" = 2 ] \
    && pass "layout-mismatch-flags0 (NCCL $v: refused on every rank, wrong data without)" \
    || fail "layout-mismatch-flags0 (NCCL $v: refused on every rank, wrong data without)" "without: $(echo "$out" | grep RESULT | tr '\n' ' ') with: $(echo "$out2" | grep RESULT | tr '\n' ' ') $(logs lays0-$v | grep 'seq=0' | head -2 | cut -c1-200)"
done
# an allocation NCCL already placed on some ranks, a new one on others (faults layout-reuse): before 2.30.7
# NCCL reuses the place of an allocation it placed (symMemoryObtain's lookup), so the step-1 windows, and
# the step-2 ones after them, sit at different places: wrong sum without ncclguard (and at 8f4b3cc with
# it); refused on every rank at step 1, the step-2 all-reduce right. 2.30.7 (no lookup): registered.
for v in 22809 22907 23004; do
  out=$(FAKE_NCCL_VERSION=$v bare_run "$L" layout-reuse --timeout 20 2>/dev/null); rc=$?
  out2=$(FAKE_NCCL_VERSION=$v NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/layr-$v.%p.log" fake_run "$L" layout-reuse --timeout 20 2>/dev/null); rc2=$?
  [ "$(echo "$out" | grep -c 'RESULT fail .*sum=wrong')" -ge 1 ] \
    && [ $rc2 = 0 ] && [ "$(echo "$out2" | grep -c 'RESULT ok .*win0=set .*win1=null .*win2=set .*sum=ok')" = 2 ] \
    && [ "$(logs layr-$v | grep -c 'seq=1 .*decision=degrade reason=layout_mismatch')" = 2 ] \
    && [ "$(logs layr-$v | grep -c 'WARN fn=layout msg="the ranks of communicator .* at step 1 a window in an allocation that already holds')" = 2 ] \
    && pass "layout-reuse-$v-refused-every-rank (wrong data without)" \
    || fail "layout-reuse-$v-refused-every-rank (wrong data without)" "without: $(echo "$out" | grep RESULT | tr '\n' ' ') with: $(echo "$out2" | grep RESULT | tr '\n' ' ')"
done
out=$(FAKE_NCCL_VERSION=23007 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/layr-23007.%p.log" fake_run "$L" layout-reuse --timeout 20 2>/dev/null); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*win1=set .*sum=ok')" = 2 ] && ! lhas layr-23007 'decision=(degrade|error)' \
  && pass layout-reuse-2.30.7-registered || fail layout-reuse-2.30.7-registered "$(why layr-23007)"
out=$(FAKE_NCCL_VERSION=23007 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/lay-23007.%p.log" fake_run "$L" layout-sizes --timeout 20 2>/dev/null); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*win0=set .*win1=set .*sum=ok')" = 2 ] \
  && [ "$(logs lay-23007 | grep -c 'INFO fn=layout .*NCCL 2.30.7+ reserves the largest')" = 2 ] \
  && ! lhas lay-23007 'decision=(degrade|error)' \
  && pass layout-sizes-2.30.7-registered-info || fail layout-sizes-2.30.7-registered-info "$(why lay-23007)"
# a window over two allocations mapped back to back (PyTorch's expandable segments), 2 + 2 MiB on one rank and
# 2 + 4 MiB on the other: 2.30.0-2.30.6 place the span of the segments (4 vs 6 MiB: later windows apart,
# garbage, silently), so ncclguard refuses it on every rank; 2.28 places the first allocation (2 MiB on both:
# registered); 2.30.7 reserves the largest span (registered, INFO)
out=$(FAKE_NCCL_VERSION=23004 bare_run "$L" layout-segments --timeout 20 2>/dev/null); rc=$?
[ "$(echo "$out" | grep -c 'RESULT fail .*sum=wrong')" -ge 1 ] && pass "layout-segments-2.30.4-wrong-data-without" \
  || fail "layout-segments-2.30.4-wrong-data-without" "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
out=$(FAKE_NCCL_VERSION=23004 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/lays.%p.log" fake_run "$L" layout-segments --timeout 20 2>/dev/null); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*win0=null .*win1=set .*sum=ok')" = 2 ] \
  && [ "$(logs lays | grep -c 'seq=0 .*decision=degrade reason=layout_mismatch')" = 2 ] \
  && [ "$(logs lays | grep -c 'fn=layout msg="the ranks of communicator .* different sizes at step 0: from 4194304 to 6291456 bytes')" = 2 ] \
  && pass "layout-segments-2.30.4-span-refused-every-rank" || fail "layout-segments-2.30.4-span-refused-every-rank" "$(why lays)"
for v in 22809 23007; do
  out=$(FAKE_NCCL_VERSION=$v NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/lays-$v.%p.log" fake_run "$L" layout-segments --timeout 20 2>/dev/null); rc=$?
  [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*win0=set .*win1=set .*sum=ok')" = 2 ] \
    && ! lhas lays-$v 'decision=(degrade|error)' && { [ $v = 23007 ] || ! lhas lays-$v 'fn=layout'; } \
    && pass "layout-segments-$v-registered" || fail "layout-segments-$v-registered" "$(why lays-$v)"
done
# *win never read where NCCL did not write it: 2.28 without symmetric support and NCCL_LOCAL_REGISTER=0 returns
# success and leaves *win as it was (the fake: nccl_reg.c, skip 3; NCCL source at v2.28.9-1, src/dev_runtime.cc
# ncclCommWindowRegister); a caller whose *win holds garbage gets it back alone, NULL under ncclguard (its
# garbage neither logged, nor recorded as a window, nor given to ncclCommWindowDeregister)
gw="FAKE_NCCL_VERSION=22809 NCCL_LOCAL_REGISTER=0 FAKE_NCCL_NO_SYMMETRIC=1"
out=$(export $gw; bare_run "$L" win-garbage --timeout 20 2>/dev/null); rc=$?
[ "$(echo "$out" | grep -c 'RESULT ok .*reg=ncclSuccess win=garbage')" = 2 ] && pass win-untouched-2.28-no-symmetric-without \
  || fail win-untouched-2.28-no-symmetric-without "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
out=$(export $gw; FAKE_NCCL_TRACE=1 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/wg.%p.log" fake_run "$L" win-garbage --timeout 20 2>&1); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*reg=ncclSuccess win=null')" = 2 ] \
  && ! lhas wg 'win=0x5a5a5a5a5a5a5a50' && ! echo "$out" | grep -q 'Deregister(.*0x5a5a5a5a5a5a5a50' \
  && pass win-untouched-never-read-caller-garbage || fail win-untouched-never-read-caller-garbage "$(why wg)"
# a communicator ncclguard stopped (the early rank: revoked at NCCLGUARD_TIMEOUT) or whose first round it left
# inside NCCL (the late rank: stuck): ncclDevCommCreate is answered as a window registration there is (not
# passed to NCCL), and ncclCommRegister is not a second call at once on the stuck one
out=$(FAKE_NCCL_VERSION=22809 NCCLGUARD_TIMEOUT=2 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/aft.%p.log" fake_run "$L" late --late 4 \
      --timeout 25 --after-fail 1 2>/dev/null); rc=$?
[ "$(echo "$out" | grep -c 'AFTER rank=[01] breg=ncclInvalidUsage devcomm=ncclInvalid')" = 2 ] \
  && [ "$(logs aft | grep -c 'fn=ncclDevCommCreate .*decision=error reason=comm_broken')" = 2 ] \
  && lhas aft 'fn=ncclCommRegister .*decision=error reason=comm_broken msg="a call ncclguard made on this communicator is still blocked' \
  && ! lhas aft 'fn=ncclDevCommCreate .*decision=pass' \
  && pass devcomm-and-buffer-registration-refused-on-stopped-comm || fail devcomm-and-buffer-registration-refused-on-stopped-comm "$(why aft)"
# flags (symmetric on some ranks only): refused on every rank, on every version
for v in 22703 22809 23007; do
  out=$(FAKE_NCCL_VERSION=$v NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/layf-$v.%p.log" fake_run "$L" layout-flags --timeout 20 2>/dev/null); rc=$?
  [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*win0=null .*win1=set .*sum=ok')" = 2 ] \
    && [ "$(logs layf-$v | grep -c 'seq=0 .*decision=degrade reason=layout_mismatch')" = 2 ] \
    && [ "$(logs layf-$v | grep -c 'different flags at step 0')" = 2 ] \
    && pass "layout-flags-mismatch-$v-refused-every-rank" || fail "layout-flags-mismatch-$v-refused-every-rank" "$(why layf-$v)"
done
# flags of INT_MIN on the last rank (a vote's (x, -x) pair would negate it: undefined, and in practice -INT_MIN
# wraps to INT_MIN, so the ranks would seem to agree): refused on every rank like any other difference
out=$(FAKE_NCCL_VERSION=22809 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/laym.%p.log" fake_run "$L" layout-flags --flags0 -2147483648 \
      --timeout 20 2>&1); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*win0=null .*win1=set .*sum=ok')" = 2 ] \
  && [ "$(logs laym | grep -c 'seq=0 .*decision=degrade reason=layout_mismatch')" = 2 ] \
  && [ "$(logs laym | grep -c 'different flags at step 0 (from -2147483648 to 1')" = 2 ] \
  && pass layout-flags-int-min-refused-every-rank || fail layout-flags-int-min-refused-every-rank "$(why laym)"
# NCCLGUARD_ON_FAILURE=error: the same refusal as an error on every rank
out=$(FAKE_NCCL_VERSION=22809 NCCLGUARD_ON_FAILURE=error NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/laye.%p.log" fake_run "$L" layout-sizes --timeout 20 2>/dev/null); rc=$?
[ "$(echo "$out" | grep -c 'RESULT fail .*reg0=ncclInvalidArgument win0=null .*win1=set .*sum=ok')" = 2 ] \
  && [ "$(logs laye | grep -c 'seq=0 .*decision=error reason=layout_mismatch')" = 2 ] \
  && pass layout-mismatch-on-failure-error || fail layout-mismatch-on-failure-error "$(why laye)"

# --- window handles kept apart: a window given to ncclCommDeregister (pytorch#181610) and a buffer
# registration's handle to ncclCommWindowDeregister: ncclInvalidArgument, nothing deregistered, one line
# naming the right function; each handle then deregisters with its own function
out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/hswap.%p.log" fake_run "$PROGS/faults" handle-swap --timeout 20 2>/dev/null); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*win_to_dereg=ncclInvalidArgument handle_to_windereg=ncclInvalidArgument windereg=ncclSuccess dereg=ncclSuccess')" = 2 ] \
  && [ "$(logs hswap | grep -c 'fn=ncclCommDeregister .*decision=error reason=wrong_handle msg=".* is a window .*Fix: deregister it with ncclCommWindowDeregister')" = 2 ] \
  && [ "$(logs hswap | grep -c 'fn=ncclCommWindowDeregister .*decision=error reason=wrong_handle msg=".*Fix: deregister it with ncclCommDeregister')" = 2 ] \
  && pass window-handle-deregister || fail window-handle-deregister "$(why hswap)"

# --- symmetric support on some ranks only (rank 1 without it: FAKE_NCCL_NO_SYMMETRIC there). NCCL 2.29+
# answers that rank at once with success and a NULL window, before any exchange, while rank 0 waits for it in
# the registration's exchange: a hang (NCCL's source at v2.29.7-1/v2.30.7-1, dev_runtime.cc). With ncclguard
# the vote sees both answers and every rank takes a NULL window before NCCL; the all-reduce runs unregistered.
for v in 22907 23007; do
  FAKE_NCCL_VERSION=$v NGTEST_ENV_RANK1=FAKE_NCCL_NO_SYMMETRIC=1 b nullmix-bare-$v --timeout 6
  [ $rc != 0 ] && echo "$out" | grep -q 'hang in ncclCommWindowRegister' && pass "null-window-mixed-$v-hangs-without" \
    || fail "null-window-mixed-$v-hangs-without" "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
  FAKE_NCCL_VERSION=$v NGTEST_ENV_RANK1=FAKE_NCCL_NO_SYMMETRIC=1 g nullmix-$v --expect-win null --timeout 20
  [ $rc = 0 ] && [ "$(nok)" = 2 ] && lhas nullmix-$v 'rank=0 .*decision=degrade reason=peer_null_window' \
    && lhas nullmix-$v 'rank=1 .*decision=degrade reason=null_window' \
    && [ "$(logs nullmix-$v | grep -c 'fn=symmetric msg=".*symmetric support on some ranks of this communicator only')" = 2 ] \
    && pass "null-window-mixed (NCCL $v: NULL on every rank)" || fail "null-window-mixed (NCCL $v: NULL on every rank)" "$(why nullmix-$v)"
done

# --- registered memory accounted: each registration and deregistration line carries its communicator's live
# windows and bytes; NCCLGUARD_WINDOW_BUDGET writes one WARN per crossing; the summary has the bytes at exit
# and the peak (8 windows of 64 KiB in one group, budget 200000 bytes: crossed at the 4th)
out=$(FAKE_NCCL_VERSION=22809 NCCLGUARD_WINDOW_BUDGET=200000 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/budget.%p.log" \
  fake_run "$PROGS/faults" many --windows 8 --timeout 20 2>/dev/null); rc=$?
[ $rc = 0 ] && [ "$(logs budget | grep -c 'WARN fn=budget msg=".* 4 live windows register 262144 bytes, past NCCLGUARD_WINDOW_BUDGET=200000')" = 2 ] \
  && [ "$(logs budget | grep -c 'fn=budget')" = 2 ] \
  && [ "$(logs budget | grep -c 'seq=7 .*decision=register reason=ok comm_windows=8 comm_bytes=524288')" = 2 ] \
  && [ "$(logs budget | grep -c 'fn=ncclCommWindowDeregister .*comm_windows=0 comm_bytes=0')" = 2 ] \
  && pass window-budget || fail window-budget "$(why budget) $(logs budget | grep -c fn=budget)"
g acct --expect-win nonnull
[ $rc = 0 ] && [ "$(logs acct | grep -c 'fn=summary .*windows_live=0 window_bytes=0 window_bytes_peak=2097152')" = 2 ] \
  && pass window-bytes-in-summary || fail window-bytes-in-summary "$(why acct) $(logs acct | grep summary | head -1)"

# --- a failed ncclMemAlloc (docs/NCCL.md §2, "What a failed ncclMemAlloc leaves behind"): NCCL 2.28 with cuMem
# off falls back to cudaMalloc, whose failure stays in the thread's CUDA runtime error (the fake's runtime is the
# program's, as a libnccl built against the shared runtime); one WARN names size, result and that error; it is
# cleared where nothing was pending before (NCCLGUARD_MEMALLOC_CLEAR, default 1), kept otherwise
MA=$PROGS/memalloc
ma() { # ma NAME ENV... : the program with ncclguard (log file $T/NAME.*.log), $out and $rc
  n=$1; shift
  out=$(export NCCL_CUMEM_ENABLE=0 FAKE_CUDA_OOM_BELOW=99999999 "$@" NCCLGUARD_LOG_FILE="$T/$n.%p.log"
    fake_run "$MA" 4194304 ${MA_ARGS:-} 2>"$T/$n.err"); rc=$?
}
out=$(NCCL_CUMEM_ENABLE=0 FAKE_CUDA_OOM_BELOW=99999999 bare_run "$MA" 4194304 2>/dev/null); rc=$?
[ $rc = 0 ] && [ "$out" = "memalloc result=1 ptr=null lasterr=cudaErrorMemoryAllocation" ] \
  && pass memalloc-fail-leaves-cuda-error-without || fail memalloc-fail-leaves-cuda-error-without "rc=$rc $out"
warn_re='WARN fn=ncclMemAlloc buff=0x0 size=4194304 result=ncclUnhandledCudaError .*decision=pass reason=nccl_error'
ma macl
[ $rc = 0 ] && [ "$out" = "memalloc result=1 ptr=null lasterr=cudaSuccess" ] && [ "$(logs macl | grep -c 'fn=ncclMemAlloc')" = 1 ] \
  && lhas macl "$warn_re cuda_error=cleared:cudaErrorMemoryAllocation msg=\"ncclMemAlloc of 4194304 bytes failed \(ncclUnhandledCudaError\); .*ncclguard cleared it" \
  && pass memalloc-fail-warn-and-cleared || fail memalloc-fail-warn-and-cleared "rc=$rc $out | $(logs macl | head -2)"
ma maleft NCCLGUARD_MEMALLOC_CLEAR=0
[ $rc = 0 ] && [ "$out" = "memalloc result=1 ptr=null lasterr=cudaErrorMemoryAllocation" ] \
  && lhas maleft "$warn_re cuda_error=left:cudaErrorMemoryAllocation .*Fix: clear it with cudaGetLastError\(\) before falling back to a plain buffer" \
  && pass memalloc-fail-left-when-clear-off || fail memalloc-fail-left-when-clear-off "rc=$rc $out | $(logs maleft | head -2)"
MA_ARGS=--pending ma makept
[ $rc = 0 ] && [ "$out" = "memalloc result=1 ptr=null lasterr=cudaErrorMemoryAllocation" ] \
  && lhas makept "$warn_re cuda_error=kept:cudaErrorMemoryAllocation .*already pending" \
  && pass memalloc-fail-pending-error-kept || fail memalloc-fail-pending-error-kept "rc=$rc $out | $(logs makept | head -2)"
ma ma29 FAKE_NCCL_VERSION=22903
[ $rc = 0 ] && [ "$out" = "memalloc result=1 ptr=null lasterr=cudaSuccess" ] \
  && lhas ma29 "$warn_re cuda_error=none " && pass memalloc-fail-2.29-nothing-left || fail memalloc-fail-2.29-nothing-left "rc=$rc $out | $(logs ma29 | head -2)"
# a tracer preloaded after ncclguard that defines some NCCL functions (pncclGetVersion) to forward them, not
# ncclMemAlloc: the allocation (no communicator in it) still reaches libnccl, as it does without ncclguard
out=$(LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$PROGS/libtracer.so" "$MA" 4194304 2>/dev/null); rc0=$?
out1=$(LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM:$PROGS/libtracer.so" NCCLGUARD_LOG=info \
  NCCLGUARD_LOG_FILE="$T/matr.%p.log" "$MA" 4194304 2>"$T/matr.err"); rc=$?
[ $rc0 = 0 ] && [ $rc = 0 ] && [ "$out" = "memalloc result=0 ptr=set lasterr=cudaSuccess" ] && [ "$out1" = "$out" ] \
  && pass memalloc-tracer-after-ncclguard \
  || fail memalloc-tracer-after-ncclguard "rc=$rc0/$rc '$out' '$out1' $(logs matr | grep -E 'WARN' | head -2)"
# the same tracer before or after ncclguard, in a job: the job runs as without ncclguard (registration, all-reduce)
# and the tracer sees the application's calls it sees without it (it defines ncclCommInitRank and
# ncclCommWindowRegister under their public names only, as most tracers do); after ncclguard, the functions the
# tracer does not define come from libnccl, which is NCCL for the log
for order in after before; do
  pre="${NG_PRELOAD_PREFIX:-}$SHIM:$PROGS/libtracer.so"
  [ $order = before ] && pre="${NG_PRELOAD_PREFIX:-}$PROGS/libtracer.so:$SHIM"
  out=$(LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$pre" NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/trc$order.%p.log" \
        timeout -k 2 60 "$NG" -n 2 -m proc 2>&1); rc=$?
  if [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok reg=ncclSuccess win=0x')" = 2 ] \
     && [ "$(echo "$out" | grep -c '^tracer: 1 ncclCommInitRank calls, 1 ncclCommWindowRegister calls$')" = 2 ] \
     && lhas trc$order 'real NCCL functions come from [^ ;]*/libnccl\.so\.2' && ! lhas trc$order 'cannot find the real'; then
    pass "tracer-$order-ncclguard-job-runs"
  else fail "tracer-$order-ncclguard-job-runs" "rc=$rc $(echo "$out" | grep -E 'RESULT|tracer' | head -3 | tr '\n' '|') $(logs trc$order | grep -E 'resolve|WARN' | head -2 | cut -c1-200)"; fi
done
# success: forwarded, one INFO line, nothing else (no WARN, the runtime untouched)
for cm in 1 0; do
  out=$(NCCL_CUMEM_ENABLE=$cm NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/maok$cm.%p.log" fake_run "$MA" 4194304 2>"$T/maok$cm.err"); rc=$?
  [ $rc = 0 ] && [ "$out" = "memalloc result=0 ptr=set lasterr=cudaSuccess" ] \
    && lhas maok$cm 'INFO fn=ncclMemAlloc buff=0x[0-9a-f]+ size=4194304 result=ncclSuccess .*decision=pass reason=ok$' \
    && ! lhas maok$cm 'WARN|cuda_error' && pass memalloc-success-unchanged-cumem$cm || fail memalloc-success-unchanged-cumem$cm "rc=$rc $out | $(logs maok$cm | head -2)"
done
