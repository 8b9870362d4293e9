# dlsym and dlvsym on a libnccl's own handle (issue 22; shim/dlsym.c): bindings that dlopen libnccl
# RTLD_LOCAL and look NCCL's functions up on the handle (C programs, Python's ctypes.CDLL as in vLLM's
# legacy pynccl_wrapper.py and SGLang's pynccl) reach ncclguard for the wrapped names; every other
# lookup is answered as glibc answers it; NCCLGUARD_DLSYM=0 restores the bypass; a second libnccl's
# handle is not redirected. Each case runs the same program bare and under ncclguard.
. "$NG_ROOT/tests/lib.sh"

logs() { cat "$T/$1".*.log 2>/dev/null; }
lhas() { logs "$1" | grep -Eq -- "$2"; }
why() { echo "rc=$rc $(echo "$out" | tail -3 | tr '\n' ' ') | $(logs "$1" | grep -E 'WARN|fn=dlsym' | head -3)"; }
DH=$PROGS/dlsym_handle
NCCL=$FAKE/libnccl.so.2
VNCCL=$B/fake-versioned/libnccl.so.2 # the fake with a version node: dlvsym finds its names
PY=${NG_PYTHON:-python3}
# g NAME CMD...: under ncclguard, log at info into $T/NAME.*.log; b CMD...: bare. Both set out and rc.
g() { n=$1; shift; out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$n.%p.log" fake_run "$@" 2>&1); rc=$?; }
b() { out=$(bare_run "$@" 2>&1); rc=$?; }
# own/ownb OUT: a libnccl's own calls of ncclCommWindowDeregister / ncclCommDeregister that reached it (the
# fake's trace, FAKE_NCCL_TRACE=1, marks them internal)
own() { echo "$1" | grep -c "ncclCommWindowDeregister(.*) -> ncclSuccess internal"; }
ownb() { echo "$1" | grep -c "ncclCommDeregister(.*) -> ncclSuccess internal"; }

case "$(uname -m)" in
  x86_64) ;;
  *) echo "# skip dlsym: ncclguard defines dlsym on x86_64 only (shim/dlsym.c)"; exit 0 ;;
esac

# --- the seed's failure through dlsym(handle): NULL communicator on 2.28.9 --------------------------------
export FAKE_NCCL_VERSION=22809
b "$DH" "$NCCL" reg
crashed $rc && pass dlsym-handle-null-comm-crashes-bare || fail dlsym-handle-null-comm-crashes-bare "rc=$rc $out"
g reg "$DH" "$NCCL" reg
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT reg=4' \
  && lhas reg 'fn=ncclCommWindowRegister comm=0x0 .*result=ncclInvalidArgument .*reason=null_comm' \
  && lhas reg 'INFO fn=dlsym .*dlsym on the handle of .*fake/libnccl.so.2: ncclCommWindowRegister' \
  && pass dlsym-handle-null-comm-clean-error || fail dlsym-handle-null-comm-clean-error "$(why reg)"

b "$DH" "$VNCCL" vreg NCCL_FAKE
crashed $rc && pass dlvsym-handle-null-comm-crashes-bare || fail dlvsym-handle-null-comm-crashes-bare "rc=$rc $out"
g vreg "$DH" "$VNCCL" vreg NCCL_FAKE
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT vreg=4' \
  && lhas vreg 'fn=ncclCommWindowRegister comm=0x0 .*result=ncclInvalidArgument .*reason=null_comm' \
  && pass dlvsym-handle-null-comm-clean-error || fail dlvsym-handle-null-comm-clean-error "$(why vreg)"

# --- the kill switch ---------------------------------------------------------------------------------------
out=$(NCCLGUARD_DLSYM=0 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/off.%p.log" fake_run "$DH" "$NCCL" reg 2>&1); rc=$?
crashed $rc && ! lhas off 'fn=ncclCommWindowRegister' && pass dlsym-off-restores-bypass || fail dlsym-off-restores-bypass "$(why off)"
unset FAKE_NCCL_VERSION

# --- feature detection, by every route a program asks "does the loaded NCCL have X" (shim/exports.c,
# shim/dlsym.c): against the fake of each release ($B/fake-rel/CODE, which exports only what that release has:
# tests/fake/releases.txt), each route answers under ncclguard what the release has: ncclguard's function where
# it has a wrapped name, NULL where it lacks it (also before any libnccl is loaded), NCCL's own for the rest;
# bare, each route that sees the library answers the release's names. Routes: a weak reference of a program
# linked against libnccl, dlsym(RTLD_DEFAULT), dlsym(RTLD_NEXT), dlsym on libnccl's handle, dlvsym on both (the
# release's fake with a version node), each with libnccl linked, loaded RTLD_GLOBAL, RTLD_LOCAL, or not loaded
# yet; Python's ctypes.CDLL(None) and ctypes.CDLL(libnccl) (a missing name an AttributeError, never a crash) ---
wrapped=$(sed -n '/global:/,/local:/p' "$NG_ROOT/shim/ncclguard.map" | grep -o 'nccl[A-Z][A-Za-z]*' | tr '\n' ' ')
# expect MODE CODE GUARDED: reads featroutes' lines, prints "KEY got want" for each answer that differs from
# what the release has (KEY = MODE:ROUTE), and "KEY seen N" per route (N names answered: 14 unless the
# program died on the way)
expect() {
  awk -v mode="$1" -v v="$2" -v g="$3" -v wrapped="$wrapped" -v table="$NG_ROOT/tests/fake/releases.txt" '
    BEGIN { while ((getline l < table) > 0) if (l !~ /^#/ && split(l, f) >= 2) first[f[1]] = f[2] + 0
            n = split(wrapped, w, " "); for (i = 1; i <= n; i++) isw[w[i]] = 1 }
    $1 == "ROUTE" {
      r = $2; split($3, kv, "="); name = kv[1]; got = kv[2]
      has = !(name in first) || first[name] <= v + 0
      m = mode; sub(/^py(imp)?-/, "", m); ver = mode == "global" || mode == "local"
      if (r ~ /^v/) vis = ver && (r == "vhandle" || m == "global")
      else if (m == "linked" || m == "global" || r == "default_after") vis = 1
      else if (m == "before") vis = 0
      else vis = r == "handle"
      want = has && vis ? "nccl" : "absent"
      if (g && has && isw[name] && r != "vdefault" && (r != "vhandle" || vis)) {
        if (m == "before" && r != "default_after") want = (name in first) ? "absent" : "guard"
        else want = "guard"
      }
      if (got != want) print mode ":" r " " name "=" got " (want " want ")"
      seen[mode ":" r]++
    }
    END { for (k in seen) print k " seen " seen[k] }'
}
FR=$B/fake-rel
: >"$T/feat.diff"
for code in $(ls "$FR" | grep -E '^[0-9]+$'); do
  L="$FR/$code"
  for gd in 0 1; do
    pre=""; [ $gd = 1 ] && pre="${NG_PRELOAD_PREFIX:-}$SHIM"
    run() { env LD_LIBRARY_PATH="$L:$FAKE" ${pre:+LD_PRELOAD="$pre"} timeout -k 2 "$NG_TIMEOUT" "$@" 2>&1; }
    { run "$PROGS/featroutes_linked" | expect linked "$code" $gd
      run "$PROGS/featroutes" before "$L/libnccl.so.2" | expect before "$code" $gd
      run "$PROGS/featroutes" global "$L/libnccl-versioned.so.2" | expect global "$code" $gd
      run "$PROGS/featroutes" local "$L/libnccl-versioned.so.2" | expect local "$code" $gd
      if [ "${NG_VARIANT:-plain}" = plain ] && "$PY" -c 'import ctypes' 2>/dev/null; then
        for m in before global local; do run "$PY" "$NG_ROOT/tests/progs/featroutes.py" $m "$L/libnccl.so.2" | expect py-$m "$code" $gd; done
        # ncclguard turned on inside the interpreter (import ncclguard, no LD_PRELOAD): the package's ctypes hook
        if [ $gd = 1 ]; then
          for m in before global local; do
            env PYTHONPATH="$NG_ROOT/python:$NG_ROOT/tools/python" NCCLGUARD_LIB="$SHIM" LD_LIBRARY_PATH="$L:$FAKE" \
              timeout -k 2 "$NG_TIMEOUT" "$PY" -c "import sys, runpy, ncclguard; sys.argv = ['featroutes.py', '$m', '$L/libnccl.so.2']
runpy.run_path('$NG_ROOT/tests/progs/featroutes.py')" 2>&1 | expect pyimp-$m "$code" 1
          done
        fi
      fi
    } | sed "s/^/$code $([ $gd = 1 ] && echo ncclguard || echo bare) /" >>"$T/feat.diff"
  done
done
for key in $(awk '$4 == "seen" {print $3}' "$T/feat.diff" | sort -u); do
  bad=$(awk -v k="$key" '$3 == k && ($4 != "seen" || $5 != 14)' "$T/feat.diff")
  nrel=$(awk -v k="$key" '$3 == k && $4 == "seen" {print $1}' "$T/feat.diff" | sort -u | wc -l)
  [ -z "$bad" ] && [ "$nrel" -ge 8 ] && pass "feature-route-$(echo "$key" | tr ':_' '--') ($nrel releases)" \
    || fail "feature-route-$(echo "$key" | tr ':_' '--')" "$nrel releases; $(echo "$bad" | head -4 | tr '\n' ';')"
done
# two copies of NCCL, each RTLD_LOCAL (PyTorch's and a binding's own): the first 2.28.9, which lacks
# ncclCommSuspend and ncclCommGrow, the second 2.30.7, which has them. dlsym(RTLD_DEFAULT) answers for the
# copy ncclguard's wrappers call (the first loaded): absent (at 8f4b3cc the wrappers, because the second copy
# had them: a call reached 2.28.9 and returned ncclInvalidUsage); loaded the other way round, present
if [ -d "$FR/22809" ] && [ -d "$FR/23007" ]; then
  two() { env LD_LIBRARY_PATH="$FR/$1:$FAKE" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM" timeout -k 2 "$NG_TIMEOUT" \
            "$PROGS/featroutes" two "$FR/$1/libnccl-versioned.so.2" "$FR/$2/libnccl-versioned.so.2" 2>&1; }
  o1=$(two 22809 23007); o2=$(two 23007 22809)
  if echo "$o1" | grep -qx 'ROUTE two_default ncclCommSuspend=absent' && echo "$o1" | grep -qx 'ROUTE two_default ncclCommGrow=absent' \
     && echo "$o1" | grep -qx 'ROUTE two_default ncclCommWindowRegister=guard' \
     && echo "$o2" | grep -qx 'ROUTE two_default ncclCommSuspend=guard' && echo "$o2" | grep -qx 'ROUTE two_default ncclCommGrow=guard'; then
    pass feature-route-two-copies-answer-for-the-one-called
  else fail feature-route-two-copies-answer-for-the-one-called "$(echo "$o1" "$o2" | grep -E 'Suspend|Grow|WindowRegister' | tr '\n' ' ')"; fi
else echo "# skip feature-route-two-copies-answer-for-the-one-called: no release fakes 22809/23007"; fi
n=$(awk '$4 == "seen" {print $3}' "$T/feat.diff" | sort -u | wc -l)
[ "$n" -ge 16 ] && pass "feature-routes-all-ran ($n)" || fail feature-routes-all-ran "only $n routes answered: $(head -3 "$T/feat.diff")"

# --- a communicator made through the handle: ncclguard sees the init and the registration --------------------
g init "$DH" "$NCCL" init
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT init uid=0 init=0 alloc=0 reg=0 win=set dereg=0 destroy=0' \
  && lhas init 'fn=ncclCommInitRank .*result=ncclSuccess' && lhas init 'fn=ncclCommWindowRegister .*rank=0 nranks=1 .*result=ncclSuccess' \
  && lhas init 'fn=ncclCommDestroy .*result=ncclSuccess' && lhas init 'fn=summary calls=5 comms=1 registered=1' \
  && pass dlsym-handle-init-and-registration-guarded || fail dlsym-handle-init-and-registration-guarded "$(why init)"

# --- every other lookup as glibc answers it; every wrapped name redirected, on dlsym and dlvsym -------------
names=$(sed -n '/global:/,/local:/p' "$NG_ROOT/shim/ncclguard.map" | grep -o 'nccl[A-Z][A-Za-z]*')
out_b=$(echo $names | bare_run "$DH" "$VNCCL" lookups NCCL_FAKE 2>&1)
g look sh -c "echo $(echo $names) | \"$DH\" \"$VNCCL\" lookups NCCL_FAKE"
other_b=$(echo "$out_b" | grep -v 'RESULT name'); other_g=$(echo "$out" | grep -v 'RESULT name')
[ $rc = 0 ] && [ "$other_b" = "$other_g" ] && echo "$other_g" | grep -q 'RESULT collective=libnccl.so.2+0x' \
  && echo "$other_g" | grep -q 'RESULT collective_v=libnccl.so.2+0x' \
  && echo "$other_g" | grep -q 'RESULT missing=NULL dlerror=.*undefined symbol: ncclNoSuchFunction$' \
  && echo "$other_g" | grep -q 'RESULT after_failed_dlopen=set dlerror=NULL' \
  && pass dlsym-other-lookups-as-glibc || fail dlsym-other-lookups-as-glibc "bare: $(echo $other_b) | ncclguard: $(echo $other_g)"
# RTLD_NEXT made by another library is resolved relative to that library, not to ncclguard
echo "$other_g" | grep -q 'RESULT rtld_next_from_library=NULL' && echo "$other_g" | grep -q 'RESULT rtld_next_v_from_library=NULL' \
  && pass dlsym-rtld-next-keeps-caller || fail dlsym-rtld-next-keeps-caller "$(echo "$other_g" | grep rtld_next)"
nb=$(echo "$out_b" | grep -c 'RESULT name nccl[A-Za-z]* libnccl.so.2 libnccl.so.2$')
ng=$(echo "$out" | grep -c 'RESULT name nccl[A-Za-z]* libncclguard.so libncclguard.so$')
nn=$(echo $names | wc -w)
[ "$nb" = "$nn" ] && [ "$ng" = "$nn" ] && [ "$(logs look | grep -c 'fn=dlsym')" = 1 ] \
  && pass "dlsym-every-wrapped-name-redirected ($nn)" \
  || fail dlsym-every-wrapped-name-redirected "bare $nb, ncclguard $ng of $nn: $(echo "$out" | grep 'RESULT name' | grep -v ncclguard | head -3)"
out=$(echo $names | NCCLGUARD_DLSYM=0 fake_run "$DH" "$VNCCL" lookups NCCL_FAKE 2>&1)
[ "$out" = "$out_b" ] && pass dlsym-off-every-lookup-as-glibc || fail dlsym-off-every-lookup-as-glibc "$(echo "$out" | grep ncclguard | head -2)"

# --- another dlsym interposer (a profiler's: defines dlsym, finds the next with dlvsym(RTLD_NEXT, "dlsym",
# <glibc's version>)), preloaded after ncclguard, as ncclguard-run orders them: ncclguard jumps to it for every
# lookup it does not answer itself, so it sees lookups as without ncclguard, and the redirect still holds.
# Preloaded before ncclguard: no recursion, the program runs (that interposer's versioned lookup skips
# ncclguard's dlsym: docs/behaviour.md) ------------------------------------------------------------------------
SPY=$PROGS/libdlspy.so
export FAKE_NCCL_VERSION=22809
out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/spy.%p.log" NG_PRELOAD_PREFIX="${NG_PRELOAD_PREFIX:-}" \
      env LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SHIM:$SPY" timeout -k 2 "$NG_TIMEOUT" "$DH" "$NCCL" reg 2>&1); rc=$?
n=$(echo "$out" | sed -n 's/^dlspy: lookups=\([0-9]*\)$/\1/p')
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT reg=4' && [ "${n:-0}" -gt 0 ] && lhas spy 'reason=null_comm' \
  && pass "dlsym-interposer-after-ncclguard-sees-lookups ($n)" || fail dlsym-interposer-after-ncclguard-sees-lookups "rc=$rc n=$n $(echo "$out" | tail -2)"
unset FAKE_NCCL_VERSION
out=$(env LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="${NG_PRELOAD_PREFIX:-}$SPY:$SHIM" timeout -k 2 "$NG_TIMEOUT" "$DH" "$NCCL" init 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT init uid=0 init=0 alloc=0 reg=0 win=set dereg=0 destroy=0' && echo "$out" | grep -q '^dlspy: lookups=[1-9]' \
  && pass dlsym-interposer-before-ncclguard-no-recursion || fail dlsym-interposer-before-ncclguard-no-recursion "rc=$rc $(echo "$out" | tail -2)"

# --- a second libnccl (ncclguard told to forward to another one): its handle answers ncclguard's entry points
# for it (shim/route.c), dlsym and dlvsym alike, one INFO line naming it; every other lookup as glibc ----------
export FAKE_NCCL_VERSION=22809
out=$(NCCLGUARD_NCCL_LIB="$NCCL" NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/two.%p.log" fake_run "$DH" "$VNCCL" reg NCCL_FAKE 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT reg=4' && lhas two 'fn=ncclCommWindowRegister comm=0x0 .*reason=null_comm' \
  && lhas two "INFO fn=route .*$VNCCL is a second libnccl in this process \\(NCCL 22809; ncclguard's first is $NCCL\\)" \
  && pass dlsym-second-libnccl-guarded || fail dlsym-second-libnccl-guarded "$(why two)"
unset FAKE_NCCL_VERSION
out=$(echo $names | NCCLGUARD_NCCL_LIB="$NCCL" NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/two2.%p.log" fake_run "$DH" "$VNCCL" lookups NCCL_FAKE 2>/dev/null)
other2=$(echo "$out" | grep -v 'RESULT name')
n2=$(echo "$out" | grep -c 'RESULT name nccl[A-Za-z]* libncclguard.so libncclguard.so$')
[ "$other2" = "$other_b" ] && [ "$n2" = "$nn" ] && [ "$(logs two2 | grep -c 'fn=route')" = 1 ] \
  && pass "dlsym-second-libnccl-every-wrapped-name ($n2)" \
  || fail dlsym-second-libnccl-every-wrapped-name "$n2 of $nn; $(echo "$other2" | head -3) | $(logs two2 | grep -c 'fn=route') route lines"
# a library linked against another libnccl (soname libnccl-other.so.2), loaded RTLD_LOCAL after ncclguard settled on
# the first: its calls through the global names are ncclguard's; they run with the library it binds its
# collectives to (shim/route.c), so its communicator is that library's and its all-reduce succeeds (forwarded
# to the first copy, the communicator would be the first copy's and the other copy's all-reduce would refuse it)
OTHER=$PROGS/libconsumer_other.so
b "$DH" "$NCCL" scoped "$OTHER"
out_bare=$out
g scoped "$DH" "$NCCL" scoped "$OTHER"
[ $rc = 0 ] && echo "$out_bare" | grep -q 'RESULT scoped=0' && echo "$out" | grep -q 'RESULT scoped=0' \
  && echo "$out" | grep -q 'consumer: RESULT ok nranks=1' \
  && lhas scoped "INFO fn=route .*libconsumer_other.so binds its calls of NCCL to .*fake-other/libnccl-other.so.2" \
  && lhas scoped 'fn=ncclCommInitAll .*result=ncclSuccess .*msg="made by .*libnccl-other.so.2' \
  && lhas scoped 'fn=ncclCommWindowRegister .*decision=register reason=ok' \
  && pass two-libnccl-linked-library-runs-with-its-own || fail two-libnccl-linked-library-runs-with-its-own "$(echo "$out" | grep RESULT) $(why scoped)"
# more copies than ncclguard has room for (NG_NLIBS = 4: the first and three others): the fourth other copy is
# not guarded, its lookups answered by glibc, with a WARN naming it (2.29: NCCL itself refuses a NULL
# communicator, and only ncclguard's log tells who answered)
for i in 1 2 3 4; do mkdir -p "$T/copy$i" && cp "$NCCL" "$T/copy$i/libnccl.so.2"; done
out=$(FAKE_NCCL_VERSION=22907 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/copies.%p.log" fake_run "$DH" "$NCCL" copies \
      "$T/copy1/libnccl.so.2" "$T/copy2/libnccl.so.2" "$T/copy3/libnccl.so.2" "$T/copy4/libnccl.so.2" 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT copies 4 4 4 4' \
  && [ "$(logs copies | grep -c 'fn=ncclCommWindowRegister comm=0x0 .*reason=null_comm')" = 3 ] \
  && lhas copies "WARN fn=route .*$T/copy4/libnccl.so.2 is one libnccl too many in this process" \
  && lhas copies "INFO fn=dlsym .*dlsym on the handle of $T/copy4/libnccl.so.2 \\(ncclCommWindowRegister\\): not the libnccl" \
  && pass dlsym-libnccl-copies-beyond-the-limit-answered-by-glibc || fail dlsym-libnccl-copies-beyond-the-limit-answered-by-glibc "$(why copies)"
# ... and its calls that reach ncclguard go to its own functions, untouched, as without ncclguard. Each copy in
# turn makes a communicator with a window and a buffer registration and destroys it with both live: the
# destroy deregisters them through the copy's public functions (ncclguard's wrappers, by the global scope),
# and those calls reach that copy (its trace marks them internal), never another; the first three copies are
# guarded, the fourth is not (nothing logged for its calls)
extra="$T/copy1/libnccl.so.2 $T/copy2/libnccl.so.2 $T/copy3/libnccl.so.2"
b env FAKE_NCCL_TRACE=1 "$DH" "$NCCL" extra $extra "$T/copy4/libnccl.so.2"
out_bare=$out
g extra env FAKE_NCCL_TRACE=1 "$DH" "$NCCL" extra $extra "$T/copy4/libnccl.so.2"
res='RESULT extra 0,0,0,0,0,0 0,0,0,0,0,0 0,0,0,0,0,0 0,0,0,0,0,0'
[ $rc = 0 ] && echo "$out_bare" | grep -qx "$res" && echo "$out" | grep -qx "$res" \
  && [ "$(own "$out_bare")" = 4 ] && [ "$(ownb "$out_bare")" = 4 ] && [ "$(own "$out")" = 4 ] && [ "$(ownb "$out")" = 4 ] \
  && [ "$(echo "$out" | grep -c 'Deregister(')" = 8 ] \
  && lhas extra "WARN fn=route .*$T/copy4/libnccl.so.2 is one libnccl too many in this process .*: it is not guarded" \
  && [ "$(logs extra | grep -c 'fn=ncclCommInitRank .*made by ')" = 3 ] && ! lhas extra 'made by [^ ]*copy4' \
  && [ "$(logs extra | grep -c 'fn=ncclCommWindowRegister .*decision=register reason=ok')" = 3 ] \
  && pass libnccl-copy-beyond-the-limit-calls-its-own-untouched \
  || fail libnccl-copy-beyond-the-limit-calls-its-own-untouched "bare: $(echo "$out_bare" | grep -E 'Dereg|RESULT' | tr '\n' ' ') | $(echo "$out" | grep -E 'Dereg|RESULT' | tr '\n' ' ') $(why extra)"
# a library linked against a libnccl beyond the limit (three other copies took the indices first): its calls
# through the global names, ncclguard's, go to the copy it binds to, untouched: its communicator and all-reduce
# work as without ncclguard
b "$DH" "$NCCL" scoped "$OTHER" $extra
out_bare=$out
g scopedextra "$DH" "$NCCL" scoped "$OTHER" $extra
[ $rc = 0 ] && echo "$out_bare" | grep -q 'RESULT scoped=0' && echo "$out" | grep -q 'RESULT scoped=0' \
  && echo "$out" | grep -q 'consumer: RESULT ok nranks=1' \
  && lhas scopedextra "WARN fn=route .*fake-other/libnccl-other.so.2 is one libnccl too many in this process" \
  && ! lhas scopedextra 'fn=ncclComm(InitAll|WindowRegister) ' \
  && pass libnccl-copy-beyond-the-limit-linked-library-untouched \
  || fail libnccl-copy-beyond-the-limit-linked-library-untouched "$(echo "$out" | grep RESULT | tr '\n' ' ') $(why scopedextra)"

# --- Python ctypes, in the style of vLLM's legacy pynccl_wrapper.py -----------------------------------------
if "$PY" -c 'import ctypes' 2>/dev/null; then
  export FAKE_NCCL_VERSION=22809
  b "$PY" "$NG_ROOT/tests/progs/pynccl_like.py" "$NCCL" null
  crashed $rc && pass ctypes-null-comm-crashes-bare || fail ctypes-null-comm-crashes-bare "rc=$rc $out"
  g pynull "$PY" "$NG_ROOT/tests/progs/pynccl_like.py" "$NCCL" null
  [ $rc = 0 ] && echo "$out" | grep -q 'RESULT null=4' \
    && lhas pynull 'fn=ncclCommWindowRegister comm=0x0 .*result=ncclInvalidArgument .*reason=null_comm' \
    && pass ctypes-null-comm-clean-error || fail ctypes-null-comm-clean-error "$(why pynull)"
  unset FAKE_NCCL_VERSION
  g pyinit "$PY" "$NG_ROOT/tests/progs/pynccl_like.py" "$NCCL" init
  [ $rc = 0 ] && echo "$out" | grep -q 'RESULT init uid=0 init=0 alloc=0 reg=0 allreduce=0 dereg=0 destroy=0 win=set' \
    && lhas pyinit 'fn=ncclCommInitRank .*result=ncclSuccess' && lhas pyinit 'fn=ncclCommWindowRegister .*nranks=1 .*result=ncclSuccess' \
    && ! lhas pyinit 'fn=ncclAllReduce' && pass ctypes-init-and-registration-guarded || fail ctypes-init-and-registration-guarded "$(why pyinit)"
else
  echo "# skip ctypes: $PY has no ctypes"
fi

# --- two copies of libnccl, the second loaded by path (vLLM's VLLM_NCCL_SO_PATH beside PyTorch's) --------------
# The functions looked up on the second copy's handle are ncclguard's entry points for that copy (shim/route.c):
# its communicators are guarded with its own functions (their agreement rounds run on it: the first copy
# would refuse a communicator it does not know), the creation line names it. Its own calls of its public
# functions (ncclCommDestroy deregistering what is still registered) bind to ncclguard's wrappers through the
# global scope; they must reach that copy, never the first. Both RTLD_LOCAL (PyTorch and ctypes): NCCL alone
# binds them to the copy itself. The first copy RTLD_GLOBAL (a linked program): NCCL alone binds them to the
# first copy (which does not know the communicator: ncclInvalidArgument, the window left registered).
mkdir -p "$T/second" && cp "$NCCL" "$T/second/libnccl.so.2"
SECOND="$T/second/libnccl.so.2"
for mode in local global; do
  b env FAKE_NCCL_TRACE=1 "$DH" "$NCCL" two "$SECOND" $mode
  out_bare=$out
  g two$mode env FAKE_NCCL_TRACE=1 "$DH" "$NCCL" two "$SECOND" $mode
  res='RESULT two a=0,0,0,0,0 b=0,0,0,0,0,0'
  if [ $mode = local ]; then
    [ "$(own "$out_bare")" = 2 ] && [ "$(ownb "$out_bare")" = 1 ] && pass two-libnccl-local-bare-each-its-own \
      || fail two-libnccl-local-bare-each-its-own "$(echo "$out_bare" | grep -E 'Dereg|RESULT')"
  else
    echo "$out_bare" | grep -q 'ncclCommDeregister(.*) -> ncclInvalidArgument$' && pass two-libnccl-global-bare-mixes \
      || fail two-libnccl-global-bare-mixes "$(echo "$out_bare" | grep -E 'Dereg|RESULT')"
  fi
  [ $rc = 0 ] && echo "$out" | grep -qx "$res" && [ "$(own "$out")" = 2 ] && [ "$(ownb "$out")" = 1 ] \
    && ! echo "$out" | grep -q 'ncclInvalidArgument' \
    && lhas two$mode "INFO fn=route .*$SECOND is a second libnccl in this process \\(NCCL 22809; ncclguard's first is $NCCL\\)" \
    && [ "$(logs two$mode | grep -c 'fn=route')" = 1 ] \
    && [ "$(logs two$mode | grep -c 'fn=ncclCommInitRank .*result=ncclSuccess')" = 2 ] \
    && lhas two$mode "fn=ncclCommInitRank .*msg=\"made by $SECOND \\(NCCL 22809\\), the communicator's own libnccl\"" \
    && [ "$(logs two$mode | grep -c 'fn=ncclCommWindowRegister .*decision=register reason=ok')" = 2 ] \
    && lhas two$mode 'fn=summary calls=9 comms=2 registered=2 ' \
    && pass "two-libnccl-$mode-each-guarded-with-its-own" \
    || fail "two-libnccl-$mode-each-guarded-with-its-own" "$(echo "$out" | grep -E 'Dereg|RESULT|Invalid') $(why two$mode)"
done
# a group open on the first copy while the second registers in a group of its own: each copy of NCCL keeps its
# own group state, so the second copy's ncclGroupEnd ends its group and the window is there (with one group
# depth for both, the registration waited for the first copy's group end and ran with the first copy)
b "$DH" "$NCCL" twogroup "$SECOND"
out_bare=$out
g twogroup "$DH" "$NCCL" twogroup "$SECOND"
res='RESULT twogroup start=0 init=0 bstart=0 reg=0 end=0 win=set outer=0'
[ $rc = 0 ] && echo "$out_bare" | grep -qx "$res" && echo "$out" | grep -qx "$res" \
  && lhas twogroup 'fn=ncclCommWindowRegister .*decision=register reason=ok' \
  && pass two-libnccl-groups-each-its-own || fail two-libnccl-groups-each-its-own "bare: $(echo "$out_bare" | grep RESULT) | $(echo "$out" | grep RESULT) $(why twogroup)"
# the first copy's pointers called after a second copy was loaded RTLD_GLOBAL, by a program that links against no
# libnccl: its calls belong to the library of its pointers (the global scope's libnccl is not its own)
b "$DH" "$NCCL" late "$SECOND"
out_bare=$out
g late "$DH" "$NCCL" late "$SECOND"
res='RESULT late uid=0 init=0 reg=0 allreduce=0 destroy=0'
[ $rc = 0 ] && echo "$out_bare" | grep -qx "$res" && echo "$out" | grep -qx "$res" && ! lhas late 'made by' \
  && lhas late 'fn=ncclCommWindowRegister .*decision=register reason=ok' \
  && pass two-libnccl-pointer-callers-keep-their-library || fail two-libnccl-pointer-callers-keep-their-library "bare: $(echo "$out_bare" | grep RESULT) | $(echo "$out" | grep RESULT) $(why late)"
# NCCLGUARD_DISABLE=1, two copies: pure pass-through: each copy's internal calls reach it, nothing is logged
out=$(NCCLGUARD_DISABLE=1 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/twodis.%p.log" FAKE_NCCL_TRACE=1 fake_run "$DH" "$NCCL" two "$SECOND" local 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qx 'RESULT two a=0,0,0,0,0 b=0,0,0,0,0,0' && [ "$(own "$out")" = 2 ] && [ "$(ownb "$out")" = 1 ] \
  && [ -z "$(logs twodis)" ] && ! echo "$out" | grep -q NCCLGUARD && pass two-libnccl-disabled-pure-pass-through \
  || fail two-libnccl-disabled-pure-pass-through "$(echo "$out" | grep -E 'Dereg|RESULT|NCCLGUARD' | head -4) $(logs twodis | head -2)"
# NCCLGUARD_DISABLE=1 and a library linked against a second copy: its calls through the global names, which
# reach the disabled library, go to the copy it binds to (given to the first copy, its communicator would be
# the first copy's and its all-reduce, bound to its own copy, would fail); nothing is logged
out=$(NCCLGUARD_DISABLE=1 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/scopeddis.%p.log" fake_run "$DH" "$NCCL" scoped "$OTHER" 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT scoped=0' && echo "$out" | grep -q 'consumer: RESULT ok nranks=1' \
  && [ -z "$(logs scopeddis)" ] && ! echo "$out" | grep -q NCCLGUARD && pass two-libnccl-disabled-linked-library-reaches-its-own \
  || fail two-libnccl-disabled-linked-library-reaches-its-own "rc=$rc $(echo "$out" | grep -E 'RESULT|NCCLGUARD' | head -4) $(logs scopeddis | head -2)"
# ... and a copy beyond ncclguard's limit: its own internal calls reach it
out=$(NCCLGUARD_DISABLE=1 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/extradis.%p.log" FAKE_NCCL_TRACE=1 fake_run "$DH" "$NCCL" extra \
      $extra "$T/copy4/libnccl.so.2" 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qx 'RESULT extra 0,0,0,0,0,0 0,0,0,0,0,0 0,0,0,0,0,0 0,0,0,0,0,0' \
  && [ "$(own "$out")" = 4 ] && [ "$(ownb "$out")" = 4 ] && [ "$(echo "$out" | grep -c 'Deregister(')" = 8 ] \
  && [ -z "$(logs extradis)" ] && pass libnccl-copy-beyond-the-limit-disabled-calls-its-own \
  || fail libnccl-copy-beyond-the-limit-disabled-calls-its-own "rc=$rc $(echo "$out" | grep -E 'Dereg|RESULT|NCCLGUARD' | head -4) $(logs extradis | head -2)"
# the seed's failure through the second copy's handle: a NULL communicator
export FAKE_NCCL_VERSION=22809
b "$DH" "$NCCL" twonull "$SECOND"
crashed $rc && pass two-libnccl-null-comm-crashes-bare || fail two-libnccl-null-comm-crashes-bare "rc=$rc $out"
g twonull "$DH" "$NCCL" twonull "$SECOND"
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT twonull=4' \
  && lhas twonull 'fn=ncclCommWindowRegister comm=0x0 .*result=ncclInvalidArgument .*reason=null_comm' \
  && pass two-libnccl-null-comm-clean-error || fail two-libnccl-null-comm-clean-error "$(why twonull)"
# NCCLGUARD_DLSYM=0: the second copy's functions are its own (not guarded), its internal calls still its own
out=$(NCCLGUARD_DLSYM=0 NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/twooff.%p.log" FAKE_NCCL_TRACE=1 fake_run "$DH" "$NCCL" two "$SECOND" local 2>&1); rc=$?
unset FAKE_NCCL_VERSION
[ $rc = 0 ] && echo "$out" | grep -qx 'RESULT two a=0,0,0,0,0 b=0,0,0,0,0,0' && [ "$(own "$out")" = 2 ] && [ "$(ownb "$out")" = 1 ] \
  && ! lhas twooff 'fn=ncclCommInitRank' && pass two-libnccl-dlsym-off-internal-calls-still-their-own \
  || fail two-libnccl-dlsym-off-internal-calls-still-their-own "$(echo "$out" | grep -E 'Dereg|RESULT') $(why twooff)"

# --- the Python package turned on inside the interpreter (`import ncclguard`; NCCLGUARD=1 imports it from
# ncclguard.pth: tests/t_package.sh), no LD_PRELOAD: glibc's dlsym comes first in the global scope, so the
# package's ctypes hook (python/ncclguard/_boot.py) asks ncclguard_handle_sym for each nccl* attribute. Also
# with a library built without the x86_64 dlsym entry points (NG_NO_DLSYM_ASM: what every other
# architecture gets). Plain variant only: a sanitizer runtime cannot be dlopen'ed into Python.
if [ "${NG_VARIANT:-plain}" = plain ] && "$PY" -c 'import ctypes' 2>/dev/null; then
  # pyimp NAME LIBRARY MODE [ENV...]: pynccl_like.py MODE after `import ncclguard` with LIBRARY
  pyimp() {
    n=$1 lib=$2 m=$3; shift 3
    out=$(env PYTHONPATH="$NG_ROOT/python:$NG_ROOT/tools/python" NCCLGUARD_LIB="$lib" NCCLGUARD_LOG=info \
          NCCLGUARD_LOG_FILE="$T/$n.%p.log" "$@" LD_LIBRARY_PATH="$FAKE" timeout -k 2 "$NG_TIMEOUT" "$PY" -c "
import sys, runpy, ncclguard, ncclguard._boot as b
print('STATE', ncclguard.state(), b.STATE.get('ctypes_hook'))
sys.argv = ['pynccl_like.py', '$NCCL', '$m']
runpy.run_path('$NG_ROOT/tests/progs/pynccl_like.py')" 2>&1); rc=$?
  }
  NOASM="$T/noasm/libncclguard.so"
  make -s -C "$NG_ROOT" BUILD="$T/noasm" SAN="" CFLAGS="-O2 -g -DNG_NO_DLSYM_ASM" lib >"$T/noasm.log" 2>&1 \
    && ! nm -D --defined-only "$NOASM" | grep -qw dlsym && nm -D --defined-only "$NOASM" | grep -qw ncclguard_handle_sym \
    && pass noasm-library-builds || fail noasm-library-builds "$(tail -3 "$T/noasm.log")"
  for lib in "$SHIM" "$NOASM"; do
    k=$([ "$lib" = "$SHIM" ] && echo asm || echo noasm)
    export FAKE_NCCL_VERSION=22809
    pyimp imp$k "$lib" null
    [ $rc = 0 ] && echo "$out" | grep -q '^STATE loaded True$' && echo "$out" | grep -q 'RESULT null=4' \
      && lhas imp$k 'fn=ncclCommWindowRegister comm=0x0 .*result=ncclInvalidArgument .*reason=null_comm' \
      && pass "ctypes-import-ncclguard-null-comm-clean-error-$k" || fail "ctypes-import-ncclguard-null-comm-clean-error-$k" "$(why imp$k)"
    pyimp impoff$k "$lib" null NCCLGUARD_DLSYM=0
    crashed $rc && pass "ctypes-import-ncclguard-dlsym-off-$k" || fail "ctypes-import-ncclguard-dlsym-off-$k" "$(why impoff$k)"
    unset FAKE_NCCL_VERSION
    pyimp impinit$k "$lib" init
    [ $rc = 0 ] && echo "$out" | grep -q 'RESULT init uid=0 init=0 alloc=0 reg=0 allreduce=0 dereg=0 destroy=0 win=set' \
      && lhas impinit$k 'fn=ncclCommInitRank .*result=ncclSuccess' && lhas impinit$k 'fn=ncclCommWindowRegister .*nranks=1 .*result=ncclSuccess' \
      && lhas impinit$k 'fn=summary calls=5 comms=1 registered=1 ' && ! lhas impinit$k 'fn=ncclAllReduce' \
      && pass "ctypes-import-ncclguard-init-and-registration-guarded-$k" || fail "ctypes-import-ncclguard-init-and-registration-guarded-$k" "$(why impinit$k)"
  done
  # the hook changes nothing else: a missing name still raises AttributeError, a collective is NCCL's own,
  # another library's nccl* names are its own
  out=$(env PYTHONPATH="$NG_ROOT/python:$NG_ROOT/tools/python" NCCLGUARD_LIB="$SHIM" LD_LIBRARY_PATH="$FAKE" "$PY" -c "
import ctypes, ncclguard
lib = ctypes.CDLL('$NCCL')
try:
    lib.ncclNoSuchFunction; print('MISSING no error')
except AttributeError as e:
    print('MISSING AttributeError', 'ncclNoSuchFunction' in str(e))
def where(f):
    import ctypes as c
    class D(c.Structure): _fields_ = [('fname', c.c_char_p), ('fbase', c.c_void_p), ('sname', c.c_char_p), ('saddr', c.c_void_p)]
    d = D(); c.CDLL(None).dladdr(c.cast(f, c.c_void_p), c.byref(d)); return d.fname.decode().rsplit('/', 1)[-1]
print('COLL', where(lib.ncclAllReduce), 'REG', where(lib.ncclCommWindowRegister), 'P', where(lib.pncclCommWindowRegister))
" 2>&1)
  [ "$out" = "MISSING AttributeError True
COLL libnccl.so.2 REG libncclguard.so P libnccl.so.2" ] && pass ctypes-hook-other-lookups-unchanged || fail ctypes-hook-other-lookups-unchanged "$out"
fi
