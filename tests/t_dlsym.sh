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

# --- a communicator made through the handle: ncclguard sees the init and the registration --------------------
g init "$DH" "$NCCL" init
[ $rc = 0 ] && echo "$out" | grep -q 'RESULT init uid=0 init=0 alloc=0 reg=0 win=set dereg=0 destroy=0' \
  && lhas init 'fn=ncclCommInitRank .*result=ncclSuccess' && lhas init 'fn=ncclCommWindowRegister .*rank=0 nranks=1 .*result=ncclSuccess' \
  && lhas init 'fn=ncclCommDestroy .*result=ncclSuccess' && lhas init 'fn=summary calls=4 comms=1 registered=1' \
  && pass dlsym-handle-init-and-registration-guarded || fail dlsym-handle-init-and-registration-guarded "$(why init)"

# --- every other lookup as glibc answers it; every wrapped name redirected, on dlsym and dlvsym -------------
names=$(sed -n '/global:/,/local:/p' "$NG_ROOT/shim/ncclguard.map" | grep -o 'nccl[A-Za-z]*')
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

# --- a second libnccl: its handle is answered as glibc does, with one INFO line naming it --------------------
export FAKE_NCCL_VERSION=22809
out=$(NCCLGUARD_NCCL_LIB="$NCCL" NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/two.%p.log" fake_run "$DH" "$VNCCL" reg NCCL_FAKE 2>&1); rc=$?
crashed $rc && lhas two "INFO fn=dlsym .*dlsym on the handle of $VNCCL \\(ncclCommWindowRegister\\): not the libnccl ncclguard forwards to \\($NCCL\\)" \
  && pass dlsym-second-libnccl-not-redirected || fail dlsym-second-libnccl-not-redirected "$(why two)"
unset FAKE_NCCL_VERSION
out=$(echo $names | NCCLGUARD_NCCL_LIB="$NCCL" NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/two2.%p.log" fake_run "$DH" "$VNCCL" lookups NCCL_FAKE 2>/dev/null)
[ "$out" = "$out_b" ] && [ "$(logs two2 | grep -c 'fn=dlsym')" = 1 ] && pass dlsym-second-libnccl-one-line \
  || fail dlsym-second-libnccl-one-line "$(logs two2 | grep -c 'fn=dlsym') lines; $(echo "$out" | grep ncclguard | head -2)"

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
