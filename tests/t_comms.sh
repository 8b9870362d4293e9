# Communicators made by ncclCommGrow, ncclCommShrink and ncclCommInitRankScalable (shim/wrap_comm.c),
# with the fake NCCL: `faults grow|shrink|scalable -n 3` (tests/progs/faults.c, one process per
# rank) creates one through each function, registers a window on it and all-reduces on it. Without
# ncclguard the scenario itself must work; with it, each rank's log must show the creation (fn=,
# result, rank, size, device, parent cid where there is a parent) and a registration agreed on the
# new communicator under one cid on every rank (ncclCommGrow: the ranks that knew only the parent or
# only the unique id named it differently at creation; the first agreement round makes one name).
. "$NG_ROOT/tests/lib.sh"
F=$PROGS/faults
export NCCLGUARD_TIMEOUT=${NCCLGUARD_TIMEOUT:-8}

# field LINE KEY: the value of KEY= in a log line
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

# check_mode MODE FN RANKS-ON-THE-NEW-COMM NEW-SIZE PARENT-RANKS
check_mode() {
  m=$1 fn=$2 members=$3 size=$4 parents=$5
  out=$(bare_run "$F" "$m" -n 3 --timeout 25 2>&1); rc=$?
  [ $rc = 0 ] && [ "$(echo "$out" | grep -c "RESULT ok .*$m=ncclSuccess .*sum=ok")" = "$(echo $members | wc -w)" ] \
    && pass "comms-$m-without-ncclguard" || fail "comms-$m-without-ncclguard" "rc=$rc $(echo "$out" | tr '\n' ' ')"

  out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$m.%p.log" fake_run "$F" "$m" -n 3 --timeout 25 2>"$T/$m.err"); rc=$?
  [ $rc = 0 ] && [ "$(echo "$out" | grep -c "RESULT ok .*$m=ncclSuccess .*reg=ncclSuccess win=set .*sum=ok")" = "$(echo $members | wc -w)" ] \
    && pass "comms-$m-registers-with-ncclguard" || fail "comms-$m-registers-with-ncclguard" "rc=$rc $(echo "$out" | tr '\n' ' ') $(tail -3 "$T/$m.err")"

  created_ok=1 reg_ok=1 why="" cids="" regcids=""
  for r in $members; do
    # this rank's log: the one whose creation line says rank=r
    f=$(grep -l "fn=$fn .*rank=$r nranks=$size " "$T/$m".*.log 2>/dev/null | head -1)
    if [ -z "$f" ]; then created_ok=0; why="$why rank $r: no fn=$fn line with rank=$r nranks=$size;"; continue; fi
    c=$(grep -m1 "fn=$fn " "$f")
    comm=$(field "$c" comm) cid=$(field "$c" cid) parent=$(field "$c" parent)
    cids="$cids $cid"
    # device tracked (rank r runs on GPU r of the fake's 8), created ready, passed to NCCL, success
    echo "$c" | grep -Eq "\[$r\] NCCLGUARD INFO fn=$fn .*blocking=1 state=ready result=ncclSuccess .*decision=pass reason=ok" \
      || { created_ok=0; why="$why rank $r: $c;"; }
    # the parent: the communicator this rank created first (ncclCommInitRank), where it has one
    case " $parents " in
      *" $r "*) pc=$(field "$(grep -m1 'fn=ncclCommInitRank ' "$f")" cid)
                [ -n "$pc" ] && [ "$parent" = "$pc" ] || { created_ok=0; why="$why rank $r: parent=$parent, the parent's cid is $pc;"; } ;;
      *) [ -z "$parent" ] || { created_ok=0; why="$why rank $r: parent=$parent on a communicator without one;"; } ;;
    esac
    # the registration on the new communicator: its agreement channel made (its first round), then
    # registered under the creation's cid, or under the agreed one after a line saying the ranks named it
    # differently
    rl=$(grep -E "\[$r\] NCCLGUARD INFO fn=ncclCommWindowRegister comm=$comm cid=[0-9a-f]+ rank=$r nranks=$size .*decision=register reason=ok" "$f" | head -1)
    rcid=$(field "$rl" cid)
    regcids="$regcids $rcid"
    grep -q "fn=channel msg=\"communicator $comm: agreement channel .* made " "$f" && [ -n "$rl" ] \
      && { [ "$rcid" = "$cid" ] || grep -q "fn=agree msg=\"communicator $comm: its ranks named it differently; cid $rcid from now on (was $cid here)" "$f"; } \
      || { reg_ok=0; why="$why rank $r: no agreed registration on $comm cid=$cid: $(grep -m2 'fn=ncclCommWindowRegister\|fn=agree' "$f" | tr '\n' ' ');"; }
  done
  [ $created_ok = 1 ] && pass "comms-$m-creation-logged" || fail "comms-$m-creation-logged" "$why"
  [ $reg_ok = 1 ] && pass "comms-$m-window-agreed-on-new-comm" || fail "comms-$m-window-agreed-on-new-comm" "$why"
  # one name on every rank once the ranks met (the registration); at creation too, except for Grow
  n=$(echo $regcids | tr ' ' '\n' | sort -u | grep -c .)
  n0=$(echo $cids | tr ' ' '\n' | sort -u | grep -c .)
  if [ "$n" = 1 ] && { [ "$n0" = 1 ] || [ "$m" = grow ]; }; then pass "comms-$m-cid-same-on-every-rank"
  else fail "comms-$m-cid-same-on-every-rank" "at creation:$cids; at registration:$regcids"
  fi
}

# grow: ranks 0 and 1 own the parent (2 ranks), rank 2 joins; shrink: rank 2 is excluded
check_mode grow ncclCommGrow "0 1 2" 3 "0 1"
check_mode shrink ncclCommShrink "0 1" 2 "0 1"
check_mode scalable ncclCommInitRankScalable "0 1 2" 3 ""
