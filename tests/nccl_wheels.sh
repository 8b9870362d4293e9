# Sourced by the test scripts: the real NCCL of one release per minor version, from PyPI's
# nvidia-nccl-cu13 wheels (nccl.h + libnccl.so.2), cached in $NG_WHEEL_CACHE (default
# build/wheels, shared by the plain and sanitizer variants: each wheel is fetched once per clone).
# ng_nccl_release VERSION -> prints the folder holding include/nccl.h and lib/libnccl.so.2, or
# nothing (and status 1) where PyPI is not reachable.
NG_NCCL_RELEASES="2.27.7 2.28.3 2.28.9 2.29.7 2.30.7 2.31.2 2.32.3"
: "${NG_WHEEL_CACHE:=$NG_ROOT/build/wheels}"

ng_nccl_release() {
  v=$1 d="$NG_WHEEL_CACHE/nccl-$1"
  if [ ! -f "$d/lib/libnccl.so.2" ] || [ ! -f "$d/include/nccl.h" ]; then
    mkdir -p "$NG_WHEEL_CACHE/dl" || return 1
    # one fetch at a time across concurrent test scripts
    (
      flock 9
      [ -f "$d/lib/libnccl.so.2" ] && exit 0
      timeout 300 python3 -m pip download -q --no-deps --only-binary=:all: -d "$NG_WHEEL_CACHE/dl" \
        "nvidia-nccl-cu13==$v" >/dev/null 2>&1 || exit 1
      python3 - "$NG_WHEEL_CACHE/dl" "$v" "$d" <<'PY' || exit 1
import glob, os, sys, zipfile
dl, v, d = sys.argv[1:]
whl = glob.glob(os.path.join(dl, "nvidia_nccl_cu13-%s-*.whl" % v))[0]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        base = os.path.basename(n)
        if base in ("nccl.h", "libnccl.so.2"):
            sub = "include" if base == "nccl.h" else "lib"
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            with z.open(n) as src, open(os.path.join(d, sub, base + ".part"), "wb") as dst:
                dst.write(src.read())
            os.rename(os.path.join(d, sub, base + ".part"), os.path.join(d, sub, base))
os.remove(whl)
PY
    ) 9>"$NG_WHEEL_CACHE/.lock" || return 1
  fi
  [ -f "$d/lib/libnccl.so.2" ] && echo "$d"
}
