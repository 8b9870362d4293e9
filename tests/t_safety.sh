# No silent wrong results (issue 19): a collective ncclguard issues runs on every rank, or the
# communicator is stopped. Each case is a fault on one rank around a registration, followed by the
# application's own all-reduce (tests/progs/wrongdata.c, two processes against the fake NCCL): it must be
# correct or an error on every rank, never wrong data. At e32e22c the oom and slow cases gave wrong data,
# settings gave different outcomes per rank and stalewin left *win set on an error (checked by hand
# with that commit's library and these programs).
. "$NG_ROOT/tests/lib.sh"
W=$PROGS/wrongdata
# w NAME ARGS...: wrongdata with ncclguard, logs at info in $T/NAME.*.log; sets $rc, $out
w() {
  n=$1; shift
  out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$n.%p.log" fake_run "$W" "$@" 2>"$T/$n.err"); rc=$?
}
logs() { cat "$T/$1".*.log 2>/dev/null; }
res() { echo "$out" | grep "RESULT rank=$1 " | sed 's/.*RESULT //'; }
why() { echo "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ') | $(logs "$1" | grep WARN | head -2 | cut -c1-300)"; }
nowrong() { ! echo "$out" | grep -q 'allreduce=wrong' && [ "$(echo "$out" | grep -c RESULT)" = 2 ]; }

# 1. rank 1 cannot allocate the agreement scratch: it gives the communicator up (revoked), its peer's
# round times out and revokes too; both applications' next all-reduce fails instead of pairing with the round
NCCLGUARD_TIMEOUT=3 w oom oom --wait 8
nowrong && res 0 | grep -q 'allreduce=error' && res 1 | grep -q 'allreduce=error' \
  && res 0 | grep -q 'win=null' && res 1 | grep -q 'win=null' \
  && logs oom | grep -q 'cannot set up the agreement buffer' && logs oom | grep -q 'revoked by ncclguard' \
  && pass oom-scratch-one-rank-error-not-wrong-data || fail oom-scratch-one-rank-error-not-wrong-data "$(why oom)"

# 2. rank 1 held 2.5 s inside NCCL's registration (past T/2): whether a round runs never depends on a
# rank's own timing, so no rank runs the outcome round alone
NCCLGUARD_TIMEOUT=4 WRONGDATA_DELAY_MS=2500 w slow slow --wait 8
nowrong && res 0 | grep -q 'reg=ncclSuccess win=set allreduce=ok' && res 1 | grep -q 'reg=ncclSuccess win=set allreduce=ok' \
  && ! logs slow | grep -q 'registration outcome' \
  && pass slow-rank-no-lone-outcome-round || fail slow-rank-no-lone-outcome-round "$(why slow)"

# 3. per-rank settings that shape the decision: one agreed refusal naming the variable, on every rank;
# the communicator stays in step (the application's all-reduce is correct)
NCCLGUARD_TIMEOUT=5 w settings settings --wait 8
[ "$(echo "$out" | grep -c 'reg=ncclInvalidUsage win=null allreduce=ok')" = 2 ] \
  && [ "$(logs settings | grep -c 'reason=settings_mismatch')" = 2 ] \
  && logs settings | grep -q 'different settings: NCCLGUARD_ON_FAILURE (values 0..1)' \
  && pass mixed-settings-one-outcome-named || fail mixed-settings-one-outcome-named "$(why settings)"

# 4. NCCL wrote a window on rank 0, then the watchdog revoked the communicator: the error leaves *win NULL
# (the application's cleanup would deregister a freed window); the peer's all-reduce never gets wrong data
NCCLGUARD_TIMEOUT=2 WRONGDATA_DELAY_MS=4000 w stalewin stalewin --wait 4
nowrong && res 0 | grep -q 'win=null' && ! res 0 | grep -q 'reg=ncclSuccess' \
  && pass error-leaves-win-null || fail error-leaves-win-null "$(why stalewin)"

# 5. agreement resources of destroyed communicators past the pool are freed (issue 19, case 6): 300
# one-rank communicators alive per cycle, each with its own stream (a thread in the fakes)
out=$(NCCLGUARD_LOG=warn fake_run "$PROGS/manycomm" -n 300 -c 5 2>"$T/many.err"); rc=$?
t1=$(echo "$out" | sed -n 's/.*cycle=1 threads=\([0-9]*\).*/\1/p'); t4=$(echo "$out" | sed -n 's/.*cycle=4 threads=\([0-9]*\).*/\1/p')
[ $rc = 0 ] && [ -n "$t1" ] && [ -n "$t4" ] && [ "$t4" -le "$t1" ] \
  && pass "pool-overflow-freed (threads $t1 -> $t4 over 300 comms x 5 cycles)" \
  || fail pool-overflow-freed "rc=$rc $(echo "$out" | tr '\n' ' ' | cut -c1-400)"
