#!/bin/sh
# Behaviours pinned one by one: each case fails when the behaviour it names is removed, and
# tests/mutate/run has a mutation that removes it (the suite lists this script for it). Against the
# fake NCCL, through the test programs, logs at info.
. "$(dirname "$0")/lib.sh"

logs() { cat "$T/$1".*.log 2>/dev/null; }
# run NAME ENV... -- PROG ARGS...: PROG with ncclguard, logs into $T/NAME.*.log; $out and $rc
run() {
  n=$1; shift
  envs=""
  while [ "$1" != -- ]; do envs="$envs $1"; shift; done
  shift
  # shellcheck disable=SC2086
  out=$(for e in $envs; do export "$e"; done; export NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$n.%p.log"
        fake_run "$@" 2>"$T/$n.err"); rc=$?
}

# NCCLGUARD_WINDOW_BUDGET: one WARN per crossing, and armed again once the live bytes fall back to it.
# One rank registers one 2 MiB allocation three times, each window deregistered right after it (the
# bytes go 2 MiB -> 0 three times: three crossings), then three times with every window kept (2, 4, 6 MiB:
# one crossing).
run rearm NCCLGUARD_WINDOW_BUDGET=1000000 -- "$PROGS/repeat" -n 1 --times 3 --rank1-drops
rc1=$rc
n1=$(logs rearm | grep -c 'WARN fn=budget msg=".* 1 live windows register 2097152 bytes, past NCCLGUARD_WINDOW_BUDGET=1000000')
run once NCCLGUARD_WINDOW_BUDGET=1000000 -- "$PROGS/repeat" -n 1 --times 3
n2=$(logs once | grep -c 'WARN fn=budget')
if [ $rc1 = 0 ] && [ $rc = 0 ] && [ "$n1" = 3 ] && [ "$n2" = 1 ] && echo "$out" | grep -q 'windows=3 of 3'; then
  pass "pin-budget-rearmed-after-fall (3 crossings warned, 1 when the bytes never fall back)"
else fail pin-budget-rearmed-after-fall "rc=$rc1/$rc: $n1 WARN with the windows dropped (want 3), $n2 kept (want 1): $(echo "$out" | tail -1)"; fi

# a successful ncclMemAlloc leaves a CUDA runtime error the application had not read yet as it was: the
# reading before the call peeks (cudaPeekAtLastError), never resets (cudaGetLastError)
out0=$(bare_run "$PROGS/memalloc" 4194304 --pending 2>/dev/null)
run mapend -- "$PROGS/memalloc" 4194304 --pending
if [ $rc = 0 ] && [ "$out0" = "memalloc result=0 ptr=set lasterr=cudaErrorInvalidDevice" ] && [ "$out" = "$out0" ] \
   && logs mapend | grep -q 'INFO fn=ncclMemAlloc .*result=ncclSuccess .*decision=pass reason=ok'; then
  pass pin-memalloc-success-keeps-pending-error
else fail pin-memalloc-success-keeps-pending-error "rc=$rc: without '$out0', with '$out'"; fi

# a split of a nonblocking parent (no config of its own) returns ncclInProgress with the child not yet written
# (NCCL writes it when the split's job ends): the call is logged so, the child is recorded at its first
# registration, which waits until it is ready, then registers on every rank
run split -- "$PROGS/ngtest" --nonblocking --split --expect-win nonnull --timeout 30
if [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*child-reg=ncclSuccess child-win=0x')" = 2 ] \
   && [ "$(logs split | grep -c "fn=ncclCommSplit comm=0x0 .*result=ncclInProgress .*reaches the application when NCCL's background job ends")" = 2 ] \
   && [ "$(logs split | grep -c 'fn=ncclCommWindowRegister .*nranks=1 .*decision=register reason=ok')" = 2 ]; then
  pass pin-split-of-nonblocking-parent
else fail pin-split-of-nonblocking-parent "rc=$rc: $(echo "$out" | grep RESULT | tr '\n' '|') $(logs split | grep -E 'fn=ncclCommSplit|WARN' | head -3 | cut -c1-200 | tr '\n' '|')"; fi

# a split inside a group (one thread drives both ranks): NCCL writes the children at the group's end, where they
# are recorded with their parent (not at their first registration as unknown ones)
run splitgrp -- "$PROGS/ngtest" -m group -n 2 --split
if [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*child-reg=ncclSuccess child-win=0x')" = 2 ] \
   && [ "$(logs splitgrp | grep -Ec 'fn=ncclCommSplit comm=0x[0-9a-f]+ cid=[0-9a-f]+ .*parent=[0-9a-f]+ .*result=ncclSuccess')" = 2 ]; then
  pass pin-split-in-group-recorded-at-group-end
else fail pin-split-in-group-recorded-at-group-end "rc=$rc: $(logs splitgrp | grep -E 'fn=ncclCommSplit|WARN' | head -3 | cut -c1-200 | tr '\n' '|')"; fi
# one thread drives 4 ranks; the split in a group makes two children of 2 ranks each (two cliques): their
# warm-ups run together at the group's end (each alone waits for its peer's connection), and one group of
# registrations on both children (two steps, one per clique) keeps every registration: all register, all
# all-reduces correct, within the default timeout
run splitgrp4 -- timeout 30 "$PROGS/ngtest" -m group -n 4 --split
if [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok .*child-reg=ncclSuccess child-win=0x.* child-ar=ok')" = 4 ] \
   && ! logs splitgrp4 | grep -q 'WARN'; then
  pass pin-split-in-group-two-cliques-one-thread
else fail pin-split-in-group-two-cliques-one-thread "rc=$rc: $(echo "$out" | grep RESULT | cut -c1-120 | tr '\n' '|') $(logs splitgrp4 | grep WARN | head -2 | cut -c1-200)"; fi

# window sizes that differ where the allocations do not are no layout that parts (NCCL 2.28.9 places a
# window by its allocation, docs/NCCL.md): registered on every rank, no layout_mismatch
run wsize FAKE_NCCL_VERSION=22809 NGTEST_ENV_RANK1=NGTEST_REG_SIZE=1048576 -- "$PROGS/ngtest" --expect-win nonnull --timeout 30
if [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok')" = 2 ] \
   && logs wsize | grep -q 'rank=1 .*size=1048576 .*decision=register reason=ok' \
   && logs wsize | grep -q 'rank=0 .*size=2097152 .*decision=register reason=ok' && ! logs wsize | grep -q 'layout_mismatch'; then
  pass pin-window-size-apart-from-allocation-size
else fail pin-window-size-apart-from-allocation-size "rc=$rc: $(echo "$out" | grep RESULT | tr '\n' '|') $(logs wsize | grep -E 'WARN' | head -2 | cut -c1-200)"; fi

# NCCL 2.30.7: only an exact repeat (same buffer, size and flags) of a live window is served from it; the
# same buffer and size with other flags is a registration of its own
run rep1 FAKE_NCCL_VERSION=23007 -- "$PROGS/ngtest" --twice --timeout 30
r1=$rc; n1=$(logs rep1 | grep -c 'fn=ncclCommWindowRegister .*flags=1 .*decision=reuse reason=ok')
run rep0 FAKE_NCCL_VERSION=23007 NGTEST_SECOND_FLAGS=0 -- "$PROGS/ngtest" --twice --timeout 30
n0=$(logs rep0 | grep -c 'fn=ncclCommWindowRegister .*flags=0 .*decision=register reason=ok')
if [ $r1 = 0 ] && [ $rc = 0 ] && [ "$n1" = 2 ] && [ "$n0" = 2 ] && ! logs rep0 | grep -q 'decision=reuse'; then
  pass pin-repeat-with-other-flags-not-reused
else fail pin-repeat-with-other-flags-not-reused "rc=$r1/$rc: $n1 reuse of the exact repeat (want 2), $n0 registrations with flags 0 (want 2)"; fi

# a split of a destroyed communicator is refused before NCCL (NCCL alone: a use of freed memory), one
# WARN per rank naming it, ncclInvalidArgument
run spdes NGTEST_SPLIT_DESTROYED=1 -- "$PROGS/ngtest" --split --timeout 30
if [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'split of a destroyed parent: ncclInvalidArgument')" = 2 ] \
   && [ "$(logs spdes | grep -c 'WARN fn=ncclCommSplit .*result=ncclInvalidArgument .*decision=error reason=comm_destroyed')" = 2 ]; then
  pass pin-split-of-destroyed-parent-refused
else fail pin-split-of-destroyed-parent-refused "rc=$rc: $(echo "$out" | grep -E 'destroyed|RESULT' | tr '\n' '|')"; fi
