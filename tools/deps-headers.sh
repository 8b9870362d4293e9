#!/bin/sh
# NCCL's and CUDA's headers from pinned PyPI wheels, for the fakes and test programs (make deps, when
# the system has no CUDA toolkit; the library and the tools need neither header).
# Usage: tools/deps-headers.sh DIR nccl|cuda...
#   nccl -> DIR/nccl/include/nccl.h (nvidia-nccl-cu13)
#   cuda -> DIR/cuda/include/cuda.h, cuda_runtime_api.h, what they include (nvidia-cuda-runtime,
#           nvidia-cuda-crt: crt/*.h, nvidia-cuda-cccl: nv/target for cuda_fp16.h)
# Each folder gets a file 'wheels' naming what it was made from; one that names the pins below is
# kept as it is (a second run downloads nothing). The wheels are fetched with python3 -m pip into a
# temporary folder, or kept in $NG_WHEEL_CACHE/deps when that is set (the tests: build/wheels).
# Exit status 0, or 1 with one line on stderr that names both ways out (the toolkit, or PyPI).
set -u
# NCCL 2.28.9: the release the fake NCCL models (tests/fake/README.md), one of tests/nccl_wheels.sh's;
# CUDA 13.0: the same CUDA as nvidia-nccl-cu13 2.28.9 and PyTorch 2.11's wheels.
NCCL_WHEELS="nvidia-nccl-cu13==2.28.9"
CUDA_WHEELS="nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85"

[ $# -ge 1 ] || { echo "usage: tools/deps-headers.sh DIR nccl|cuda..." >&2; exit 2; }
dir=$1; shift
PY=${PYTHON:-python3}
tmp=""
trap '[ -n "$tmp" ] && rm -rf "$tmp"' EXIT

# the headers this machine lacks, for the error message
lacks=$(echo "$*" | sed 's/nccl/nccl.h/; s/cuda/cuda.h/; s/ / and /')
for what in "$@"; do
  case "$what" in
    nccl) pins=$NCCL_WHEELS; hdr=nccl.h ;;
    cuda) pins=$CUDA_WHEELS; hdr=cuda.h ;;
    *) echo "tools/deps-headers.sh: unknown '$what' (nccl or cuda)" >&2; exit 2 ;;
  esac
  d="$dir/$what"
  if [ -f "$d/include/$hdr" ] && [ "$(cat "$d/wheels" 2>/dev/null)" = "$pins" ]; then continue; fi
  if [ -n "${NG_WHEEL_CACHE:-}" ]; then dl="$NG_WHEEL_CACHE/deps"
  else [ -n "$tmp" ] || tmp=$(mktemp -d "${TMPDIR:-/tmp}/ngdeps.XXXXXX") || exit 1; dl=$tmp; fi
  mkdir -p "$dl" "$dir" || exit 1
  echo "$hdr from PyPI: $pins"
  # a wheel already in the download folder is not asked for again
  need=""
  for p in $pins; do
    n=$(echo "${p%%==*}" | tr - _) v=${p#*==}
    ls "$dl/$n-$v-"*.whl >/dev/null 2>&1 || need="$need $p"
  done
  if [ -n "$need" ] && ! timeout 600 "$PY" -m pip download -q --no-deps --only-binary=:all: \
       --disable-pip-version-check --timeout 30 --retries 1 -d "$dl" $need >"$dl/pip.log" 2>&1; then
    why=$(grep -v '^ *$' "$dl/pip.log" | tail -1 | cut -c1-120)
    echo "ncclguard: no $lacks on this machine and none from PyPI ($PY -m pip download$need: ${why:-failed})." \
         "Either install the CUDA toolkit (with NCCL's nccl.h), or make PyPI reachable to" \
         "$PY -m pip and run make deps again; or set NCCL_INCLUDE=dir CUDA_INCLUDE=dir." >&2
    exit 1
  fi
  rm -rf "$d.tmp"
  "$PY" - "$dl" "$d.tmp/include" $pins <<'PY' || { echo "ncclguard: could not unpack $pins from $dl" >&2; exit 1; }
import glob, os, sys, zipfile
dl, out, pins = sys.argv[1], sys.argv[2], sys.argv[3:]
for pin in pins:
    name, ver = pin.split("==")
    whl = sorted(glob.glob(os.path.join(dl, "%s-%s-*.whl" % (name.replace("-", "_"), ver))))[0]
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            # nvidia/<pkg>/include/<path>; of CCCL only nv/ (nv/target, which cuda_fp16.h includes)
            parts = n.split("/")
            if len(parts) < 4 or parts[0] != "nvidia" or parts[2] != "include" or n.endswith("/"):
                continue
            rel = "/".join(parts[3:])
            if name == "nvidia-cuda-cccl" and not rel.startswith("nv/"):
                continue
            dst = os.path.join(out, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with z.open(n) as src, open(dst, "wb") as f:
                f.write(src.read())
PY
  [ -f "$d.tmp/include/$hdr" ] || { echo "ncclguard: $pins holds no $hdr" >&2; exit 1; }
  echo "$pins" >"$d.tmp/wheels"
  rm -rf "$d" && mv "$d.tmp" "$d" || exit 1
done
exit 0
