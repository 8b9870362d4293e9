# Every failure point (shim/failpoint.c): each fallible step ncclguard takes goes through a named failpoint
# (coverage, from the source), a release build has none of them, and failing each one in turn, on every rank,
# in each scenario and on each NCCL the fakes model, ends with no wrong data, one outcome on every rank (or
# the communicator stopped), *win NULL on every error, every call within its bound and nothing left behind
# (tests/progs/failwalk.c). The fakes' collective-matching checker sees every collective of the walk.
. "$NG_ROOT/tests/lib.sh"
S=$NG_ROOT/shim

# 1. coverage: no host allocation, thread or CUDA driver call in shim/ outside its failpoint; NCCL calls go
# through NG_CALL (its failpoint is inside). Each exception is listed here with its reason.
bad=$(grep -nE '\b(malloc|calloc|realloc|strdup|strndup|aligned_alloc|posix_memalign|pthread_create)[[:space:]]*\(' \
        "$S"/*.c "$S"/*.h | grep -v '^[^:]*:[0-9]*:[[:space:]]*\(/\*\|\*\)' \
      | grep -vE 'guard\.h:[0-9]+:.*return NG_FP\(fp\) \? NULL : (calloc|realloc)\(' \
      | grep -vE 'thread\.c:[0-9]+:.*int e = pthread_create\(' \
      | grep -vE 'failpoint\.c:')
# CUDA: every driver call in GUARDED (failpoint "cuda.<fn>"), except those of ng_cuda_push (its failpoint
# "cuda.push" fails the whole step), ng_cuda_pop (restores the caller's context; its result is not used),
# and cuInit (the driver's resolution, once per process, before any registration)
cu_bad=$(grep -nE 'cu\.cu[A-Za-z]+\(' "$S/cudrv.c" | grep -v GUARDED \
         | grep -vE 'cu\.cuInit\(0\)|cu\.cuCtxGetCurrent\((saved|&cur)\)|cu\.cuCtxGetDevice\(&cur\)|cu\.cuDeviceGet\(&d, dev\) && !cu\.cuDevicePrimaryCtxRetain|cu\.cuCtxSetCurrent\((ctx|saved)\)')
# NCCL: a function taken from the table and called by hand, outside NG_CALL, only where listed:
# ng_last_error (a string for the log, never fails) and rules.c's query (its own failpoint)
nccl_bad=$(grep -nE '= \((__typeof__|q_t)[^)]*\)ng_real\(' "$S"/*.c | grep -vE 'real\.c:.*ncclGetLastError|rules\.c:.*ncclCommQueryProperties')
grep -q 'NG_FP("nccl.ncclCommQueryProperties")' "$S/rules.c" || nccl_bad="$nccl_bad rules.c: the query has no failpoint"
n_alloc=$(grep -oE 'ng_(calloc|realloc)\("[a-z_.]+"' "$S"/*.c | sort -u | wc -l)
n_fp=$(grep -oE 'NG_FP\("[a-z_.A-Za-z]+"\)' "$S"/*.c | sort -u | wc -l)
n_cuda=$(grep -cE 'GUARDED\([A-Za-z]+,' "$S/cudrv.c")
n_nccl=$(grep -ohE 'NG_CALL\([a-z_]+, *nccl[A-Za-z]+' "$S"/*.c | sed 's/.*, *//' | sort -u | wc -l)
if [ -z "$bad$cu_bad$nccl_bad" ]; then
  pass "every-fallible-call-a-failpoint ($n_alloc host allocations, $n_fp other named points, $n_cuda CUDA driver call sites, $n_nccl NCCL functions through NG_CALL)"
else
  fail every-fallible-call-a-failpoint "outside a failpoint: $(echo "$bad $cu_bad $nccl_bad" | head -5 | tr '\n' ' ')"
fi

# 2. a release build has no failpoint: no arming code, no failpoint names in what is loaded (NG_FP is the
# constant 0; the debug information may still name an inlined constant argument, hence .rodata only)
if ! nm "$SHIM" 2>/dev/null | grep -q ng_fp_hit \
   && ! readelf -p .rodata "$SHIM" 2>/dev/null | grep -qE 'agree\.staging|policy\.votes|registry\.hash|nccl\.ncclCommRevoke|cuda\.cuStreamQuery|ng_failpoint_hook|NG_FAILPOINT'; then
  pass release-build-has-no-failpoints
else
  fail release-build-has-no-failpoints "ng_fp_hit, failpoint names or the hook's lookup found in $SHIM"
fi

# 3. the walk: the test build (make FAILPOINTS=1) of the library, the plain build's fakes and programs.
# Plain variant only (the sanitizer variants run the same code paths in t_safety's exploration).
if [ "${NG_VARIANT:-plain}" != plain ]; then
  echo "# skip failwalk: plain variant only"
  exit 0
fi
FPB="$NG_ROOT/build-fp"
if ! make -C "$NG_ROOT" -s BUILD="$FPB" FAILPOINTS=1 lib >"$T/fpbuild.log" 2>&1; then
  fail failpoint-build "$(tail -3 "$T/fpbuild.log")"
  exit 0
fi
# 3a. a launch of a round that does not return (NCCL's group end slow on both ranks: the test build's hook,
# tests/progs/fphook.c, makes the 2nd ncclGroupEnd, the registration round's, take 2.5 s): left to its thread
# past NCCLGUARD_TIMEOUT plus the grace; the channel existed, so only the agreement stops: the registration
# fails on both ranks and the communicator's all-reduce is correct (not revoked as before a channel exists)
out=$(NCCLGUARD_TIMEOUT=0.5 FPHOOK_SLEEP_MS=2500 NG_FAILPOINT='nccl.ncclGroupEnd:2:hook' NCCLGUARD_LOG=warn \
      FAKE_NCCL_VERSION=22809 LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$FPB/libncclguard.so:$PROGS/libfphook.so" \
      timeout -k 2 60 "$PROGS/ngtest" -n 2 -m proc 2>&1)
if [ "$(echo "$out" | grep -c 'RESULT fail registration: ncclSystemError | .*ar=ok')" = 2 ] &&
   [ "$(echo "$out" | grep -c 'fphook: nccl.ncclGroupEnd sleeps')" = 2 ] &&
   echo "$out" | grep -q 'did not return 1 s after NCCLGUARD_TIMEOUT' && ! echo "$out" | grep -q 'before its agreement channel existed'; then
  pass slow-round-launch-leaves-communicator
else
  fail slow-round-launch-leaves-communicator "$(echo "$out" | grep -E 'RESULT|fphook|existed|did not return' | head -6 | cut -c1-160 | tr '\n' ' ')"
fi

# NG_FAILWALK_RANKS: the rank counts to walk (default 2, what CI runs; "3 4": the documented longer run,
# its result in tests/failpoints-RESULTS.md); NG_FAILWALK_VERSIONS: the fakes' versions (default all four);
# NG_FAILWALK_SCENARIOS: the scenarios (default: below); NG_FAILWALK_JOBS: cases run at once (default 4)
total=0; splits=0; waits=0
for nr in ${NG_FAILWALK_RANKS:-2}; do
for v in ${NG_FAILWALK_VERSIONS:-22809 23007 22907 22707}; do
  # abort and reuse (the application's abort from a second thread at each hit; a new communicator at the
  # address of the one just destroyed) on fewer versions, to keep CI's run short: abort where NCCL can
  # revoke (2.28.9, 2.30.7) and where it cannot (2.27); reuse on 2.30.7 and 2.27 (the registry's generations
  # do not depend on the version; revoke or none decides what a left-over round of A does)
  sc="appgroup group one dereg nonblocking cold"
  case $v in 22809) sc="$sc abort" ;; 23007|22707) sc="$sc abort reuse" ;; esac
  [ -n "${NG_FAILWALK_SCENARIOS:-}" ] && sc=$NG_FAILWALK_SCENARIOS
  for s in $sc; do
    # (the fake's nonblocking initialisation takes 400 ms unless told otherwise: well inside the timeout here)
    # each walk's collectives go to a mismatch file of its own, added to the script's after the walk counts
    walk() { : >"$T/mm"; FAKE_NCCL_MISMATCH_FILE="$T/mm" NCCLGUARD_LOG=off FAKE_NCCL_VERSION=$v FAKE_NCCL_INIT_DELAY_MS=100 \
          LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$FPB/libncclguard.so" \
          timeout -k 2 1800 "$PROGS/failwalk" -s $s -n $nr --timeout-ms 400 --jobs ${NG_FAILWALK_JOBS:-4} 2>&1; }
    out=$(walk); rc=$?
    [ -s "$T/mm" ] && rc=1
    if [ $rc != 0 ]; then
      # A violation that a second walk of the same combination does not show again is timing-dependent: it is
      # printed here (the log keeps it) and the combination passes only if the second walk is clean. One such
      # case is open: docs/behaviour.md, "Failures of ncclguard's own".
      echo "# failwalk-$s-$v: violation in the first walk, walked again: $(echo "$out" | grep VIOLATION | head -2 | cut -c1-400 | tr '\n' ' ') $(head -1 "$T/mm" | cut -c1-200)"
      out=$(walk); rc=$?
    fi
    [ -n "${FAKE_NCCL_MISMATCH_FILE:-}" ] && cat "$T/mm" >>"$FAKE_NCCL_MISMATCH_FILE"
    [ -s "$T/mm" ] && rc=1
    r=$(echo "$out" | grep 'failwalk: RESULT' | sed 's/.*RESULT //')
    c=$(echo "$r" | sed -n 's/.*cases=\([0-9]*\).*/\1/p'); total=$((total + ${c:-0}))
    sp=$(echo "$r" | sed -n 's/.* split=\([0-9]*\).*/\1/p'); splits=$((splits + ${sp:-0}))
    wt=$(echo "$r" | sed -n 's/.*nccl_wait=\([0-9]*\).*/\1/p'); waits=$((waits + ${wt:-0}))
    nm=failwalk-$s-$v; [ "$nr" = 2 ] || nm=$nm-$nr-ranks
    # the abort and reuse walks test something only where some case aborted / reused the address: a hook that is
    # never found, or a fake that stops handing the address on, would turn every case into a note
    nt=$(echo "$r" | sed -n 's/.*not_\(aborted\|reused\)=\([0-9]*\).*/\2/p')
    [ -n "$nt" ] && [ "$nt" -ge "${c:-0}" ] && rc=1 && r="$r (no case aborted or reused the address)"
    [ $rc = 0 ] && echo "$r" | grep -q 'violations=0' && [ "${c:-0}" -gt 5 ] && pass "$nm ($r)" \
      || fail "$nm" "rc=$rc $r $(echo "$out" | grep VIOLATION | head -3 | cut -c1-400 | tr '\n' ' ')"
  done
done
done
echo "# failwalk: $total cases (failpoint hit x rank x scenario x NCCL version), 0 violations where every case passed;" \
  "$splits residual splits of the last round; $waits peers left in NCCL's exchange where NCCL cannot revoke (2.27)"
