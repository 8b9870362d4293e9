#!/bin/sh
# The demo (no GPU needed): two failures of NCCL window registration, as NCCL 2.28.9 shows them
# (modelled by the fake NCCL of the tests; docs/NCCL.md §7), first without, then with ncclguard.
# Usage: tools/demo.sh [BUILD_DIR]      (make demo builds everything first)
set -u
B=$(cd "${1:-build}" && pwd)
NG="$B/progs/ngtest"
export LD_LIBRARY_PATH="$B/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run() { timeout -k 1 "$@"; }
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

say "1. PyTorch's lazy communicator: ncclCommWindowRegister(NULL comm, ...) on NCCL 2.28.9"
echo "\$ ngtest -n 1 -m thread --null-comm"
echo "   without ncclguard:"
run 10 "$NG" -n 1 -m thread --null-comm >/dev/null 2>&1
rc=$?
[ $rc -ge 128 ] && echo "   -> the process died with signal $((rc - 128)) (SIGSEGV is 11), exactly like torchrun's 'signal 11'" \
               || echo "   -> exit status $rc"
echo "   with ncclguard (tools/ncclguard-run):"
run 10 "$B/ncclguard-run" -- "$NG" -n 1 -m thread --null-comm 2>&1 | grep -E 'NCCLGUARD WARN fn=ncclCommWindowRegister|RESULT' | sed 's/^/   /'

say "2. cudaMalloc on rank 0, ncclMemAlloc on rank 1 (2 processes): NCCL alone hangs rank 1 forever"
echo "\$ ngtest -n 2 --alloc cuda0 --iters 3"
echo "   without ncclguard (stopped after 5 s):"
run 5 "$NG" -n 2 --alloc cuda0 --iters 3 >/dev/null 2>&1
[ $? = 124 ] && echo "   -> hang: killed by timeout" || echo "   -> finished?"
echo "   with ncclguard:"
run 30 "$B/ncclguard-run" -- "$NG" -n 2 --alloc cuda0 --iters 3 2>&1 | grep -E 'decision=degrade|RESULT' | sed 's/^/   /'
echo
echo "Both ranks took the same decision (an unregistered buffer), the all-reduce results are right, the job ends."
echo "Logs: NCCLGUARD_LOG=info shows every call; see README.md."
