#!/bin/sh
# Fuzzing in CI (tests/fuzz/, docs/HARDENING.md): the committed corpus of each libFuzzer harness
# is replayed (regressions), then each harness fuzzes for FUZZ_CI_TIME seconds (default 15, 45 s
# in all). Built with ASan+UBSan by clang: runs once, in the plain variant only.
. "$(dirname "$0")/lib.sh"
[ "${NG_VARIANT:-plain}" = plain ] || exit 0
if ! command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1; then
  fail fuzz-build "clang not found (make test-deps installs it)"; exit 0
fi
FD="$B/fuzz"
# the fake NCCL's deliberate handle tombstones are not ncclguard's leaks (tests/fuzz/lsan.supp)
export LSAN_OPTIONS="suppressions=$NG_ROOT/tests/fuzz/lsan.supp"
if make -s -C "$NG_ROOT" BUILD="$B" fuzz-build >"$T/build.log" 2>&1; then pass fuzz-build
else fail fuzz-build "$(tail -5 "$T/build.log" | tr '\n' ' ')"; exit 0; fi

# 1. every committed input runs clean (crashes found earlier stay fixed)
for f in fuzz_env fuzz_path fuzz_api; do
  c="$NG_ROOT/tests/fuzz/corpus/$f"
  n=$(ls "$c" 2>/dev/null | wc -l)
  if [ "$n" -eq 0 ]; then fail "fuzz-corpus-$f" "no committed corpus in $c"; continue; fi
  if (cd "$FD" && timeout -k 5 300 ./$f -runs=0 -rss_limit_mb=4096 "$c") >"$T/$f.replay" 2>&1; then
    pass "fuzz-corpus-$f ($n inputs)"
  else
    fail "fuzz-corpus-$f" "$(grep -E 'ERROR|invariant|SUMMARY' "$T/$f.replay" | head -3 | tr '\n' ' ')"
  fi
done
# 2. the crash inputs of bugs found and fixed (tests/fuzz/crashes/<harness>-<name>)
for x in "$NG_ROOT"/tests/fuzz/crashes/*; do
  [ -f "$x" ] || continue
  h=$(basename "$x" | cut -d- -f1)
  if (cd "$FD" && timeout -k 5 60 ./fuzz_$h -runs=1 "$x") >"$T/x.log" 2>&1; then pass "fuzz-fixed-$(basename "$x")"
  else fail "fuzz-fixed-$(basename "$x")" "$(grep -E 'ERROR|invariant|SUMMARY' "$T/x.log" | head -2 | tr '\n' ' ')"; fi
done
# 3. bounded fuzzing: no crash, leak, timeout or out-of-memory
if make -s -C "$NG_ROOT" BUILD="$B" fuzz-ci FUZZ_CI_TIME="${FUZZ_CI_TIME:-15}" >"$T/ci.log" 2>&1; then ok=1; else ok=0; fi
for f in fuzz_env fuzz_path fuzz_api; do
  st=$(grep -E '^stat::number_of_executed_units' "$FD/$f.log" 2>/dev/null | awk '{print $2}')
  cov=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$FD/$f.log" 2>/dev/null | sed -E 's/.*cov: ([0-9]+).*/\1/')
  if [ $ok = 1 ] && [ -n "$st" ]; then pass "fuzz-ci-$f (${st:-?} execs, cov ${cov:-?})"
  elif [ -n "$(ls "$FD/artifacts/$f/" 2>/dev/null)" ]; then
    fail "fuzz-ci-$f" "$(ls "$FD/artifacts/$f/" | head -3 | tr '\n' ' ') in $FD/artifacts/$f; $(grep -E 'ERROR|invariant' "$FD/$f.log" | head -2 | tr '\n' ' ')"
  elif [ -n "$st" ]; then pass "fuzz-ci-$f (${st} execs, cov ${cov:-?})"
  else fail "fuzz-ci-$f" "did not run: $(tail -3 "$T/ci.log" | tr '\n' ' ')"; fi
done
