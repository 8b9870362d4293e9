#!/bin/bash
# tests/fuzz/run.sh FUZZDIR NAME SECONDS [libFuzzer options...]: fuzz NAME from the committed corpus
# (tests/fuzz/corpus/NAME, read-only here) into FUZZDIR/work/NAME; the full log goes to
# FUZZDIR/NAME.log, the summary lines to stdout. Fails on a crash, leak, timeout or OOM
# (the input is left in FUZZDIR/artifacts/NAME/).
set -u
fd=$1 name=$2 secs=$3; shift 3
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$fd/work/$name" "$fd/artifacts/$name" "$src/corpus/$name"
case $name in
  fuzz_env) opts=(-max_len=2048 -dict="$src/env.dict") ;;
  fuzz_path) opts=(-max_len=512 -dict="$src/path.dict") ;;
  # an input may legitimately wait: each of its at most 8 communicators one timed-out round
  # (0.2 s plus the 1 s grace) and one bounded abort of a revoked communicator (5 s); see
  # fuzz_api.c's nmade. Slower than that is a finding (slow-unit-*), a unit past -timeout a hang.
  *) opts=(-max_len=256 -report_slow_units=60 -timeout=90) ;;
esac
cd "$fd" || exit 1
export LSAN_OPTIONS="suppressions=$src/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
./"$name" -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 "${opts[@]}" -max_total_time="$secs" "$@" \
  -artifact_prefix="artifacts/$name/" "work/$name" "$src/corpus/$name" >"$name.log" 2>&1
rc=$?
grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|==[0-9]+==ERROR|SUMMARY|fuzz_[a-z]+: )' "$name.log"
if [ $rc -ne 0 ] || ls artifacts/"$name"/* >/dev/null 2>&1; then
  echo "$name: FAILED (exit $rc): $(ls artifacts/"$name"/ 2>/dev/null | tr '\n' ' ')"; exit 1
fi
echo "$name: ok, ${secs} s"
