# One allocation registered many times (issue 20, NVIDIA/nccl#2331), against the fake's model of NCCL's
# symmetric address space (tests/fake/README.md): NCCL 2.28/2.29 reuse a registered allocation, 2.30.7
# reserves space of the whole allocation for every window. NCCL_WIN_STRIDE sizes that space (NCCL's own
# variable, rounded up to 4 GiB): four 1 GiB windows exhaust 4 GiB here as 24 GiB windows do an H200's
# 140 GiB (the fake's memory is never touched: the sizes cost nothing).
# At e32e22c ncclguard gave the same 4 of 12 and 1 of 4 with "internal error" as NCCL alone.
. "$NG_ROOT/tests/lib.sh"
R=$PROGS/repeat
g() { n=$1; shift; out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$n.%p.log" fake_run "$R" "$@" 2>&1); rc=$?; }
b() { out=$(bare_run "$R" "$@" 2>&1); rc=$?; }
logs() { cat "$T/$1".*.log 2>/dev/null; }
both() { [ "$(echo "$out" | grep -c "$1")" = 2 ]; }

# 2.30.7, a 4 GiB space, the same 1 GiB buffer 12 times: NCCL alone 4 windows, then its internal error
export FAKE_NCCL_VERSION=23007 NCCL_WIN_STRIDE=0x100000000
b -n 2 --times 12 --size 1G
both 'windows=4 of 12 first_fail=ncclInternalError' && echo "$out" | grep -q 'No suitable space' \
  && pass repeat-2.30-exhausts-without || fail repeat-2.30-exhausts-without "rc=$rc $out"
g same -n 2 --times 12 --size 1G
[ $rc = 0 ] && both 'windows=12 of 12 first_fail=ncclSuccess allreduce=ok dereg=ok' \
  && [ "$(logs same | grep -c 'decision=reuse')" = 22 ] && [ "$(logs same | grep -c 'reason=shared_window')" = 22 ] \
  && pass repeat-2.30-served-from-live-window || fail repeat-2.30-served-from-live-window "rc=$rc $out $(logs same | grep WARN | head -2)"

# the two halves of one 1 GiB allocation alternately (each window takes the whole allocation): 2 distinct
# windows, then exact repeats of them
b -n 2 --times 12 --size 512M --halves
both 'windows=4 of 12 first_fail=ncclInternalError' && pass repeat-2.30-halves-exhaust-without || fail repeat-2.30-halves-exhaust-without "rc=$rc $out"
g halves -n 2 --times 12 --size 512M --halves
[ $rc = 0 ] && both 'windows=12 of 12 first_fail=ncclSuccess allreduce=ok dereg=ok' \
  && pass repeat-2.30-halves-served || fail repeat-2.30-halves-served "rc=$rc $out"

# a window that cannot fit (the halves of a 4 GiB allocation: the first takes the whole space): one agreed
# outcome on every rank, named (reason=sym_space_full), never NCCL's "internal error - please report"
g full -n 2 --times 4 --size 2G --halves
[ $rc = 0 ] && both 'windows=2 of 4 first_fail=ncclInvalidUsage allreduce=ok dereg=ok' \
  && [ "$(logs full | grep -c 'decision=degrade reason=sym_space_full')" = 4 ] \
  && pass repeat-2.30-space-full-degrades-named || fail repeat-2.30-space-full-degrades-named "rc=$rc $out $(logs full | grep -E 'WARN' | head -2 | cut -c1-300)"
NCCLGUARD_ON_FAILURE=error g fullerr -n 2 --times 2 --size 2G --halves
[ $rc = 0 ] && both 'windows=1 of 2 first_fail=ncclInternalError' && [ "$(logs fullerr | grep -c 'decision=error reason=sym_space_full')" = 2 ] \
  && pass repeat-2.30-space-full-error-keeps-nccl-code || fail repeat-2.30-space-full-error-keeps-nccl-code "rc=$rc $out"

# a repeat of a live window on one rank only (rank 0 deregistered its first window): never served on one
# rank while its peer calls NCCL (that peer would wait in NCCL's exchange); every rank registers with NCCL,
# and the next exact repeat, live everywhere again, is served on every rank
NCCLGUARD_TIMEOUT=5 g drop -n 2 --times 3 --size 1G --drop-first-on 0
[ $rc = 0 ] && echo "$out" | grep -q 'rank=0 windows=2 of 3' && echo "$out" | grep -q 'rank=1 windows=3 of 3' \
  && [ "$(logs drop | grep -c 'seq=1 .*decision=register')" = 2 ] && [ "$(logs drop | grep -c 'seq=2 .*decision=reuse')" = 2 ] \
  && ! logs drop | grep -q 'reason=timeout' \
  && pass repeat-2.30-live-on-some-ranks-agreed || fail repeat-2.30-live-on-some-ranks-agreed "rc=$rc $out $(logs drop | grep -E 'decision=' | cut -c1-200 | head -6)"
# a repeat only some ranks hold (the last rank deregistered its window, the others did not): served from the
# live window on no rank (agreed), every rank registers with NCCL again; a rank serving it alone would leave
# its peer in NCCL's exchange (until the timeout)
NCCLGUARD_TIMEOUT=4 g drops -n 2 --times 3 --size 1G --rank1-drops
[ $rc = 0 ] && both 'windows=3 of 3 first_fail=ncclSuccess allreduce=ok dereg=ok' && ! logs drops | grep -q 'decision=reuse' \
  && [ "$(logs drops | grep -c 'fn=ncclCommWindowRegister .*decision=register .*msg="registered"')" = 6 ] \
  && pass repeat-2.30-one-rank-without-window-not-served || fail repeat-2.30-one-rank-without-window-not-served "rc=$rc $out $(logs drops | grep -E 'WARN|reuse' | head -2 | cut -c1-300)"

# one rank: no round, its own vote decides
g one -n 1 --times 12 --size 1G
[ $rc = 0 ] && echo "$out" | grep -q 'windows=12 of 12' && [ "$(logs one | grep -c 'decision=reuse')" = 11 ] \
  && pass repeat-2.30-one-rank || fail repeat-2.30-one-rank "rc=$rc $out"

# 2.31.2: the same as 2.30.7 (its binary has no symMemoryDropRef): NCCL alone exhausts, ncclguard serves
FAKE_NCCL_VERSION=23102 b -n 2 --times 12 --size 1G
out0=$out
FAKE_NCCL_VERSION=23102 g v23102 -n 2 --times 12 --size 1G
[ "$(echo "$out0" | grep -c 'windows=4 of 12 first_fail=ncclInternalError')" = 2 ] \
  && [ $rc = 0 ] && both 'windows=12 of 12 first_fail=ncclSuccess allreduce=ok dereg=ok' \
  && [ "$(logs v23102 | grep -c 'decision=reuse')" = 22 ] \
  && pass repeat-2.31-served-from-live-window || fail repeat-2.31-served-from-live-window "rc=$rc $out0 $out"

# 2.28.9, 2.29 and 2.32.3 (symMemoryDropRef back): NCCL reuses the allocation itself; ncclguard passes every
# registration to NCCL
FAKE_NCCL_VERSION=23203 b -n 2 --times 12 --size 1G
[ "$(echo "$out" | grep -c 'windows=12 of 12')" = 2 ] && pass repeat-2.32.3-nccl-alone-reuses \
  || fail repeat-2.32.3-nccl-alone-reuses "rc=$rc $out"
FAKE_NCCL_VERSION=23203 g v23203 -n 2 --times 12 --size 1G
[ $rc = 0 ] && both 'windows=12 of 12' && ! logs v23203 | grep -q 'decision=reuse' \
  && pass repeat-2.32.3-left-to-nccl || fail repeat-2.32.3-left-to-nccl "rc=$rc $out"
for v in 22809 22903; do
  FAKE_NCCL_VERSION=$v g v$v -n 2 --times 12 --size 1G
  [ $rc = 0 ] && both 'windows=12 of 12' && ! logs v$v | grep -q 'decision=reuse' \
    && pass "repeat-$v-left-to-nccl" || fail "repeat-$v-left-to-nccl" "rc=$rc $out"
done
