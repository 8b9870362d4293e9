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

# 1. rank 1 cannot allocate the agreement scratch (no warm-up at creation, which would have allocated it): it
# gives its agreement up, its peer's round times out and gives up too; both registrations fail, and since the
# communicator ran no collective yet (its next one would wait for a peer that left), each rank stops it: the
# applications' next all-reduce fails instead of waiting or pairing
NCCLGUARD_WARMUP=never NCCLGUARD_TIMEOUT=3 w oom oom --wait 8
nowrong && res 0 | grep -q 'win=null allreduce=error' && res 1 | grep -q 'win=null allreduce=error' \
  && ! res 0 | grep -q 'reg=ncclSuccess' && ! res 1 | grep -q 'reg=ncclSuccess' \
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

# 4a. the application's own ncclCommRevoke of a communicator ncclguard's watchdog revoked already: success,
# as it would be alone (NCCL refuses a second revoke; ncclguard answers it without NCCL)
NCCLGUARD_TIMEOUT=2 WRONGDATA_DELAY_MS=4000 WRONGDATA_APP_REVOKE=1 w apprevoke stalewin --wait 4
nowrong && res 0 | grep -q 'revoke=ncclSuccess' && logs apprevoke | grep -q 'fn=ncclCommRevoke .*already revoked by ncclguard' \
  && pass app-revoke-after-guard-revoke-succeeds || fail app-revoke-after-guard-revoke-succeeds "$(why apprevoke)"

# 4a'. a destroy or finalize of a communicator already aborted never reaches NCCL (it would use freed memory):
# refused by ncclguard with a clean error
NCCLGUARD_TIMEOUT=5 WRONGDATA_END_TWICE=1 w endtwice settings --wait 8
[ "$(echo "$out" | grep -c 'abort=ncclSuccess destroy=ncclInvalidArgument finalize=ncclInvalidArgument')" = 2 ] \
  && [ "$(logs endtwice | grep -cE 'fn=ncclComm(Destroy|Finalize) .*decision=error reason=comm_destroyed')" = 4 ] \
  && pass end-of-life-after-abort-refused || fail end-of-life-after-abort-refused "$(why endtwice)"

# 4b. an application out of step (in one group rank 1 registers two windows, rank 0 one; NCCL alone: rank 1 waits
# in its second registration for ever): the first registration is a step both ranks run (registered on both),
# the second has no partner: rank 1's round times out (its agreement stopped) and its group returns that error,
# its first window rolled back for the application (*win NULL) while NCCL keeps it, as on rank 0 (the same
# places in the symmetric space on both ranks); the application's all-reduce is right on both
mm_saved=${FAKE_NCCL_MISMATCH_FILE:-}
export FAKE_NCCL_MISMATCH_FILE="$T/extra.mismatch"
NCCLGUARD_TIMEOUT=3 w extra extra --wait 8
export FAKE_NCCL_MISMATCH_FILE="$mm_saved"
nowrong && res 0 | grep -q 'reg=ncclSuccess win=set allreduce=ok' && res 1 | grep -q 'reg=ncclSystemError win=null allreduce=ok' \
  && [ "$(logs extra | grep -c 'fn=ncclCommWindowRegister .*rank=1 .*decision=error reason=\(timeout\|group_rollback\)')" = 2 ] \
  && [ ! -s "$T/extra.mismatch" ] \
  && pass out-of-step-bounded-error-consistent-windows || fail out-of-step-bounded-error-consistent-windows "$(why extra)"

# 4c. two communicators that share a rank (tests/progs/twocomm.c: A = {P0, P1}, B = {P0, P2}, P0 registering
# on both in one group, P1 on A alone, P2 on B alone): whether a round runs, a rollback and a round's status
# are each communicator's own, decided from what the ranks of THAT communicator know alike (a batch only
# shares rounds). Each case ends with the application's own all-reduce on each communicator
tw() { # NAME ARGS...: twocomm with ncclguard; sets $out, $rc
  n=$1; shift
  out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$n.%p.log" fake_run "$PROGS/twocomm" "$@" 2>"$T/$n.err"); rc=$?
}
tn() { echo "$out" | grep -c -- "$1"; }
twhy() { echo "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ') | $(logs "$1" | grep WARN | head -3 | cut -c1-260)"; }
# P0's A degrades (its buffer there is cudaMalloc memory) while its B registers; without revoke (2.27, 2.28.3)
# a go round precedes NCCL's registration, on B only: a go round on A, which P1 does not run, paired with P1's
# next all-reduce (wrong data on P1, none for P0's; at 161d693)
for v in 22703 22803; do
  FAKE_NCCL_VERSION=$v NCCLGUARD_TIMEOUT=3 tw go$v go --wait 4
  [ $rc = 0 ] && [ "$(tn 'comm=A warm=ok reg=ncclSuccess win=null ar=ok')" = 2 ] \
    && [ "$(tn 'comm=B warm=ok reg=ncclSuccess win=set ar=ok')" = 2 ] \
    && pass "two-comms-go-round-per-communicator-nccl-$v" || fail "two-comms-go-round-per-communicator-nccl-$v" "$(twhy go$v)"
done
# NCCLGUARD_ON_FAILURE=error, P0's B refused (cudaMalloc memory), A registered everywhere: ncclGroupEnd returns
# B's error on P0, and A's window stays there as on P1 (rolled back on P0 alone, the next window on A sat at
# another offset on each rank: garbage in the all-reduce in it, at 161d693)
for v in 22809 22903; do
  FAKE_NCCL_VERSION=$v NCCLGUARD_ON_FAILURE=error NCCLGUARD_TIMEOUT=3 tw rb$v rollback --wait 4
  [ $rc = 0 ] && [ "$(tn 'comm=A warm=ok reg=ncclInvalidArgument win=set ar=ok reg2=ncclSuccess win2=set ar2=ok')" = 1 ] \
    && [ "$(tn 'comm=A warm=ok reg=ncclSuccess win=set ar=ok reg2=ncclSuccess win2=set ar2=ok')" = 1 ] \
    && [ "$(tn 'comm=B warm=ok reg=ncclInvalidArgument win=null ar=skipped')" = 2 ] && ! logs rb$v | grep -q 'reason=group_rollback' \
    && pass "two-comms-rollback-per-communicator-nccl-$v" || fail "two-comms-rollback-per-communicator-nccl-$v" "$(twhy rb$v)"
done
# P2 comes to B past NCCLGUARD_TIMEOUT: B's part of P0's round times out, A's part of the same round completed
# on both of A's ranks and stands (at 161d693 P0 gave A up too: an error on A's both ranks)
for v in 22809 22703; do
  FAKE_NCCL_VERSION=$v NCCLGUARD_TIMEOUT=2 TWOCOMM_LATE_MS=4000 tw late$v late --wait 4
  [ $rc = 0 ] && [ "$(tn 'comm=A warm=ok reg=ncclSuccess win=set ar=ok')" = 1 ] \
    && [ "$(tn 'comm=A warm=ok reg=ncclSystemError win=set ar=ok')" = 1 ] \
    && [ "$(tn 'comm=B warm=ok reg=ncclSystemError win=null ar=skipped')" = 2 ] \
    && pass "two-comms-round-status-per-communicator-nccl-$v" || fail "two-comms-round-status-per-communicator-nccl-$v" "$(twhy late$v)"
done
# the NULL-window count follows the windows handed out (NCCLGUARD_NULL_WINDOW=error): a failed group hands out
# none (a degraded window rolled back with it), nor an error for NCCL's own NULL window, so ncclDevCommCreate
# afterwards is NCCL's to answer (success; at 161d693 refused, reason=degraded_windows)
FAKE_NCCL_VERSION=22809 NCCLGUARD_NULL_WINDOW=error NCCLGUARD_TIMEOUT=3 tw dc devcomm --wait 4
[ $rc = 0 ] && [ "$(tn 'reg=ncclInvalidArgument win=null devcomm=ncclSuccess reg2=ncclSuccess win2=set devcomm2=ncclSuccess ar=ok')" = 2 ] \
  && pass null-window-count-after-failed-group || fail null-window-count-after-failed-group "$(twhy dc)"
FAKE_NCCL_VERSION=22903 FAKE_NCCL_NO_SYMMETRIC=1 NCCLGUARD_NULL_WINDOW=error NCCLGUARD_TIMEOUT=3 tw dcn devcomm --wait 4
[ $rc = 0 ] && [ "$(tn 'devcomm=ncclSuccess reg2=ncclInvalidUsage win2=null devcomm2=ncclSuccess ar=ok')" = 2 ] \
  && pass null-window-count-nccl-null-window-error || fail null-window-count-nccl-null-window-error "$(twhy dcn)"

# 4d. an application group that fails on one rank only (twocomm appcoll: P0's all-reduce X in it has an invalid
# operation, NCCL drops P0's group, P1's X waits for a partner), then both register: ncclguard's rounds run on
# the communicator's channel, so they never pair with P1's X (at c54cc12 they ran on the communicator itself:
# a round after the failed group was refused and the communicator given up). What follows is NCCL alone's, line
# for line: both register, and the application's own next all-reduce on P0 pairs with P1's X as it does
# without ncclguard (apptwice: {X on C} fails, then registrations on A and C). Where the failed group held a
# registration (appgroup, appmixed), NCCL alone leaves P1 waiting for P0 in that registration's exchange
# for ever; with ncclguard the failure travels in the vote and both refuse it (reason=group_failed); since it
# failed on P0 only, P1's X is pending and A's collectives are out of step: both stop A (revoked), so the
# application's next all-reduce on A fails instead of pairing with X (appgroup: ar=error on both; 2.27 cannot
# revoke: a WARN says to abort A, and the all-reduce pairs with X as without ncclguard)
for m in appcoll apptwice; do
  for v in 22809 23007 22703; do
    exp=$(FAKE_NCCL_VERSION=$v bare_run "$PROGS/twocomm" $m --wait 4 2>/dev/null | grep 'RESULT proc=[01]' | sort)
    FAKE_NCCL_VERSION=$v NCCLGUARD_TIMEOUT=2 tw $m$v $m --wait 4
    got=$(echo "$out" | grep 'RESULT proc=[01]' | sort)
    [ $rc = 0 ] && [ -n "$exp" ] && [ "$got" = "$exp" ] && ! echo "$out" | grep -q '=wrong' \
      && ! logs $m$v | grep -q 'reason=group_failed' \
      && pass "failed-app-group-$m-as-nccl-alone-nccl-$v" || fail "failed-app-group-$m-as-nccl-alone-nccl-$v" "alone: $exp | $(twhy $m$v)"
  done
done
for m in appgroup appmixed; do
  for v in 22809 23007 22703; do
    FAKE_NCCL_VERSION=$v NCCLGUARD_TIMEOUT=2 tw $m$v $m --wait 4
    [ $rc = 0 ] && ! echo "$out" | grep -q '=wrong' && [ "$(tn 'RESULT proc=[01] ')" = 2 ] \
      && [ "$(tn 'proc=1 .*group=ncclInvalidUsage reg[A]*=ncclInvalidUsage ')" = 1 ] \
      && { [ $m != appgroup ] || [ $v = 22703 ] || [ "$(tn 'proc=[01] comm=A .* ar=error ')" = 2 ]; } \
      && [ "$(logs $m$v | grep -c 'fn=ncclCommWindowRegister .*decision=error reason=\(peer_\)*group_failed')" = 2 ] \
      && pass "failed-app-group-$m-refused-on-every-rank-nccl-$v" || fail "failed-app-group-$m-refused-on-every-rank-nccl-$v" "$(twhy $m$v)"
  done
done
# a stray ncclGroupEnd (no group open: NCCL refuses it and drops nothing): the registration after it runs as usual
FAKE_NCCL_VERSION=22809 NCCLGUARD_TIMEOUT=2 tw stray strayend --wait 4
[ $rc = 0 ] && [ "$(tn 'RESULT proc=[01] comm=A warm=ok stray=ncclInvalidUsage reg=ncclSuccess win=set ar=ok')" = 2 ] \
  && pass stray-group-end-marks-nothing || fail stray-group-end-marks-nothing "$(twhy stray)"

# 4e. the ranks place or group the same registrations differently among their collectives (tests/progs/orders.c),
# as NCCL allows (a registration is a host-side exchange; collectives are the device sequence): the same
# outcome as NCCL alone on every rank, and the fake's checker records nothing. At c54cc12: reg-ar, wrong data
# in X on rank 0 and a vote paired with an application all-reduce; group and group-two, errors (out of step, a
# timeout) where NCCL alone registers; pgroup (pncclGroupStart), a real window counted as NULL and the device
# communicator refused; zero (a size-0 registration on 2.28), the device communicator refused; reuse-pair,
# R1 refused while R2 registered (its layout differs between the ranks before 2.30.7)
od() { # NAME VERSION ARGS...: orders alone and with ncclguard; sets $exp, $got, $rc (with)
  n=$1 v=$2; shift 2
  exp=$(FAKE_NCCL_VERSION=$v bare_run "$PROGS/orders" --wait 4 --timeout 30 "$@" 2>/dev/null | grep '^RESULT rank=' | sort)
  out=$(FAKE_NCCL_VERSION=$v NCCLGUARD_TIMEOUT=5 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$n.%p.log" \
        fake_run "$PROGS/orders" --wait 4 --timeout 30 "$@" 2>"$T/$n.err"); rc=$?
  got=$(echo "$out" | grep '^RESULT rank=' | sort)
}
for v in 22809 23007 22703; do
  for m in reg-ar group group-two; do
    for nr in 2 3; do
      od ord-$m-$v-$nr $v -n $nr $m
      [ $rc = 0 ] && [ -n "$exp" ] && [ "$got" = "$exp" ] && echo "$out" | grep -q '^RESULT ok' \
        && pass "orders-$m-$nr-ranks-as-nccl-alone-nccl-$v" || fail "orders-$m-$nr-ranks-as-nccl-alone-nccl-$v" "rc=$rc alone: $exp | with: $got"
    done
  done
done
# (the device communicator with zeroed requirements is 2.28's: the 2.29+ fakes refuse it alone too)
for v in 22809 23007; do
  od ord-pgroup-$v $v pgroup
  [ -n "$exp" ] && [ "$got" = "$exp" ] && [ "$(echo "$got" | grep -c 'reg=ncclSuccess win=set')" = 2 ] \
    && { [ $v != 22809 ] || [ "$(echo "$got" | grep -c 'devcomm=ncclSuccess')" = 2 ]; } \
    && pass "orders-pncclgroup-seen-nccl-$v" || fail "orders-pncclgroup-seen-nccl-$v" "rc=$rc alone: $exp | with: $got"
done
od ord-zero 22809 zero
[ $rc = 0 ] && [ -n "$exp" ] && [ "$got" = "$exp" ] && [ "$(echo "$got" | grep -c 'devcomm=ncclSuccess')" = 2 ] \
  && pass orders-size-zero-no-null-window-counted || fail orders-size-zero-no-null-window-counted "rc=$rc alone: $exp | with: $got"
# before 2.30.7 both R1 and R2 are refused on every rank (degraded: their layout differs); from 2.30.7 NCCL
# places each by the largest size: registered as NCCL alone
od ord-reuse-22809 22809 reuse-pair
[ $rc = 0 ] && [ "$(echo "$got" | grep -c 'reg=ncclSuccess win=null reg2=ncclSuccess win2=null ar=ok')" = 2 ] \
  && [ "$(logs ord-reuse-22809 | grep -c 'decision=degrade reason=\(peer_\)*layout_mismatch')" = 4 ] \
  && pass orders-reuse-pair-both-refused-nccl-22809 || fail orders-reuse-pair-both-refused-nccl-22809 "rc=$rc with: $got"
od ord-reuse-23007 23007 reuse-pair
[ $rc = 0 ] && [ -n "$exp" ] && [ "$got" = "$exp" ] && pass orders-reuse-pair-as-nccl-alone-nccl-23007 \
  || fail orders-reuse-pair-as-nccl-alone-nccl-23007 "rc=$rc alone: $exp | with: $got"
# NCCL_COMM_SPLIT_SHARE_RESOURCES=1 makes NCCL share the communicator's stream with the channel (the variable
# overrides any config): the round waits behind the application's X, which waits for the peer's X, which
# comes after the peer's registration: every rank ends refused within the bound, X and the next all-reduce right
out=$(NCCL_COMM_SPLIT_SHARE_RESOURCES=1 NCCLGUARD_TIMEOUT=2 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/ord-share.%p.log" \
      fake_run "$PROGS/orders" --wait 8 --timeout 30 reg-ar 2>"$T/ord-share.err"); rc=$?
[ "$(echo "$out" | grep -c '^RESULT rank=.* x=ok reg=ncclSystemError win=null ar=ok')" = 2 ] && ! echo "$out" | grep -q '=wrong' \
  && logs ord-share | grep -q 'NCCL_COMM_SPLIT_SHARE_RESOURCES is set' \
  && pass orders-shared-resources-bounded-error || fail orders-shared-resources-bounded-error "rc=$rc $(echo "$out" | grep RESULT | tr '\n' ' ')"
# the differential explorer: every small program of 2 and 3 ranks (registrations, deregistrations, all-reduces,
# groups; one and two communicators) in every per-rank order NCCL alone completes, alone and with ncclguard
# (tests/progs/orders_explore.py): the same outcome of every operation on every rank, no collective mismatch.
# The sanitizer variants run every 8th program. At c54cc12: 506 of 592 programs differed
lim=0; [ "${NG_VARIANT:-plain}" = plain ] || lim=80
out=$(python3 "$NG_ROOT/tests/progs/orders_explore.py" --orders "$PROGS/orders" --shim "$SHIM" --fake "$FAKE" --jobs 4 \
      --limit $lim 2>&1); rc=$?
r=$(echo "$out" | grep 'orders-explore: RESULT' | sed 's/.*RESULT //')
[ $rc = 0 ] && echo "$r" | grep -q 'violations=0' && pass "orders-explorer ($r)" \
  || fail orders-explorer "rc=$rc $r $(echo "$out" | grep VIOLATION | head -2 | cut -c1-400)"

# 5. agreement resources of destroyed communicators past the pool are freed (issue 19, case 6): 300
# one-rank communicators alive per cycle, each with its own stream (a thread in the fakes)
out=$(NCCLGUARD_LOG=warn fake_run "$PROGS/manycomm" -n 300 -c 5 2>"$T/many.err"); rc=$?
# the pool keeps 256 idle streams; at e32e22c the 44 past it were dropped per cycle: 256 + 5 x 44 threads
t1=$(echo "$out" | sed -n 's/.*cycle=1 threads=\([0-9]*\).*/\1/p'); ts=$(echo "$out" | sed -n 's/.*settled threads=\([0-9]*\).*/\1/p')
[ $rc = 0 ] && [ -n "$ts" ] && [ "$ts" -le 270 ] \
  && pass "pool-overflow-freed (threads after cycle 1: $t1, settled after 5: $ts; pool 256)" \
  || fail pool-overflow-freed "rc=$rc $(echo "$out" | tr '\n' ' ' | cut -c1-400)"

# 6. randomised fault exploration (tests/progs/explore.c): each schedule a fresh communicator, a fault on
# one or two ranks (scratch out of memory, a slow rank below T/2, between T/2 and T, past T, a cudaMalloc
# buffer, size 0, a NULL buffer, a group of two registrations with one of them faulty), then the
# application's all-reduce: never wrong data, *win NULL on every error, every process ends; the fakes'
# collective-matching checker (tests/run) sees every collective. At e32e22c: 13 violations in 60
# schedules of seed 1 (wrong data after a slow rank, *win left set) and 8 mismatches.
ex() { # NAME ARGS...: explore with ncclguard; passes with 0 violations
  n=$1; shift
  out=$(NCCLGUARD_LOG=off NG_TIMEOUT=900 fake_run "$PROGS/explore" "$@" 2>"$T/$n.err"); rc=$?
  r=$(echo "$out" | grep 'explore: RESULT' | sed 's/.*RESULT //')
  [ $rc = 0 ] && echo "$r" | grep -q 'violations=0' && pass "explore-$n ($(echo "$r" | cut -d' ' -f1-3))" \
    || fail "explore-$n" "rc=$rc $r $(echo "$out" | grep VIOLATION | head -3 | tr '\n' ' ')"
}
ex 2-ranks -n 2 --schedules 200 --seed 1
ex 4-ranks -n 4 --schedules 80 --seed 4
FAKE_NCCL_VERSION=22703 ex 2-ranks-nccl-2.27 -n 2 --schedules 60 --seed 27
FAKE_NCCL_VERSION=23007 ex 2-ranks-nccl-2.30 -n 2 --schedules 60 --seed 30
# the faults that end without a timeout, many schedules: 10,000 in the plain variant, 1,000 under the
# sanitizers (each schedule a new communicator; the checker sees every collective)
nfast=10000
[ "${NG_VARIANT:-plain}" = plain ] || nfast=1000
ex 2-ranks-fast -n 2 --schedules $nfast --seed 11 --fast

# the exploration under ThreadSanitizer (plain variant only: the TSan build of library and fakes that
# t_faults.sh makes too; every schedule's fault, the watchdog and the bounded ends run concurrently)
if [ "${NG_VARIANT:-plain}" = plain ]; then
  TB="$NG_ROOT/build-tsan"
  if make -s -C "$NG_ROOT" BUILD="$TB" SAN=tsan all testbins >"$T/tsan-build.log" 2>&1; then
    tsan_lib=$(${CC:-cc} -print-file-name=libtsan.so)
    out=$(TSAN_OPTIONS="exitcode=97:halt_on_error=0:report_signal_unsafe=0:suppressions=$NG_ROOT/tests/fuzz/tsan.supp" \
          NCCLGUARD_LOG=off LD_LIBRARY_PATH="$TB/fake" LD_PRELOAD="$tsan_lib:$TB/libncclguard.so" \
          timeout -k 2 600 "$TB/progs/explore" -n 2 --schedules 120 --seed 21 --timeout-ms 1500 2>&1); rc=$?
    n=$(echo "$out" | grep -c 'WARNING: ThreadSanitizer')
    r=$(echo "$out" | grep 'explore: RESULT' | sed 's/.*RESULT //' | cut -d' ' -f1-3)
    [ $rc = 0 ] && [ "$n" = 0 ] && echo "$r" | grep -q 'violations=0' && pass "explore-tsan ($r)" \
      || fail explore-tsan "rc=$rc reports=$n $r $(echo "$out" | grep -A4 'WARNING: ThreadSanitizer' | grep '#0' | head -3 | tr '\n' ' ') $(echo "$out" | grep VIOLATION | head -2 | tr '\n' ' ')"
  else
    fail explore-tsan "TSan build failed: $(tail -3 "$T/tsan-build.log")"
  fi
fi

# a call-time error inside the application's group: NCCL drops the whole group (the fake follows
# group.cc), so the registrations ncclguard held back until that group's end are refused on every rank
# (agreed), never registered alone; the same group afterwards works (tests/fake/selftest.c group_drop,
# one thread driving two ranks). At e32e22c ncclguard registered them after the failed group end.
for m in 2 1; do
  out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/gdrop$m.log" fake_run "$FAKE/selftest" group_drop $m 2>&1); rc=$?
  nm=$([ $m = 1 ] && echo simulate-end || echo group-end)
  [ $rc = 0 ] && [ "$(grep -c 'decision=error reason=group_failed' "$T/gdrop$m.log")" = 2 ] \
    && pass "dropped-group-registrations-refused-$nm" || fail "dropped-group-registrations-refused-$nm" "rc=$rc $(echo "$out" | tail -2)"
done
