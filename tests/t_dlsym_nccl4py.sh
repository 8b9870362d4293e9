# nccl4py from PyPI against the fake libnccl (issue 22): NVIDIA's Python bindings find every NCCL
# function with dlsym(RTLD_DEFAULT, name), falling back to dlsym on the handle cuda.pathfinder returns
# only where that is NULL (NVIDIA/nccl, bindings/nccl4py/nccl/bindings/_internal/nccl_linux.pyx), so a
# preloaded ncclguard answers the wrapped names through the global scope, with or without its own
# dlsym (shim/dlsym.c). Driven at the level of nccl.bindings.nccl (tests/progs/nccl4py_prog.py):
# importing it needs only nccl4py, cuda-pathfinder and numpy. The high-level nccl.core imports against
# the fakes too (cuda-core, cuda-bindings), but cannot go further: cuda.core's Device initialises
# cuda-bindings' driver, which needs cuGetProcAddress_v2, a function the fake libcuda does not have;
# and nccl.core refuses a null communicator's register_window before NCCL is called.
# The pinned wheels are pip-installed once into $NG_WHEEL_CACHE/nccl4py-<version>-<python tag> (build/wheels,
# as tests/nccl_wheels.sh); skipped where PyPI is not reachable or nccl4py does not import.
# Plain variant only: the route is the dynamic linker's, the same under the sanitizers.
. "$NG_ROOT/tests/lib.sh"

if [ "${NG_VARIANT:-plain}" != plain ]; then
  echo "# skip nccl4py: tested in the plain variant only"
  exit 0
fi
PY=${NG_PYTHON:-python3}
NCCL4PY_PINS="nccl4py==0.6.0 cuda-pathfinder==1.9.1 numpy==2.4.6 packaging==26.4 cuda-core==1.2.2 cuda-bindings==13.5.0"
: "${NG_WHEEL_CACHE:=$NG_ROOT/build/wheels}"
tag=$("$PY" -c 'import sys; print(sys.implementation.cache_tag)' 2>/dev/null) || {
  echo "# skip nccl4py: $PY does not run"; exit 0; }
D="$NG_WHEEL_CACHE/nccl4py-0.6.0-$tag"
if [ ! -f "$D/.complete" ]; then
  mkdir -p "$NG_WHEEL_CACHE" || exit 1
  # one install at a time across concurrent test scripts; into a fresh folder, renamed when complete.
  # --no-deps with every dependency pinned: nccl4py's extras would bring a real libnccl
  # (nvidia-nccl-cu13), which cuda.pathfinder would prefer to the fake.
  (
    flock 9
    [ -f "$D/.complete" ] && exit 0
    rm -rf "$D.part"
    timeout 300 "$PY" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --retries 1 --timeout 20 --target "$D.part" $NCCL4PY_PINS >"$T/pip.log" 2>&1 || { rm -rf "$D.part"; exit 1; }
    : >"$D.part/.complete" && rm -rf "$D" && mv "$D.part" "$D"
  ) 9>"$NG_WHEEL_CACHE/.lock-nccl4py"
  if [ ! -f "$D/.complete" ]; then
    echo "# skip nccl4py: pip could not install $NCCL4PY_PINS (PyPI not reachable?): $(grep -v WARNING "$T/pip.log" | tail -1)"
    exit 0
  fi
fi
export PYTHONPATH="$D" PYTHONNOUSERSITE=1
PROG="$NG_ROOT/tests/progs/nccl4py_prog.py"
NCCL=$FAKE/libnccl.so.2

logs() { cat "$T/$1".*.log 2>/dev/null; }
lhas() { logs "$1" | grep -Eq -- "$2"; }
why() { echo "rc=$rc $(echo "$out" | tail -3 | tr '\n' ' ') | $(logs "$1" | grep -E 'WARN|fn=dlsym' | head -3)"; }
g() { n=$1; shift; out=$(NCCLGUARD_LOG=info NCCLGUARD_LOG_FILE="$T/$n.%p.log" fake_run "$@" 2>&1); rc=$?; }
b() { out=$(bare_run "$@" 2>&1); rc=$?; }

# nccl4py must import against the fakes and load the fake libnccl (not one of a wheel in site-packages)
b "$PY" "$PROG" probe
if [ $rc != 0 ]; then
  echo "# skip nccl4py: nccl.bindings.nccl does not import: $(echo "$out" | tail -1)"
  exit 0
fi
if ! echo "$out" | grep -q "^LIB $NCCL "; then
  echo "# skip nccl4py: cuda.pathfinder loads another libnccl: $(echo "$out" | grep '^LIB')"
  exit 0
fi

# --- the seed's failure through nccl4py: a NULL communicator on 2.28.9 ------------------------------------
export FAKE_NCCL_VERSION=22809
b "$PY" "$PROG" null
crashed $rc && echo "$out" | grep -q "^LIB $NCCL 22809" && pass nccl4py-null-comm-crashes-bare \
  || fail nccl4py-null-comm-crashes-bare "rc=$rc $out"
g null "$PY" "$PROG" null
[ $rc = 0 ] && echo "$out" | grep -q '^RESULT null=4$' \
  && lhas null 'fn=ncclCommWindowRegister comm=0x0 .*result=ncclInvalidArgument .*reason=null_comm' \
  && ! lhas null 'fn=dlsym' && pass nccl4py-null-comm-clean-error || fail nccl4py-null-comm-clean-error "$(why null)"
# the global scope, not ncclguard's dlsym on the handle: the same with that switched off
g off env NCCLGUARD_DLSYM=0 "$PY" "$PROG" null
[ $rc = 0 ] && echo "$out" | grep -q '^RESULT null=4$' \
  && lhas off 'fn=ncclCommWindowRegister comm=0x0 .*reason=null_comm' \
  && pass nccl4py-reached-through-rtld-default || fail nccl4py-reached-through-rtld-default "$(why off)"
unset FAKE_NCCL_VERSION

# --- a communicator made through nccl4py: ncclguard sees init, registration, deregistration, destroy;
# the collective goes straight to NCCL -------------------------------------------------------------------
g init "$PY" "$PROG" init
[ $rc = 0 ] && echo "$out" | grep -q '^RESULT init init=0 reg=0 allreduce=0 dereg=0 destroy=0 win=set$' \
  && lhas init 'fn=ncclCommInitRank .*result=ncclSuccess' \
  && lhas init 'fn=ncclCommWindowRegister .*rank=0 nranks=1 .*result=ncclSuccess .*decision=register' \
  && lhas init 'fn=ncclCommWindowDeregister .*result=ncclSuccess' && lhas init 'fn=ncclCommDestroy .*result=ncclSuccess' \
  && lhas init 'fn=summary calls=5 comms=1 registered=1' && ! lhas init 'fn=ncclAllReduce' \
  && pass nccl4py-init-and-registration-guarded || fail nccl4py-init-and-registration-guarded "$(why init)"

# --- nccl.core, the high-level API: imports against the fakes, refuses a null communicator itself ---------
g core "$PY" "$PROG" core
[ $rc = 0 ] && echo "$out" | grep -q '^RESULT core=NcclInvalid ' && ! lhas core 'fn=ncclCommWindowRegister' \
  && pass nccl4py-core-refuses-null-comm || fail nccl4py-core-refuses-null-comm "$(why core)"
