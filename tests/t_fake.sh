#!/bin/sh
# Self-test of the fake CUDA driver/runtime and fake NCCL (tests/fake/), WITHOUT ncclguard.
. "$NG_ROOT/tests/lib.sh"
ST="$FAKE/selftest"

# st NAME EXPECTED_RC [ENV=VAL ...] -- ARGS...: run the selftest, compare the exit status
st() {
  n=$1; want=$2; shift 2
  envs=""
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  # shellcheck disable=SC2086
  env $envs sh -c '. "$NG_ROOT/tests/lib.sh"; bare_run "$@"' x "$ST" "$@" >"$T/$n.log" 2>&1
  rc=$?
  if [ "$rc" -eq "$want" ] || { [ "$want" -ge 128 ] && crashed "$rc"; }; then pass "$n"; else fail "$n" "exit $rc, want $want: $(tail -n 3 "$T/$n.log" | tr '\n' ' ')"; fi
}

st fake_threads_2 0 -- threads 2
st fake_threads_4 0 -- threads 4
st fake_fork_2 0 -- fork 2
st fake_fork_3 0 -- fork 3
st fake_group_one_thread_2 0 -- group 2
# one thread, a global capture, relaxed mode: one registration job keeps the caller's mode; several run in
# threads of their own with CUDA's default mode on 2.28-2.30.6 (group.cc asyncJobLaunch), 2.30.7 relaxes
# inside the job (README "Modelled behaviour", capture)
st fake_capture_relaxed_one_job_2_28 0 FAKE_NCCL_VERSION=22809 -- capturejobs 1
st fake_capture_relaxed_two_jobs_2_28 3 FAKE_NCCL_VERSION=22809 -- capturejobs 2
st fake_capture_relaxed_two_jobs_2_29 3 FAKE_NCCL_VERSION=22903 -- capturejobs 2
st fake_capture_relaxed_two_jobs_2_30_7 0 FAKE_NCCL_VERSION=23007 -- capturejobs 2
st fake_group_one_thread_4 0 -- group 4
st fake_nonblocking_init 0 FAKE_NCCL_INIT_DELAY_MS=200 -- nonblocking
# 2.29+: registration while the init runs is success with a NULL window (README "Modelled behaviour")
st fake_nonblocking_init_null_window_2_29 0 FAKE_NCCL_INIT_DELAY_MS=200 FAKE_NCCL_VERSION=22903 -- nonblocking
st fake_nonblocking_init_null_window_2_30 0 FAKE_NCCL_INIT_DELAY_MS=200 FAKE_NCCL_VERSION=23007 -- nonblocking
st fake_asym_cudamalloc_hangs 124 NG_TIMEOUT=3 -- asym
st fake_both_cudamalloc_then_internal_error 0 -- bothmalloc
# a call-time error inside a group: group end returns it and drops the whole group (README)
st fake_group_call_error_drops_group 0 -- group_drop 2
st fake_group_call_error_drops_simulated_group 0 -- group_drop 1
st fake_null_comm_segv_2_28 139 -- nullcomm
st fake_null_comm_invalid_2_29 0 FAKE_NCCL_VERSION=22903 -- nullcomm
st fake_capture_invalidated_2_28 0 -- capture 1
st fake_capture_ok_2_30 0 FAKE_NCCL_VERSION=23007 -- capture 0
st fake_destroy_and_late_deregister 0 -- destroy
st fake_misaligned_and_host_buffer 0 -- misaligned
# revoke, then registration: registers (collectives alone check the revoke flag; README)
st fake_revoke_then_register_1 0 -- revoke_reg 1
st fake_revoke_then_register_2 0 -- revoke_reg 2
st fake_revoke_then_register_2_30 0 FAKE_NCCL_VERSION=23007 -- revoke_reg 2
# a host buffer, a range into unmapped memory, across two allocations, with a hole (README "Modelled
# behaviour"): 2.28 looks up the first byte only, 2.29 walks to a second allocation and refuses it,
# 2.30 walks every segment; a failed lookup is "Cuda failure 500" (ncclUnhandledCudaError = 1)
st fake_ranges_2_28 0 -- ranges 1,0,0,0
st fake_ranges_2_29 0 FAKE_NCCL_VERSION=22903 -- ranges 1,1,4,1
st fake_ranges_2_30 0 FAKE_NCCL_VERSION=23007 -- ranges 1,1,0,1
# `buff + size` wraps (README "Modelled behaviour"): 2.27 and 2.28 register on every rank (NCCL maps the
# allocation, not the window's size; 2.28.9 measured, issue 23); a hang (a rank failing alone) is 124.
# 2.29+ find no allocation (the walk never starts): a buffer off 4096 from address 0 is invalid argument
# (4); else 2.29 the CUDA error of retaining address 0 (1), 2.30.7 an assertion (abort)
st fake_wrap_registers_2_28 0 NG_TIMEOUT=20 -- wrap 2
st fake_wrap_registers_2_27 0 NG_TIMEOUT=20 FAKE_NCCL_VERSION=22703 -- wrap 2
st fake_wrap_one_rank_2_28 0 -- wrap1 0 0
st fake_wrap_2_29_no_allocation 0 FAKE_NCCL_VERSION=22903 -- wrap1 0 1
st fake_wrap_2_29_misaligned 0 FAKE_NCCL_VERSION=22903 -- wrap1 512 4
st fake_wrap_2_30_assertion 134 FAKE_NCCL_VERSION=23007 -- wrap1 0 0
st fake_wrap_2_30_misaligned 0 FAKE_NCCL_VERSION=23007 -- wrap1 512 4
n=fake_wrap_2_30_assertion_message
has "$T/fake_wrap_2_30_assertion.log" "Assertion .numSegments == 1. failed" && pass $n || fail $n "$(cat "$T/fake_wrap_2_30_assertion.log")"
# 2.27 inside a group: the checks and *win in the call, the exchange at group end (register.cc, group.cc
# at v2.27.7-1): one thread driving both ranks registers on both (a deadlock is 124)
st fake_group_one_thread_2_27 0 NG_TIMEOUT=20 FAKE_NCCL_VERSION=22703 -- group 2
# NULL win on 2.28: rank 0 takes part in the exchange (no peer waits), the window is made and never
# written, and keeps its allocation's place in the symmetric space until the communicator goes
st fake_null_win_2_28_registers_1 0 NG_TIMEOUT=20 NCCL_WIN_STRIDE=0x100000000 -- nullwin 1
st fake_null_win_2_28_registers_2 0 NG_TIMEOUT=20 NCCL_WIN_STRIDE=0x100000000 -- nullwin 2
# ... and writes through it (SIGSEGV at group end) on a failure in the group-end job or without symmetric
# support; NCCL_LOCAL_REGISTER=0 without symmetric support returns before: success
st fake_null_win_2_28_misaligned_segv 139 -- nullwin1 512
st fake_null_win_2_28_no_symmetric_segv 139 FAKE_NCCL_NO_SYMMETRIC=1 -- nullwin1 0
st fake_null_win_2_28_no_symmetric_local_register_0 0 FAKE_NCCL_NO_SYMMETRIC=1 NCCL_LOCAL_REGISTER=0 -- nullwin1 0
st fake_null_win_2_28_ok_one_rank 0 -- nullwin1 0
st fake_no_symmetric_2_29_null_window 0 FAKE_NCCL_NO_SYMMETRIC=1 FAKE_NCCL_VERSION=22903 -- nosym 1
st fake_no_symmetric_2_28_local_handle 0 FAKE_NCCL_NO_SYMMETRIC=1 -- nosym 0

# symmetric address space (README "Modelled behaviour"; NVIDIA/nccl#2331): 12 registrations of one
# 1 GiB allocation (whole, or its halves alternately) in a space of NCCL_WIN_STRIDE=4 GiB; 2.28 and 2.29
# reuse the allocation (12 windows), 2.30.7 takes 1 GiB per window (4, then ncclInternalError "No
# suitable space ..."; one deregistered lets one more fit). Threads (space) and processes (space_fork).
sp4="40000000 within limit=0x100000000"
for v in 22809 22903; do
  st fake_space_reuse_${v}_1rank 0 FAKE_NCCL_VERSION=$v NCCL_WIN_STRIDE=0x100000000 -- space 1 0 12 1024 "$sp4"
  st fake_space_reuse_${v}_halves_2ranks 0 FAKE_NCCL_VERSION=$v NCCL_WIN_STRIDE=0x100000000 -- space 2 1 12 1024 "$sp4"
done
st fake_space_full_23007_1rank 0 FAKE_NCCL_VERSION=23007 NCCL_WIN_STRIDE=0x100000000 -- space 1 0 4 1024 "$sp4"
st fake_space_full_23007_2ranks 0 FAKE_NCCL_VERSION=23007 NCCL_WIN_STRIDE=0x100000000 -- space 2 0 4 1024 "$sp4"
st fake_space_full_23007_halves_1rank 0 FAKE_NCCL_VERSION=23007 NCCL_WIN_STRIDE=0x100000000 -- space 1 1 4 1024 "$sp4"
st fake_space_full_23007_halves_2procs 0 FAKE_NCCL_VERSION=23007 NCCL_WIN_STRIDE=0x100000000 -- space_fork 2 1 4 1024 "$sp4"
# NCCL rounds NCCL_WIN_STRIDE up to 4 GiB (ncclDevrInitOnce): 8 MiB gives the same 4 GiB space
st fake_space_stride_rounded_up_23007 0 FAKE_NCCL_VERSION=23007 NCCL_WIN_STRIDE=0x800000 -- space 2 0 4 1024 "$sp4"
# the measurements on 1 x H200 (default space: the device's 139.8 GiB rounded up to 140 GiB)
st fake_space_h200_24g_5_of_12_23007 0 FAKE_NCCL_VERSION=23007 -- space 1 0 5 24576 "600000000 within limit=0x2300000000"
st fake_space_h200_48g_halves_2_of_12_23007 0 FAKE_NCCL_VERSION=23007 -- space 1 1 2 49152 "c00000000 within limit=0x2300000000"
st fake_space_h200_48g_halves_12_of_12_22903 0 FAKE_NCCL_VERSION=22903 -- space 1 1 12 49152 x

# the asymmetric case: rank 0 got ncclUnhandledCudaError, rank 1 never returned
n=fake_asym_rank0_error_rank1_stuck
if has "$T/fake_asym_cudamalloc_hangs.log" '^rank 0 register -> 1 ' && ! has "$T/fake_asym_cudamalloc_hangs.log" '^rank 1 register'; then
  pass $n; else fail $n "$(cat "$T/fake_asym_cudamalloc_hangs.log")"; fi

# NCCL's own ncclCommWindowDeregister/ncclCommDeregister calls inside ncclCommDestroy go through the PLT
n=fake_destroy_deregisters_through_plt_trace
FAKE_NCCL_TRACE=1 bare_run "$ST" destroy >"$T/trace.log" 2>&1
if [ "$(grep -c 'ncclCommWindowDeregister(.*) -> ncclSuccess internal' "$T/trace.log")" -eq 2 ] &&
   has "$T/trace.log" 'ncclCommDeregister\(.*\) -> ncclSuccess internal'; then pass $n; else fail $n "$(cat "$T/trace.log")"; fi

n=fake_destroy_deregisters_through_plt_preload
LD_PRELOAD="$FAKE/plt_spy.so" bare_run "$ST" destroy >"$T/spy.log" 2>&1
# 1 explicit NULL + 2 from inside destroy + 1 late = 4 window deregistrations, 1 buffer
if [ "$(grep -c '^plt_spy: ncclCommWindowDeregister' "$T/spy.log")" -eq 4 ] &&
   [ "$(grep -c '^plt_spy: ncclCommDeregister' "$T/spy.log")" -eq 1 ] && has "$T/spy.log" '^PASS'; then
  pass $n; else fail $n "$(cat "$T/spy.log")"; fi

# both symbols of every function; the legacy build lacks the newer ones
n=fake_symbols
nmd() { nm -D --defined-only "$1" 2>/dev/null | awk '{print $2" "$3}'; }
ok=1
for f in ncclCommWindowRegister ncclCommWindowDeregister ncclCommInitRankConfig ncclCommGrow ncclCommRevoke ncclDevCommCreate; do
  nmd "$FAKE/libnccl.so.2" | grep -q "^W $f\$" || { ok=0; echo "missing weak $f"; }
  nmd "$FAKE/libnccl.so.2" | grep -q "^T p$f\$" || { ok=0; echo "missing strong p$f"; }
done >"$T/sym.log"
for f in ncclCommGrow ncclCommRevoke ncclDevCommCreate ncclDevCommDestroy; do
  nmd "$B/fake-legacy/libnccl.so.2" | grep -q " p*$f\$" && { ok=0; echo "legacy has $f"; }
done >>"$T/sym.log"
for f in cuMemAlloc_v2 cuMemFree_v2 cuMemGetAddressRange_v2 cuStreamDestroy_v2 cuCtxCreate_v4 cuMemcpyHtoD_v2 cuMemRetainAllocationHandle; do
  nmd "$FAKE/libcuda.so.1" | grep -q "^T $f\$" || { ok=0; echo "libcuda lacks $f"; }
done >>"$T/sym.log"
[ $ok = 1 ] && pass $n || fail $n "$(cat "$T/sym.log")"

# the fake of each release (README.md "One release's fake"): exactly the fake's names less those the release
# lacks by tests/fake/releases.txt (both symbols of each, and none of a name it lacks), its version code its own
# whatever FAKE_NCCL_VERSION says, and the versioned copy the same names under NCCL_FAKE
n=fake_release_exports
ok=1
nmd "$FAKE/libnccl.so.2" | awk '{print $2}' | sort >"$T/rel.all"
printf '#include <stdio.h>\nint ncclGetVersion(int*);\nint main(void){int v=0;ncclGetVersion(&v);printf("%%d",v);return 0;}\n' >"$T/ver.c"
for d in "$B"/fake-rel/[0-9]*; do
  code=$(basename "$d")
  awk -v v="$code" '!/^#/ && NF >= 2 && $2 + 0 > v + 0 {print $1; print "p" $1}' "$NG_ROOT/tests/fake/releases.txt" | sort >"$T/rel.lacks"
  comm -23 "$T/rel.all" "$T/rel.lacks" >"$T/rel.want"
  nmd "$d/libnccl.so.2" | awk '{print $2}' | sort >"$T/rel.got"
  nm -D --defined-only "$d/libnccl-versioned.so.2" | awk '$3 ~ /@@NCCL_FAKE$/ {sub(/@@NCCL_FAKE$/, "", $3); print $3}' | sort >"$T/rel.gotv"
  cmp -s "$T/rel.got" "$T/rel.want" || { ok=0; echo "$code exports: $(comm -3 "$T/rel.got" "$T/rel.want" | tr '\n' ' ')"; }
  cmp -s "$T/rel.gotv" "$T/rel.want" || { ok=0; echo "$code versioned exports differ"; }
  # (the compiler's and linker's words go to a log, not into v: a sanitizer build's fake makes the linker warn)
  v=$(${CC:-cc} "$T/ver.c" -o "$T/ver" -L"$d" -l:libnccl.so.2 -Wl,-rpath-link,"$FAKE" >"$T/ver.cc.log" 2>&1 \
      && FAKE_NCCL_VERSION=22703 LD_LIBRARY_PATH="$d:$FAKE" "$T/ver" || cat "$T/ver.cc.log")
  [ "$v" = "$code" ] || { ok=0; echo "$code: ncclGetVersion says $v"; }
done >"$T/rel.log"
nrel=$(ls -d "$B"/fake-rel/[0-9]* | wc -l)
[ $ok = 1 ] && [ "$nrel" -ge 8 ] && pass "$n ($nrel releases)" || fail $n "$(head -5 "$T/rel.log")"

# ---- the collective-matching checker (README.md "Collective matching"); these commands point
# FAKE_NCCL_MISMATCH_FILE at files of their own (the runner's stays empty) ----
# mm NAME [ENV=VAL ...] -- ARGS...: run the selftest with its own mismatch file $T/NAME.mm
mm() {
  n=$1; shift
  envs=""
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  : >"$T/$n.mm"
  # shellcheck disable=SC2086
  env $envs FAKE_NCCL_MISMATCH_FILE="$T/$n.mm" sh -c '. "$NG_ROOT/tests/lib.sh"; bare_run "$@"' x "$ST" "$@" >"$T/$n.log" 2>&1
}
# mm_one NAME PATTERN: the run passed and recorded exactly one line, matching PATTERN, also on stderr
mm_one() {
  if has "$T/$1.log" "^PASS" && [ "$(wc -l <"$T/$1.mm")" -eq 1 ] && has "$T/$1.mm" "$2" &&
     has "$T/$1.log" "^fake-nccl MISMATCH"; then pass "$1"; else fail "$1" "$(cat "$T/$1.log" "$T/$1.mm" | tr '\n' ' ')"; fi
}
mm_none() {
  if has "$T/$1.log" "^PASS" && [ ! -s "$T/$1.mm" ]; then pass "$1"; else fail "$1" "$(cat "$T/$1.log" "$T/$1.mm" | tr '\n' ' ')"; fi
}
line='^fake-nccl MISMATCH comm=fakenccl-[^ ]+ k=0 rank 0: allreduce count=1 type=int32 op=max caller=app vs rank 1: allreduce count=2 type=int32 op=max caller=app$'
mm checker_count_threads -- mismatch 2; mm_one checker_count_threads "$line"
mm checker_count_processes -- mismatch_fork 2; mm_one checker_count_processes "$line"
mm checker_matched_threads -- mismatch 1; mm_none checker_matched_threads
mm checker_matched_processes -- mismatch_fork 1; mm_none checker_matched_processes
mm checker_matched_selftest_threads -- threads 4; mm_none checker_matched_selftest_threads
mm checker_matched_selftest_group -- group 4; mm_none checker_matched_selftest_group
mm checker_matched_selftest_fork -- fork 3; mm_none checker_matched_selftest_fork
# caller attribution: rank 0 through libncclguard_probe.so (preloaded) is "guard", rank 1 calling
# pncclAllReduce (the strong symbol behind the weak ncclAllReduce) is "app"
mm checker_caller_guard LD_PRELOAD="$FAKE/libncclguard_probe.so" -- caller 1
mm_one checker_caller_guard 'k=0 rank 0: allreduce count=1 type=int32 op=max caller=guard vs rank 1: allreduce count=1 type=int32 op=max caller=app$'
mm checker_caller_app -- caller 1; mm_none checker_caller_app

# the runner's per-script logic (tests/runlib.sh): exit status and mismatch file
. "$NG_ROOT/tests/runlib.sh"
n=runner_script_status_and_mismatch
mkdir -p "$T/rs"
printf 'echo "ok inner"\nexit 3\n' >"$T/rs/exits.sh"
printf '. "$NG_ROOT/tests/lib.sh"\npass before\necho "fake-nccl MISMATCH comm=x k=7 first" >>"$FAKE_NCCL_MISMATCH_FILE"\necho second >>"$FAKE_NCCL_MISMATCH_FILE"\nfail inner why\npass after\n' >"$T/rs/mm.sh"
printf 'echo "ok inner"\necho "# skip inner: why"\n' >"$T/rs/clean.sh"
(run_script v "$T/rs/exits.sh"; echo "rc=$?") >"$T/rs/exits.out" 2>&1
(run_script v "$T/rs/mm.sh"; echo "rc=$?") >"$T/rs/mm.out" 2>&1
(run_script v "$T/rs/clean.sh"; echo "rc=$?") >"$T/rs/clean.out" 2>&1
if has "$T/rs/exits.out" '^ok \[v\] inner$' && has "$T/rs/exits.out" '^FAIL \[v\] exits.sh: exited with status 3$' &&
   has "$T/rs/exits.out" '^rc=1$' &&
   has "$T/rs/mm.out" '^FAIL \[v\] mm.sh: collective mismatch: fake-nccl MISMATCH comm=x k=7 first$' &&
   ! has "$T/rs/mm.out" 'second|exited|case before|case after' && has "$T/rs/mm.out" '^rc=1$' && has "$T/rs/mm.out" '^FAIL \[v\] inner: why$' &&
   has "$T/rs/mm.out" '^# mismatch \[v\] mm.sh case inner: fake-nccl MISMATCH comm=x k=7 first$' &&
   has "$T/rs/clean.out" '^# skip \[v\] inner: why$' && ! has "$T/rs/clean.out" '^FAIL' && has "$T/rs/clean.out" '^rc=0$'; then
  pass $n; else fail $n "$(cat "$T/rs/exits.out" "$T/rs/mm.out" "$T/rs/clean.out" | tr '\n' ' ')"; fi

# ---- ranks as hosts of their own (README "Modelled behaviour": NCCL_HOSTID; tests/gpu/README.md "ranks as hosts") ----
# hosts PROG-ARGS...: ngtest with rank 0 and rank 1 on hosts "ha" and "hb" (NCCL_HOSTID per rank), one fake GPU
two_hosts() {
  env NGTEST_ENV_RANK0=NCCL_HOSTID=ha NGTEST_ENV_RANK1=NCCL_HOSTID=hb FAKE_CUDA_DEVICES=1 NGTEST_TIMEOUT=4 \
    sh -c '. "$NG_ROOT/tests/lib.sh"; bare_run "$@"' x "$PROGS/ngtest" -n 2 -m proc "$@"
}
# 2.29+: no symmetric support across nodes (no GIN): success with a NULL window on both ranks, no exchange
# (rank 0's cudaMalloc buffer does not hang its peer there); one host: symmetric windows (and that hang)
FAKE_NCCL_VERSION=22903 two_hosts --expect-win null >"$T/h29.out" 2>&1; rc=$?
FAKE_NCCL_VERSION=23007 two_hosts --alloc cuda0 --expect-win null >"$T/h30.out" 2>&1; rc2=$?
FAKE_NCCL_VERSION=22903 FAKE_CUDA_DEVICES=1 NGTEST_TIMEOUT=4 bare_run "$PROGS/ngtest" -n 2 -m proc --expect-win nonnull >"$T/h1.out" 2>&1; rc3=$?
if [ $rc = 0 ] && [ "$(grep -c 'RESULT ok.* win=null' "$T/h29.out")" = 2 ] && [ $rc2 = 0 ] && [ "$(grep -c 'RESULT ok' "$T/h30.out")" = 2 ] \
   && [ $rc3 = 0 ]; then pass fake_two_hosts_null_window_2_29_plus
else fail fake_two_hosts_null_window_2_29_plus "rc=$rc/$rc2/$rc3 $(grep RESULT "$T/h29.out" "$T/h30.out" "$T/h1.out" | tr '\n' ' ')"; fi
# 2.28 keeps symmetric support across nodes (it checks the local ranks' P2P only): windows; a device communicator
# there turns GIN on and fails: WARN "GIN not supported." and ncclInvalidUsage (one host: it works)
FAKE_NCCL_VERSION=22809 two_hosts --expect-win nonnull >"$T/h28.out" 2>&1; rc=$?
FAKE_NCCL_VERSION=22809 two_hosts --devcomm --no-allreduce >"$T/h28d.out" 2>&1; rc2=$?
FAKE_NCCL_VERSION=22809 FAKE_CUDA_DEVICES=1 NGTEST_TIMEOUT=4 bare_run "$PROGS/ngtest" -n 2 -m proc --devcomm >"$T/h28d1.out" 2>&1; rc3=$?
if [ $rc = 0 ] && [ $rc2 != 0 ] && [ "$(grep -c 'WARN GIN not supported\.$' "$T/h28d.out")" = 2 ] \
   && [ "$(grep -c 'ncclDevCommCreate.*ncclInvalidUsage' "$T/h28d.out")" -ge 2 ] && [ $rc3 = 0 ] && ! has "$T/h28d1.out" 'GIN'; then
  pass fake_two_hosts_devcomm_gin_not_supported_2_28
else fail fake_two_hosts_devcomm_gin_not_supported_2_28 "rc=$rc/$rc2/$rc3 $(grep -E 'GIN|DevComm|RESULT' "$T/h28d.out" | head -4 | tr '\n' ' ')"; fi

# 2.27 and 2.28.3: symmetric support on one node only (init.cc at v2.27.7-1, v2.28.3-1: `isAllDirectP2p && nNodes == 1
# && ...`): two hosts register rank 0's cudaMalloc buffer locally on both ranks (no exchange, no hang: 2.28.3 a local
# handle, 2.27 its 2 MiB check's NULL window on rank 0); an empty NCCL_HOSTID is an id of its own (the empty
# string's hash: a node apart from a rank without NCCL_HOSTID); one host: the symmetric path and its hang
unset NCCL_HOSTID # (rank 1 of the empty-id run has none)
FAKE_NCCL_VERSION=22803 two_hosts --alloc cuda0 --expect-win nonnull >"$T/h283.out" 2>&1; rc=$?
FAKE_NCCL_VERSION=22703 two_hosts --alloc cuda0 --expect-reg any >"$T/h27.out" 2>&1; rc2=$?
FAKE_NCCL_VERSION=22803 NGTEST_ENV_RANK0=NCCL_HOSTID= FAKE_CUDA_DEVICES=1 NGTEST_TIMEOUT=4 bare_run "$PROGS/ngtest" -n 2 -m proc \
  --alloc cuda0 --expect-win nonnull >"$T/h283e.out" 2>&1; rc3=$?
FAKE_NCCL_VERSION=22803 FAKE_CUDA_DEVICES=1 NGTEST_TIMEOUT=4 bare_run "$PROGS/ngtest" -n 2 -m proc --alloc cuda0 >"$T/h283one.out" 2>&1; rc4=$?
if [ $rc = 0 ] && [ "$(grep -c 'RESULT ok reg=ncclSuccess win=0x' "$T/h283.out")" = 2 ] && [ $rc2 = 0 ] \
   && has "$T/h27.out" '^rank 0/2: RESULT ok reg=ncclSuccess win=null' && has "$T/h27.out" '^rank 1/2: RESULT ok reg=ncclSuccess win=0x' \
   && [ $rc3 = 0 ] && [ $rc4 = 124 ] && has "$T/h283one.out" 'RESULT fail hang in'; then
  pass fake_two_hosts_no_symmetric_2_27_2_28_3
else fail fake_two_hosts_no_symmetric_2_27_2_28_3 "rc=$rc/$rc2/$rc3/$rc4 $(grep RESULT "$T/h283.out" "$T/h27.out" "$T/h283e.out" "$T/h283one.out" | tr '\n' ' ')"; fi

# ---- ncclDevCommCreate: 2.29+ refuse requirements without NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER's magic ----
# (ngtest passes zeroed requirements, the layout of 2.28's device API: what PyTorch 2.11 passes on NCCL 2.29+,
# docs/PYTORCH.md §5)
for v in 22903 23007; do
  FAKE_NCCL_VERSION=$v bare_run "$PROGS/ngtest" -n 1 -m proc --devcomm >"$T/dm$v.out" 2>&1; rc=$?
  if [ $rc != 0 ] && has "$T/dm$v.out" 'WARN Cannot create device communicator: ncclDevCommRequirements_t argument must be initialized via NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER$' \
     && has "$T/dm$v.out" 'ncclDevCommCreate.*ncclInvalidUsage'; then pass "fake_devcomm_no_magic_refused_$v"
  else fail "fake_devcomm_no_magic_refused_$v" "rc=$rc $(grep -E 'DevComm|WARN|RESULT' "$T/dm$v.out" | head -3 | tr '\n' ' ')"; fi
done
FAKE_NCCL_VERSION=22809 bare_run "$PROGS/ngtest" -n 1 -m proc --devcomm >"$T/dm28.out" 2>&1; rc=$?
if [ $rc = 0 ] && ! has "$T/dm28.out" 'WARN'; then pass fake_devcomm_2_28_layout_accepted_2_28
else fail fake_devcomm_2_28_layout_accepted_2_28 "rc=$rc $(grep -E 'DevComm|WARN|RESULT' "$T/dm28.out" | head -3 | tr '\n' ' ')"; fi
