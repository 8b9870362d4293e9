# Faults never become hangs or crashes (issue 12), against the fake NCCL, one process per rank
# (tests/progs/faults.c). Each case runs without ncclguard (what NCCL alone does) where that ends,
# and with it; the sanitizer variants run the same cases (a use after free is an ASan report).
. "$NG_ROOT/tests/lib.sh"
F=$PROGS/faults
# f NAME ARGS...: faults with ncclguard, logs at info in $T/NAME.*.log; sets $rc, $out, $secs
f() {
  n=$1; shift
  t0=$(date +%s%N)
  out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$n.%p.log" fake_run "$F" "$@" 2>"$T/$n.err"); rc=$?
  secs=$(( ($(date +%s%N) - t0) / 1000000000 ))
}
bare() { n=$1; shift; out=$(bare_run "$F" "$@" 2>"$T/$n.err"); rc=$?; }
logs() { cat "$T/$1".*.log 2>/dev/null; }
lhas() { logs "$1" | grep -Eq -- "$2"; }
why() { echo "rc=$rc ${secs:-?}s $(echo "$out" | tail -3 | tr '\n' ' ') | $(logs "$1" | grep WARN | head -2)"; }
nres() { echo "$out" | grep -c "RESULT $1"; }

# --- a late peer: inside the timeout both succeed, as with NCCL alone; past it every rank ends with
# an error within the bound (the late one too: it must not wait in NCCL for a peer that left) ---------
bare late-bare late --late 2 --timeout 20
[ $rc = 0 ] && [ "$(nres ok)" = 2 ] && pass late-peer-succeeds-without || fail late-peer-succeeds-without "rc=$rc $out"
NCCLGUARD_TIMEOUT=6 f late-in late --late 2 --timeout 20
[ $rc = 0 ] && [ "$(nres ok)" = 2 ] && pass late-peer-within-timeout-succeeds || fail late-peer-within-timeout-succeeds "$(why late-in)"
NCCLGUARD_TIMEOUT=2 f late-out late --late 4 --timeout 25
# an error on each rank, not a hang nor a crash: both rank processes exited 1 (a signal or a sanitizer's
# code would show as "killed by signal" or another exit status; the parent then also exits 1)
[ $rc = 1 ] && [ "$(nres fail)" = 2 ] && [ "$(echo "$out" | grep -c '^faults: rank process [0-9]* exited 1$')" = 2 ] \
  && [ "$secs" -le 12 ] && lhas late-out 'reason=timeout' \
  && pass late-peer-past-timeout-bounded-error || fail late-peer-past-timeout-bounded-error "$(why late-out)"
# the channel was never made here (the late peer's split came after this rank gave it up): the split is an
# exchange of the communicator's own, left pending on the late rank, so the communicator itself is stopped
lhas late-out 'revoked by ncclguard .timeout before its agreement channel existed' \
  && pass timeout-before-channel-stops-communicator || fail timeout-before-channel-stops-communicator "$(why late-out)"
# a revoke ncclguard did not see (NCCL's own pncclCommRevoke) on rank 0, then every rank registers: the same
# outcome as NCCL alone on every rank (ncclguard's rounds run on the channel, which the revoke did not touch)
bare hidden-revoke-bare hidden-revoke --timeout 20
hb=$(echo "$out" | grep -o 'RESULT [a-z]* rank=[0-9] reg=[A-Za-z]* win=[a-z]*' | sort | tr '\n' ' ')
NCCLGUARD_TIMEOUT=3 f hidden-revoke hidden-revoke --timeout 20
hg=$(echo "$out" | grep -o 'RESULT [a-z]* rank=[0-9] reg=[A-Za-z]* win=[a-z]*' | sort | tr '\n' ' ')
# (NCCL alone registers on both ranks; with ncclguard the split of the channel on the revoked communicator may
# find its exchange ended by the revoke: then both ranks end with an error within the bound, the same on both)
[ -n "$hb" ] && [ "$secs" -le 8 ] \
  && { [ "$hg" = "$hb" ] || [ "$(echo "$out" | grep -c 'RESULT ok rank=[01] reg=ncclSystemError win=null')" = 2 ]; } \
  && pass hidden-revoke-bounded-one-outcome || fail hidden-revoke-bounded-one-outcome "alone: $hb | with: $hg $(why hidden-revoke)"
# the late rank's split of the channel stays blocked in NCCL (its peer left): it is abandoned, and the
# application's ncclCommAbort of that communicator does not reach NCCL under it
lhas late-out 'ncclCommSplit of the agreement channel did not return within' \
  && lhas late-out 'fn=ncclCommAbort .*result=ncclSuccess .*decision=noop reason=comm_broken msg="a call ncclguard made on this communicator is still blocked inside NCCL' \
  && pass late-peer-stuck-split-abandoned-comm-not-freed || fail late-peer-stuck-split-abandoned-comm-not-freed "$(logs late-out | grep -E 'WARN' | head -4)"
# without revoke (NCCL < 2.28.7, the fake-legacy build): still bounded on every rank
NCCLGUARD_TIMEOUT=2 FAKE="$B/fake-legacy" f late-legacy late --late 4 --timeout 25
[ $rc = 1 ] && [ "$(nres fail)" = 2 ] && [ "$(echo "$out" | grep -c '^faults: rank process [0-9]* exited 1$')" = 2 ] \
  && [ "$secs" -le 12 ] && ! lhas late-legacy 'revoked' \
  && pass late-peer-past-timeout-bounded-without-revoke || fail late-peer-past-timeout-bounded-without-revoke "$(why late-legacy)"

# --- ncclCommAbort from another thread while the registration waits for a peer that never comes --------
bare abort-bare abort --abort-ms 500 --timeout 20
[ $rc = 0 ] && pass abort-during-registration-errors-without || fail abort-during-registration-errors-without "rc=$rc $out"
NCCLGUARD_TIMEOUT=30 f abort abort --abort-ms 500 --timeout 20
[ $rc = 0 ] && [ "$secs" -le 10 ] && lhas abort 'aborted or destroyed during the round' && ! grep -q 'ERROR: AddressSanitizer' "$T/abort.err" \
  && pass abort-during-agreement-clean-error || fail abort-during-agreement-clean-error "$(why abort) $(head -3 "$T/abort.err")"

# --- any number of registrations in one group (NCCL: 65 of 65; here 1000) ---------------------------------
bare many-bare many --windows 1000 --timeout 60
[ $rc = 0 ] && echo "$out" | grep -q 'set=1000' && pass windows-1000-in-group-without || fail windows-1000-in-group-without "rc=$rc $out"
f many many --windows 1000 --timeout 60
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'set=1000')" = 2 ] && [ "$(logs many | grep -c 'decision=register')" = 2000 ] \
  && pass windows-1000-in-group || fail windows-1000-in-group "$(why many)"

# --- a degraded window does not block a device communicator once it is deregistered --------------------
f dd degrade-devcomm --timeout 20
[ $rc = 0 ] && [ "$(nres ok)" = 2 ] && lhas dd 'decision=degrade reason=not_vmm' && pass degraded-then-devcomm || fail degraded-then-devcomm "$(why dd)"
# ... and a destroyed device communicator lets windows degrade again (ncclDevCommDestroy is wrapped)
f dcd devcomm-destroy --timeout 20
[ $rc = 0 ] && [ "$(nres ok)" = 2 ] && pass devcomm-destroyed-then-degrade || fail devcomm-destroyed-then-degrade "$(why dcd)"

# --- ncclGroupSimulateEnd ends the group: its registration is done, the next one is not queued ---------------
# the queued registration was performed: every rank's window written (win1=set), ncclguard's log line
# for it (seq=0) says register with a non-NULL window, and the fake NCCL saw two successful
# registrations per rank (FAKE_NCCL_TRACE); a simulate end that dropped the queue fails all three
FAKE_NCCL_TRACE=1 f sim simulate --timeout 20
[ $rc = 0 ] && [ "$(nres ok)" = 2 ] \
  && [ "$(echo "$out" | grep -Ec 'RESULT ok rank=[01] first=ncclSuccess win1=set simulate_end=ncclSuccess second=ncclSuccess win2=set$')" = 2 ] \
  && [ "$(logs sim | grep -Ec 'fn=ncclCommWindowRegister .* win=0x[0-9a-f]*[1-9a-f][0-9a-f]* seq=0 result=ncclSuccess .*decision=register reason=ok')" = 2 ] \
  && [ "$(grep -Ec '^fake-nccl [0-9:]+ ncclCommWindowRegister\(.*\*win=0x[0-9a-f]*[1-9a-f][0-9a-f]* flags=1\) -> ncclSuccess$' "$T/sim.err")" = 4 ] \
  && pass group-simulate-end-ends-group || fail group-simulate-end-ends-group "$(why sim) $(grep -c 'ncclCommWindowRegister(' "$T/sim.err") registrations in the fake"

# --- a suspended communicator (ncclCommSuspend, 2.29.7+) cannot be used: no agreement round on it; its
# registration goes to NCCL as without ncclguard, and after ncclCommResume everything works again
bare susp-bare suspend --timeout 20
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok.*while_suspended=ncclSuccess')" = 2 ] && pass suspend-without \
  || fail suspend-without "rc=$rc $out"
f susp suspend --timeout 20
[ $rc = 0 ] && [ "$(echo "$out" | grep -c 'RESULT ok.*while_suspended=ncclSuccess win2=set resume=ncclSuccess after=ncclSuccess win3=set')" = 2 ] \
  && [ "$(logs susp | grep -c 'reason=comm_suspended')" = 2 ] && [ "$(logs susp | grep -c 'fn=ncclCommResume.*result=ncclSuccess')" = 2 ] \
  && pass suspended-comm-gets-no-round || fail suspended-comm-gets-no-round "$(why susp)"
# the NULL window NCCL hands out while the communicator is suspended (no symmetric support: NCCL 2.29+ answers
# NULL windows) counts as every other, so giving it back leaves the count of the two still held: the device
# communicator is refused naming 2 (at eb3cf18 it was not counted but its deregistration took one away: 1,
# and with one NULL window held by the application the count would reach 0)
FAKE_CUDA_DEVICES=2 FAULTS_SUSPEND_DEVCOMM=1 FAKE_NCCL_VERSION=23007 FAKE_NCCL_NO_SYMMETRIC=1 f suspn suspend --timeout 20
[ "$(echo "$out" | grep -c 'DEVCOMM .*dereg2=ncclSuccess devcomm=ncclInvalidUsage')" = 2 ] \
  && [ "$(logs suspn | grep -c 'fn=ncclDevCommCreate .*reason=degraded_windows msg="2 window(s) of this communicator')" = 2 ] \
  && pass suspended-null-window-counted || fail suspended-null-window-counted "$(why suspn) $(logs suspn | grep 'fn=ncclDevCommCreate' | head -1 | cut -c1-200)"
# ... but not one registered inside an application group, whose *win NCCL writes only at the group's end (here
# a window: no NULL window held, the device communicator is NCCL's to answer; counted, it was refused)
FAKE_CUDA_DEVICES=2 FAULTS_SUSPEND_DEVCOMM=1 FAULTS_SUSPEND_GROUP=1 FAKE_NCCL_VERSION=23007 f suspg suspend --timeout 20
[ "$(echo "$out" | grep -c 'DEVCOMM .*win2=set')" = 2 ] && ! lhas suspg 'reason=degraded_windows' \
  && [ "$(logs suspg | grep -c 'fn=ncclDevCommCreate .*decision=pass')" = 2 ] \
  && pass suspended-window-in-group-not-counted || fail suspended-window-in-group-not-counted "$(why suspg) $(logs suspg | grep 'fn=ncclDevCommCreate' | head -1 | cut -c1-200)"

# --- a CUDA library that cannot be loaded: a WARN naming what happens, and the ranks still agree ---------------
NG=$PROGS/ngtest
out=$(NCCLGUARD_CUDA_LIB=/nonexistent/libcuda.so.1 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/cl.%p.log" \
      fake_run "$NG" --alloc cuda0 --timeout 25 2>&1); rc=$?
[ $rc = 0 ] && lhas cl 'NCCLGUARD_CUDA_LIB=/nonexistent/libcuda.so.1 cannot be loaded .*using libcuda.so.1 instead' \
  && [ "$(logs cl | grep -c 'decision=degrade')" = 2 ] && pass bad-cuda-lib-warns-and-still-agrees \
  || fail bad-cuda-lib-warns-and-still-agrees "rc=$rc $(echo "$out" | tail -2) $(logs cl | grep WARN | head -2)"

# --- two copies of libnccl in one process (an old one first, a newer one after): every function from
# the first; a timeout must not call the second copy's ncclCommRevoke on the first one's communicator
out=$(NCCLGUARD_TIMEOUT=2 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/two.%p.log" fake_run "$PROGS/two_nccl" \
      "$B/fake-legacy/libnccl.so.2" "$FAKE/libnccl.so.2" 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT reg=2' && lhas two 'come from .*fake-legacy/libnccl.so.2' && ! lhas two 'revoked by ncclguard' \
  && pass two-libnccl-copies-not-mixed || fail two-libnccl-copies-not-mixed "rc=$rc $out $(logs two | grep -E 'resolve|revoked' | head -2)"

# --- the fault soak: registration cycles, each with a random fault (late peer, abort of every rank,
# bad buffer or size 0 on one rank): no hang, the same outcome on every rank, descriptors flat; memory
# flat where no communicator is recreated (the fake keeps every communicator it made) -----------------
case "${NG_VARIANT:-plain}" in plain) C=10000 ;; *) C=2000 ;; esac
NG_TIMEOUT=300 NCCLGUARD_TIMEOUT=5 NCCLGUARD_LOG=warn f soak cycles --cycles "$C" --seed 7 --timeout 280
[ $rc = 0 ] && echo "$out" | grep -q 'diverged=0' && pass "fault-soak-$C-cycles ($(echo "$out" | grep 'rank=0' | sed 's/.*RESULT //'))" \
  || fail "fault-soak-$C-cycles" "$(why soak)"
# (memory only in the plain variant: ASan's quarantine holds freed memory by design)
case "${NG_VARIANT:-plain}" in plain) mg="--max-growth-kb 2048" ;; *) mg="" ;; esac
NG_TIMEOUT=300 NCCLGUARD_TIMEOUT=5 NCCLGUARD_LOG=warn f soak2 cycles --cycles "$C" --seed 9 --faults 0xd $mg --timeout 280
[ $rc = 0 ] && pass "fault-soak-memory-flat ($(echo "$out" | grep 'rank=0' | grep -o 'rss_kb=[^ ]*'))" || fail fault-soak-memory-flat "$(why soak2)"

# the fault soak under ThreadSanitizer (plain variant only: its own build of library and fakes)
if [ "${NG_VARIANT:-plain}" = plain ]; then
  TB="$NG_ROOT/build-tsan"
  if make -s -C "$NG_ROOT" BUILD="$TB" SAN=tsan all testbins >"$T/tsan-build.log" 2>&1; then
    tsan_lib=$(${CC:-cc} -print-file-name=libtsan.so)
    out=$(TSAN_OPTIONS="exitcode=97:halt_on_error=0:report_signal_unsafe=0:suppressions=$NG_ROOT/tests/fuzz/tsan.supp" \
          NCCLGUARD_TIMEOUT=10 LD_LIBRARY_PATH="$TB/fake" LD_PRELOAD="$tsan_lib:$TB/libncclguard.so" \
          timeout -k 2 280 "$TB/progs/faults" cycles --cycles 1000 --seed 11 --timeout 260 2>&1); rc=$?
    n=$(echo "$out" | grep -c 'WARNING: ThreadSanitizer')
    [ $rc = 0 ] && [ "$n" = 0 ] && echo "$out" | grep -q 'diverged=0' && pass "fault-soak-tsan-1000-cycles" \
      || fail fault-soak-tsan-1000-cycles "rc=$rc reports=$n $(echo "$out" | grep -A4 'WARNING: ThreadSanitizer' | grep '#0' | head -3 | tr '\n' ' ') $(echo "$out" | grep RESULT | tail -2 | tr '\n' ' ')"
  else
    fail fault-soak-tsan-1000-cycles "TSan build failed: $(tail -3 "$T/tsan-build.log")"
  fi
fi

# --- a registration stuck inside NCCL on every rank (FAKE_NCCL_REG_STALL=1: the first registration's exchange
# never completes, as in sglang#36943 on 2.29.7; NCCL's waits there poll the abort flag): NCCL alone hangs in
# ncclCommWindowRegister on every rank; with ncclguard every rank names the call, its step, how long, and that
# every rank had reached it, and returns an error within the bound (NCCL's registration is watched for
# NCCLGUARD_TIMEOUT plus its grace, T/4 and at least 1 s: a peer may come that much later, docs/DESIGN.md)
out=$(FAKE_NCCL_REG_STALL=1 FAKE_NCCL_VERSION=22907 bare_run "$PROGS/ngtest" --timeout 6 2>"$T/stuck-bare.err"); rc=$?
[ "$(echo "$out" | grep -c 'RESULT fail hang in ncclCommWindowRegister')" = 2 ] && pass stuck-in-register-hangs-without \
  || fail stuck-in-register-hangs-without "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
t0=$(date +%s)
out=$(FAKE_NCCL_REG_STALL=1 FAKE_NCCL_VERSION=22907 NCCLGUARD_TIMEOUT=2 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/stuck.%p.log" \
  fake_run "$PROGS/ngtest" --expect-reg any --timeout 20 2>"$T/stuck.err"); rc=$?
secs=$(( $(date +%s) - t0 ))
[ "$(echo "$out" | grep -c 'RESULT .*reg=ncclSystemError win=null')" = 2 ] && [ "$secs" -le 12 ] \
  && [ "$(logs stuck | grep -c 'WARN fn=agree msg="communicator .* revoked by ncclguard (ncclCommWindowRegister, step 0, has not returned after 3.[0-9] s (NCCLGUARD_TIMEOUT); every rank had reached it')" = 2 ] \
  && [ "$(logs stuck | grep -c 'WARN fn=stuck comm=.* seq=0 us=[0-9.]* call=ncclCommWindowRegister msg=')" = 2 ] \
  && pass stuck-in-register || fail stuck-in-register "rc=$rc ${secs}s $(echo "$out" | grep RESULT | tr '\n' ' ') $(logs stuck | grep WARN | head -2)"
