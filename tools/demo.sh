#!/bin/sh
# The demo (no GPU needed): two failures of NCCL window registration, as NCCL 2.28.9 shows them
# (modelled by the fake NCCL of the tests; docs/NCCL.md §7), first without, then with ncclguard.
# The guarded runs write their logs (ncclguard-run -d) into BUILD_DIR/demo-logs, emptied first;
# the demo ends with ncclguard-report on them. Bold headings only on a terminal; no line reaches
# 100 characters. Exit status 0, or 1 when a guarded run or the report did not do what it shows.
# Usage: tools/demo.sh [BUILD_DIR]      (make demo builds everything first)
set -u
B=$(cd "${1:-build}" && pwd) || exit 1
NG="$B/progs/ngtest"
RUN="$B/ncclguard-run"
REPORT="$B/ncclguard-report"
[ -x "$REPORT" ] || REPORT=$(command -v ncclguard-report) || { echo "demo: no ncclguard-report" >&2; exit 1; }
LOGS="$B/demo-logs"
export LD_LIBRARY_PATH="$B/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# what the user might have set would change what the demo shows
unset NCCLGUARD_LOG NCCLGUARD_LOG_FILE NCCLGUARD_LOG_FORMAT NCCLGUARD_ON_FAILURE NCCLGUARD_DISABLE
# paths as the user typed them: relative to the current directory where they are below it
rel() { case "$1" in "$PWD"/*) echo "${1#"$PWD"/}" ;; *) echo "$1" ;; esac; }
run() { timeout -k 1 "$@"; }
if [ -t 1 ] && [ "${TERM:-dumb}" != dumb ] && [ -z "${NO_COLOR:-}" ]; then
  say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
else
  say() { printf '\n%s\n' "$*"; }
fi
# wrap: lines of 99 characters at most, broken at spaces (a table's row between columns),
# continued 4 columns further in
wrap() {
  awk -v W=99 '{
    if (length($0) <= W) { print; next }
    match($0, /^ */); ind = substr($0, 1, RLENGTH) "    "; s = $0; pre = ""
    while (length(pre s) > W) {
      room = W - length(pre); cut = 0
      # a gap between columns (two spaces) first, where there is one in the second half
      for (i = room + 1; i > room / 2; i--) if (substr(s, i - 1, 2) == "  ") { cut = i; break }
      if (cut == 0) for (i = room + 1; i > 1; i--) if (substr(s, i, 1) == " ") { cut = i; break }
      if (cut == 0) { print pre substr(s, 1, room); s = substr(s, room + 1) }
      else { t = substr(s, 1, cut - 1); sub(/ +$/, "", t); print pre t; s = substr(s, cut + 1) }
      sub(/^ +/, "", s); pre = ind
    }
    print pre s
  }'
}
# warns DIR: the WARN lines of DIR's logs, their key fields only (the report below has the rest)
warns() {
  cat "$1"/*.log 2>/dev/null | grep 'NCCLGUARD WARN' | grep -v ' fn=summary ' | awk '{
    out = ""; rank = ""
    for (i = 1; i <= NF; i++) {
      if (!index($i, "=")) continue
      split($i, kv, "=")
      if (kv[1] == "rank" && rank == "") rank = "rank " kv[2] ": "
      if (kv[1] == "fn" || kv[1] == "decision" || kv[1] == "reason" || ($i == "comm=0x0"))
        out = out " " $i
    }
    print "   " rank "NCCLGUARD WARN" out
  }' | sort
}
bad=0
rm -rf "$LOGS" && mkdir -p "$LOGS" || exit 1
L=$(rel "$LOGS")

# the commands as they can be typed from here (each line under 100 characters)
echo "The commands below run as shown after:"
echo "\$ export LD_LIBRARY_PATH=$(rel "$B")/fake   # the fake NCCL of the tests: no GPU needed"
say "1. PyTorch's lazy communicator: ncclCommWindowRegister(NULL comm, ...) on NCCL 2.28.9"
echo "\$ $(rel "$NG") -n 1 -m thread --null-comm"
echo "   without ncclguard:"
run 10 "$NG" -n 1 -m thread --null-comm >"$LOGS/1-without.out" 2>&1
rc=$?
[ $rc -ge 128 ] && echo "   -> the process died with signal $((rc - 128)) (SIGSEGV), like torchrun's 'signal 11'" \
               || echo "   -> exit status $rc"
echo "   with ncclguard:"
echo "\$ $(rel "$RUN") -d $L/1-null-comm -- \\"
echo "    $(rel "$NG") -n 1 -m thread --null-comm"
run 10 "$RUN" -d "$LOGS/1-null-comm" -- "$NG" -n 1 -m thread --null-comm >"$LOGS/1-with.out" 2>&1
warns "$LOGS/1-null-comm"
grep -E 'RESULT' "$LOGS/1-with.out" | sed 's/^/   /'
grep -q 'RESULT ok' "$LOGS/1-with.out" || bad=1
echo "   -> an error return instead of a crash; the report below says what to change"

say "2. cudaMalloc on rank 0, ncclMemAlloc on rank 1 (2 processes): NCCL alone hangs rank 1"
echo "\$ $(rel "$NG") -n 2 --alloc cuda0 --iters 3"
echo "   without ncclguard (stopped after 5 s):"
run 5 "$NG" -n 2 --alloc cuda0 --iters 3 >"$LOGS/2-without.out" 2>&1
[ $? = 124 ] && echo "   -> hang: killed by timeout" || echo "   -> finished?"
echo "   with ncclguard:"
echo "\$ $(rel "$RUN") -d $L/2-cuda0 -- \\"
echo "    $(rel "$NG") -n 2 --alloc cuda0 --iters 3"
run 30 "$RUN" -d "$LOGS/2-cuda0" -- "$NG" -n 2 --alloc cuda0 --iters 3 >"$LOGS/2-with.out" 2>&1
warns "$LOGS/2-cuda0"
grep -E 'RESULT' "$LOGS/2-with.out" | sort | sed 's/^/   /'
[ "$(grep -c 'RESULT ok' "$LOGS/2-with.out")" = 2 ] || bad=1
echo "   -> both ranks took the same decision (an unregistered buffer), the all-reduce"
echo "      results are right, the job ends"

say "3. What every rank did, from the logs (ncclguard-report; see README.md)"
echo "\$ $(rel "$REPORT") $L"
"$REPORT" "$L" >"$LOGS/report.out" 2>&1
rc=$?
wrap <"$LOGS/report.out"
# status 1: the error of part 1, reported as it should be; 2: no logs in the folder, or no report
[ $rc -le 1 ] || bad=1
exit $bad
