#!/bin/sh
# Hardening (docs/HARDENING.md): environment read with secure_getenv (setuid programs ignore it),
# log files (no symbolic links, never world-writable, no hang on a FIFO), fork, leaks under a
# thread-per-communicator stress, and in the plain variant only: ThreadSanitizer, valgrind
# memcheck over the main scenarios, and the soak (memory and descriptors stay flat).
# NG_SOAK_REG / NG_SOAK_COMM: cycles of the soak (CI default 20000 / 2000; the full figures in
# docs/HARDENING.md come from 100000 / 10000).
. "$(dirname "$0")/lib.sh"
plain=0; [ "${NG_VARIANT:-plain}" = plain ] && plain=1
STRESS="$B/fuzz/stress_threads"

# ---- environment: secure_getenv only ------------------------------------------------------------
und=$(nm -D --undefined-only "$SHIM" | awk '{print $NF}' | sed 's/@.*//')
if echo "$und" | grep -qx secure_getenv && ! echo "$und" | grep -qx getenv; then pass env-secure-getenv-only
else fail env-secure-getenv-only "imports: $(echo "$und" | grep -i getenv | tr '\n' ' ')"; fi

# A setuid-root copy of a probe run by another user (AT_SECURE): the variables must be ignored.
# Needs root, setpriv and a file system that honours the setuid bit.
cc -o "$T/setuid_probe" "$NG_ROOT/tests/fuzz/setuid_probe.c" -ldl 2>"$T/cc.err"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && [ -x "$T/setuid_probe" ]; then
  chmod 755 "$T"; mkdir -m 1777 "$T/logs"
  NCCLGUARD_DUMP_CONFIG=1 NCCLGUARD_LOG_FILE="$T/logs/plain.log" "$T/setuid_probe" "$SHIM" >"$T/p1.out" 2>&1
  cp "$T/setuid_probe" "$T/suid_probe" && chown root "$T/suid_probe" && chmod 4755 "$T/suid_probe"
  NCCLGUARD_DUMP_CONFIG=1 NCCLGUARD_LOG_FILE="$T/logs/suid.log" \
    setpriv --reuid=65534 --regid=65534 --clear-groups "$T/suid_probe" "$SHIM" >"$T/p2.out" 2>&1
  if ! has "$T/p2.out" 'euid=0'; then
    echo "# skip env-setuid-ignored: the setuid bit had no effect here (nosuid mount?): $(cat "$T/p2.out")"
  elif has "$T/logs/plain.log" 'fn=config' && has "$T/logs/plain.log" 'null_comm' && [ ! -e "$T/logs/suid.log" ] \
       && ! has "$T/p2.out" 'fn=config' && has "$T/p2.out" 'null_comm'; then
    pass env-setuid-ignored
  else
    fail env-setuid-ignored "plain: $(cat "$T/logs/plain.log" 2>/dev/null | head -2) setuid: $(cat "$T/p2.out") $(ls "$T/logs")"
  fi
else
  echo "# skip env-setuid-ignored: needs root and setpriv"
fi

# ---- log files ----------------------------------------------------------------------------------
run1() { fake_run "$PROGS/ngtest" -m thread -n 1 "$@"; }
( umask 000; NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/umask0.log" run1 >/dev/null 2>&1 )
m=$(stat -c %a "$T/umask0.log" 2>/dev/null)
case "$m" in
  ?[0145][0145]) has "$T/umask0.log" 'fn=ncclCommWindowRegister' && pass "log-not-world-writable (mode $m with umask 000)" \
                   || fail log-not-world-writable "no registration line in the log" ;;
  *) fail log-not-world-writable "mode ${m:-missing} with umask 000" ;;
esac
# a dangling symbolic link: neither followed nor its target created
ln -s "$T/dangling-target" "$T/dangling.log"
if NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/dangling.log" run1 >"$T/dl.out" 2>&1 && [ ! -e "$T/dangling-target" ] \
   && has "$T/dl.out" 'cannot open NCCLGUARD_LOG_FILE' && has "$T/dl.out" 'RESULT ok'; then pass log-dangling-symlink-refused
else fail log-dangling-symlink-refused "$(tail -3 "$T/dl.out")"; fi
# a FIFO nobody reads: opening it must not block the job (it did: open(O_WRONLY) waits for a reader)
mkfifo "$T/fifo.log"
NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/fifo.log" NG_TIMEOUT=15 run1 >"$T/fifo.out" 2>&1; rc=$?
if [ $rc = 0 ] && has "$T/fifo.out" 'RESULT ok' && has "$T/fifo.out" 'cannot open NCCLGUARD_LOG_FILE'; then pass log-fifo-no-hang
else fail log-fifo-no-hang "exit $rc (124 = hang): $(tail -2 "$T/fifo.out" | tr '\n' ' ')"; fi

# ---- fork ---------------------------------------------------------------------------------------
# (under TSan: its runtime ends a child that starts a thread after a fork of a multi-threaded process unless
# told not to, and this child makes a communicator and registers, which starts threads; races are still
# reported)
daf=""; [ "${NG_VARIANT:-plain}" = tsan ] && daf="TSAN_OPTIONS=${TSAN_OPTIONS:-}:die_after_fork=0"
for busy in "" --busy; do
  if env $daf LD_LIBRARY_PATH="$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" timeout -k 2 "$NG_TIMEOUT" \
       "$PROGS/fork_after" -n 2 $busy --timeout 20 >"$T/fork.out" 2>&1 && has "$T/fork.out" 'fork_after child: RESULT ok' \
     && has "$T/fork.out" 'fork_after parent: RESULT ok'; then pass "fork-child-uses-library${busy:+ $busy}"
  else fail "fork-child-uses-library${busy:+ $busy}" "$(grep RESULT "$T/fork.out" | tr '\n' ' ')"; fi
done
# a child that never calls NCCL (one _exit, one exit with destructors) leaves no trace in the log
mkdir "$T/flog"
NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/flog/one.log" fake_run "$STRESS" -t 2 -c 4 -k 2 -f >"$T/f1.out" 2>&1; r1=$?
NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/flog/per.%p.log" fake_run "$STRESS" -t 2 -c 4 -k 2 -f >"$T/f2.out" 2>&1; r2=$?
kids=$(grep -ho 'idle child pid=[0-9]*' "$T/f1.out" "$T/f2.out" | sed 's/.*=//')
bad=""
for k in $kids; do
  grep -q ":$k:" "$T/flog/one.log" && bad="$bad line-of-$k"
  [ -e "$T/flog/per.$k.log" ] && bad="$bad file-of-$k"
done
if [ $r1 = 0 ] && [ $r2 = 0 ] && [ "$(echo $kids | wc -w)" = 4 ] && [ -z "$bad" ] && has "$T/flog/one.log" 'fn=summary'; then
  pass fork-idle-child-clean
else fail fork-idle-child-clean "exit $r1/$r2 children '$kids'$bad"; fi

# ---- a registration queued in a group whose communicator is destroyed in that same group: at
# group end NCCL must not be handed the destroyed communicator (real NCCL would use freed memory) ----
FAKE_NCCL_TRACE=1 fake_run "$STRESS" -g >"$T/gd.out" 2>&1
c=$(sed -n 's/^stress: destroying \(0x[0-9a-f]*\) inside the group$/\1/p' "$T/gd.out")
late=$(sed -n "/ncclCommDestroy(comm=$c)/,\$p" "$T/gd.out" | grep '^fake-nccl' | grep "$c" | grep -v 'ncclCommDestroy\| internal$')
if [ -n "$c" ] && [ -z "$late" ] && has "$T/gd.out" 'groupend=4' && has "$T/gd.out" 'reason=comm_destroyed'; then
  pass group-destroy-then-end
else fail group-destroy-then-end "comm ${c:-?}; calls after destroy: $(echo "$late" | head -2 | tr '\n' ' ') $(grep '^stress:' "$T/gd.out" | tr '\n' ' ')"; fi

# ---- leaks under concurrency: threads, descriptors (the agreement stream of every destroyed
# communicator used to stay: one stream, its worker thread in the fake, and scratch memory each) ----
if fake_run "$STRESS" -t 8 -c 100 -k 100 >"$T/st.out" 2>&1; then
  l=$(grep '^stress:' "$T/st.out" | tail -1)
  t0=$(echo "$l" | sed -E 's/.*tasks_start=([0-9]+).*/\1/'); t1=$(echo "$l" | sed -E 's/.*tasks_end=([0-9]+).*/\1/')
  f0=$(echo "$l" | sed -E 's/.*fds_start=([0-9]+).*/\1/'); f1=$(echo "$l" | sed -E 's/.*fds_end=([0-9]+).*/\1/')
  # allowed: the 8 live communicators' streams and the pooled ones, one worker each (<= 3 per thread)
  if [ "$t1" -le $((t0 + 24)) ] && [ "$f1" -le "$f0" ]; then pass "stress-no-thread-or-fd-leak (tasks $t0->$t1, fds $f0->$f1, 800 comms)"
  else fail stress-no-thread-or-fd-leak "$l"; fi
else fail stress-no-thread-or-fd-leak "$(tail -3 "$T/st.out" | tr '\n' ' ')"; fi

[ $plain = 1 ] || exit 0

# ---- ThreadSanitizer: thread per communicator, concurrent registration and logging ------------
TB="$NG_ROOT/build-tsan"
if make -s -C "$NG_ROOT" BUILD="$TB" SAN=tsan all testbins >"$T/tsan-build.log" 2>&1; then
  tsan_lib=$(${CC:-cc} -print-file-name=libtsan.so)
  nrep=0; bad=""
  for args in "-t 8 -c 100 -k 20 -f" "-t 8 -c 20 -k 5 -0"; do
    TSAN_OPTIONS="exitcode=97:halt_on_error=0:report_signal_unsafe=0:suppressions=$NG_ROOT/tests/fuzz/tsan.supp" \
    NCCLGUARD_LOG=trace NCCLGUARD_LOG_FILE="$T/tsan.log" LD_LIBRARY_PATH="$TB/fake" LD_PRELOAD="$tsan_lib:$TB/libncclguard.so" \
      timeout -k 2 300 "$TB/fuzz/stress_threads" $args >"$T/tsan.out" 2>&1 || bad="$bad [$args: exit $?]"
    n=$(grep -c 'WARNING: ThreadSanitizer' "$T/tsan.out"); nrep=$((nrep + n))
    [ "$n" = 0 ] || bad="$bad [$args: $(grep -A3 'WARNING: ThreadSanitizer' "$T/tsan.out" | grep -E '#0' | head -2 | tr '\n' ' ')]"
  done
  TSAN_OPTIONS="exitcode=97:halt_on_error=0:report_signal_unsafe=0:suppressions=$NG_ROOT/tests/fuzz/tsan.supp" \
  LD_LIBRARY_PATH="$TB/fake" LD_PRELOAD="$tsan_lib:$TB/libncclguard.so" \
    timeout -k 2 300 "$TB/progs/ngtest" -m thread -n 8 --iters 5 --twice --split >"$T/tsan2.out" 2>&1 || bad="$bad [ngtest: exit $?]"
  n=$(grep -c 'WARNING: ThreadSanitizer' "$T/tsan2.out"); nrep=$((nrep + n))
  if [ -z "$bad" ] && [ $nrep = 0 ]; then pass "tsan-thread-per-rank (0 reports)"
  else fail tsan-thread-per-rank "$nrep reports:$bad"; fi
else fail tsan-thread-per-rank "tsan build failed: $(tail -3 "$T/tsan-build.log" | tr '\n' ' ')"; fi

# ---- valgrind memcheck over the main scenarios (thread mode: valgrind and many processes are slow) ----
if command -v valgrind >/dev/null; then
  vg() {
    env LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$SHIM" timeout -k 2 300 valgrind -q --error-exitcode=42 --leak-check=full \
      --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-fds=no "$@"
  }
  # each line: the exit status ngtest must give (its own checks: 0 = every rank got what it expects),
  # then its arguments; valgrind's error exit code (42) is none of ngtest's (0, 1, 2, 77, 124, 128+)
  nbad=0; nrun=0; why=""
  while read -r want args; do
    [ -n "$want" ] || continue
    nrun=$((nrun + 1))
    vg "$PROGS/ngtest" -m thread $args >"$T/vg.out" 2>&1; rc=$?
    if [ $rc = 42 ] || grep -q '^==[0-9]*== .*\(Invalid\|uninitialised\|definitely lost\)' "$T/vg.out"; then
      nbad=$((nbad + 1)); why="$why [$args: $(grep -m2 '^==[0-9]*== [A-Z]' "$T/vg.out" | tr '\n' ' ')]"
    elif [ $rc != "$want" ]; then nbad=$((nbad + 1)); why="$why [$args: exit $rc, not $want: $(grep -m1 'RESULT fail' "$T/vg.out")]"; fi
  done <<SCEN
0 -n 2
0 -n 2 --twice --iters 3
0 -n 4 --split
0 -n 2 --reg-in-group
0 -n 2 --dereg-after-destroy
0 -n 2 --null-comm
0 -n 2 --null-win
0 -n 2 --zero-size --expect-reg any
0 -n 2 --alloc cuda
0 -n 2 --alloc cuda0
0 -n 2 --offset 1000
0 -n 2 --nonblocking
0 -n 2 --nonblocking --wait-ready
0 -n 2 --config
0 -n 2 --devcomm
0 -m group -n 3
SCEN
  # --capture is left out: with the fake of 2026-11-29 18:35 it fails without ncclguard too (the
  # fake's capture model is being reworked) and under valgrind the peer rank then waits forever.
  nrun=$((nrun + 1))
  vg "$STRESS" -t 4 -c 50 -k 10 -f >"$T/vg.out" 2>&1 || { nbad=$((nbad + 1)); why="$why [stress: $(grep -m2 '^==[0-9]*== [A-Z]' "$T/vg.out" | tr '\n' ' ')]"; }
  nrun=$((nrun + 1))
  vg --trace-children=no "$PROGS/fork_after" -n 2 --timeout 60 >"$T/vg.out" 2>&1 || { nbad=$((nbad + 1)); why="$why [fork_after: $(grep -m2 '^==[0-9]*== [A-Z]' "$T/vg.out" | tr '\n' ' ')]"; }
  if [ $nbad = 0 ]; then pass "valgrind-memcheck ($nrun programs, 0 errors)"; else fail valgrind-memcheck "$nbad of $nrun:$why"; fi
else
  echo "# skip valgrind-memcheck: valgrind not installed (make test-deps)"
fi

# ---- soak: register/deregister and communicator cycles; memory and descriptors stay flat ------
REG=${NG_SOAK_REG:-20000} COMM=${NG_SOAK_COMM:-2000}
field() { grep "soak: $2 " "$1" | sed -E 's/.*VmRSS=([0-9]+) kB fds=([0-9]+).*/\1 \2/'; }
NG_TIMEOUT=600 bare_run "$PROGS/soak" -n 1 -c "$REG" -k "$COMM" >"$T/soak-bare.out" 2>&1
NG_TIMEOUT=600 fake_run "$PROGS/soak" -n 1 -c "$REG" -k "$COMM" >"$T/soak.out" 2>&1; rc=$?
NG_TIMEOUT=600 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/soak.log" fake_run "$PROGS/soak" -n 1 -c "$REG" -k "$COMM" >"$T/soak-log.out" 2>&1; rcl=$?
set -- $(field "$T/soak.out" start) $(field "$T/soak.out" after-register-cycles) $(field "$T/soak.out" end)
s_rss=$1 s_fd=$2 a_rss=$3 a_fd=$4 e_rss=$5 e_fd=$6
set -- $(field "$T/soak-bare.out" start) $(field "$T/soak-bare.out" after-register-cycles) $(field "$T/soak-bare.out" end)
b_s=$1 b_a=$3 b_e=$5
if [ $rc = 0 ] && [ -n "$e_rss" ] && [ -n "$b_e" ]; then
  # the fake keeps every window and communicator (tombstones): ncclguard's share is the difference
  reg_extra=$(( (a_rss - s_rss) - (b_a - b_s) ))
  comm_extra=$(( (e_rss - a_rss) - (b_e - b_a) ))
  echo "# soak: reg $REG cycles: rss +$((a_rss - s_rss)) kB (fake alone +$((b_a - b_s))), comm $COMM cycles: rss +$((e_rss - a_rss)) kB (fake alone +$((b_e - b_a))); fds $s_fd/$a_fd/$e_fd"
  if [ $reg_extra -le 512 ] && [ $a_fd -le $s_fd ]; then pass "soak-register-cycles ($REG cycles, ncclguard +${reg_extra} kB over the fake, fds $s_fd->$a_fd)"
  else fail soak-register-cycles "ncclguard +$reg_extra kB over the fake alone, fds $s_fd->$a_fd"; fi
  # per destroyed communicator: a tombstone (the ring keeps 4096) and the fake's pages the agreement
  # collective touched; bound: 8 kB per cycle
  if [ $comm_extra -le $((COMM * 8)) ] && [ $e_fd -le $s_fd ]; then pass "soak-comm-cycles ($COMM cycles, ncclguard +${comm_extra} kB over the fake, fds $a_fd->$e_fd)"
  else fail soak-comm-cycles "ncclguard +$comm_extra kB over the fake alone for $COMM cycles, fds $a_fd->$e_fd"; fi
else
  fail soak-register-cycles "soak exit $rc: $(tail -2 "$T/soak.out" | tr '\n' ' ')"
  fail soak-comm-cycles "soak exit $rc"
fi
if [ $rcl = 0 ] && [ -s "$T/soak.log" ]; then
  sz=$(stat -c %s "$T/soak.log")
  echo "# soak log at info: $sz bytes for $REG + $COMM cycles ($((sz / (REG + COMM))) bytes per cycle, no size bound)"
  pass "soak-with-info-log ($sz bytes)"
else fail soak-with-info-log "exit $rcl"; fi
