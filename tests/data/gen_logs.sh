#!/bin/sh
# gen_logs.sh DIR [N [W [FORMAT]]]: the logs of a job of N ranks (default 4096) that each register W
# windows (default 50) on one communicator, where rank 1234 never reaches seq 37 (a hang's signature),
# one file per rank, as ncclguard-run --log-dir writes them; FORMAT text (default) or json (with times:
# rank r's window s ends at 1764440000 + s + r/1e6 seconds); each registration line carries the
# communicator's live windows and bytes after it (comm_windows, comm_bytes: 1 MiB each). Used by tests/t_tools.sh and
# tests/t_tools_report.sh (too big to commit: 65 MB).
dir=$1 N=${2:-4096} W=${3:-50} F=${4:-text}
mkdir -p "$dir" || exit 1
awk -v dir="$dir" -v N="$N" -v W="$W" -v F="$F" 'BEGIN {
  cid = "c0ffee0123456789"
  for (r = 0; r < N; r++) {
    h = "node" int(r / 8); pid = 10000 + r; d = r % 8
    if (F == "json") {
      f = sprintf("%s/ncclguard.%s.%d.%d.jsonl", dir, h, pid, r)
      printf "{\"ts\":%.6f,\"host\":\"%s\",\"pid\":%d,\"tid\":%d,\"dev\":%d,\"level\":\"INFO\",\"fn\":\"ncclCommInitRankConfig\",\"comm\":\"0x55d0c0a1b2c0\",\"cid\":\"%s\",\"rank\":%d,\"nranks\":%d,\"blocking\":1,\"state\":\"ready\",\"result\":\"ncclSuccess\",\"us\":412345.0,\"decision\":\"pass\",\"reason\":\"ok\"}\n", 1764439999 + r / 1e6, h, pid, pid, d, cid, r, N > f
    } else {
      f = sprintf("%s/ncclguard.%s.%d.%d.log", dir, h, pid, r)
      printf "%s:%d:%d [%d] NCCLGUARD INFO fn=ncclCommInitRankConfig comm=0x55d0c0a1b2c0 cid=%s rank=%d nranks=%d blocking=1 state=ready result=ncclSuccess us=412345.0 decision=pass reason=ok\n", h, pid, pid, d, cid, r, N > f
    }
    for (s = 0; s < W; s++) {
      if (r == 1234 && s >= 37) break
      us = 16000 + ((r * 7 + s * 13) % 5000)
      if (F == "json")
        printf "{\"ts\":%.6f,\"host\":\"%s\",\"pid\":%d,\"tid\":%d,\"dev\":%d,\"level\":\"INFO\",\"fn\":\"ncclCommWindowRegister\",\"comm\":\"0x55d0c0a1b2c0\",\"cid\":\"%s\",\"rank\":%d,\"nranks\":%d,\"buff\":\"0x7f1200000000\",\"size\":1048576,\"flags\":1,\"win\":\"0x4a2000d048\",\"seq\":%d,\"result\":\"ncclSuccess\",\"us\":%.1f,\"decision\":\"register\",\"reason\":\"ok\",\"comm_windows\":%d,\"comm_bytes\":%d,\"msg\":\"registered\"}\n", 1764440000 + s + r / 1e6, h, pid, pid, d, cid, r, N, s, us, s + 1, (s + 1) * 1048576 > f
      else
        printf "%s:%d:%d [%d] NCCLGUARD INFO fn=ncclCommWindowRegister comm=0x55d0c0a1b2c0 cid=%s rank=%d nranks=%d buff=0x7f1200000000 size=1048576 flags=1 win=0x4a2000d048 seq=%d result=ncclSuccess us=%.1f decision=register reason=ok comm_windows=%d comm_bytes=%d msg=\"registered\"\n", h, pid, pid, d, cid, r, N, s, us, s + 1, (s + 1) * 1048576 > f
    }
    close(f)
  }
}'
