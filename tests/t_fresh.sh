#!/bin/sh
# The README's first command on a machine without the CUDA toolkit: in a mount namespace that hides
# /usr/local/cuda and /usr/local/include (where the toolkit's nccl.h and cuda.h are here), a fresh
# `git clone` of the repository runs `make deps demo`. make deps fetches NCCL's and CUDA's headers
# from pinned PyPI wheels into .deps/ (tools/deps-headers.sh) and says so in one line; the demo
# builds quietly (one line saying what it builds, no compiler command line), prints no escape code into a file and no line of 100
# characters or more, writes its logs into build/demo-logs and ends with ncclguard-report's output.
# Plain variant only; needs root, unshare and git; skipped where PyPI is not reachable. The wheels
# are kept in build/wheels/deps ($NG_WHEEL_CACHE), so a second run downloads nothing.
. "$NG_ROOT/tests/lib.sh"

if [ "${NG_VARIANT:-plain}" != plain ]; then
  echo "# skip fresh-clone: tested in the plain variant only"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1 || ! unshare -m true 2>/dev/null; then
  echo "# skip fresh-clone: needs root and unshare -m (a mount namespace hiding the CUDA toolkit)"
  exit 0
fi
if ! command -v git >/dev/null 2>&1 || ! git -C "$NG_ROOT" rev-parse -q --verify HEAD >/dev/null 2>&1; then
  echo "# skip fresh-clone: $NG_ROOT is not a git checkout"
  exit 0
fi
if ! git clone -q "$NG_ROOT" "$T/clone" >"$T/clone.log" 2>&1; then
  fail fresh-clone "git clone: $(tail -3 "$T/clone.log")"
  exit 0
fi
hide=""
for d in /usr/local/cuda /usr/local/include; do [ -d "$d" ] && hide="$hide $d"; done
start=$(date +%s)
# As a user runs it: no make, compiler or header setting inherited from the suite's make.
# shellcheck disable=SC2016
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u NCCL_INCLUDE -u CUDA_INCLUDE -u BUILD -u CFLAGS -u SAN \
  NG_WHEEL_CACHE="${NG_WHEEL_CACHE:-$NG_ROOT/build/wheels}" timeout -k 5 900 \
  unshare -m sh -c 'for d in $1; do mount -t tmpfs none "$d" || exit 97; done
                    [ ! -e /usr/local/cuda/include/nccl.h ] && [ ! -e /usr/local/include/cuda.h ] || exit 98
                    cd "$2" && make deps demo' sh "$hide" "$T/clone" >"$T/fresh.out" 2>&1 </dev/null
rc=$?
secs=$(( $(date +%s) - start ))
O="$T/fresh.out"
if [ $rc != 0 ] && has "$O" 'none from PyPI'; then
  echo "# skip fresh-clone: PyPI not reachable: $(grep 'none from PyPI' "$O" | cut -c1-160)"
  exit 0
fi
[ $rc = 0 ] && pass "fresh-clone-make-deps-demo (${secs}s)" \
  || fail fresh-clone-make-deps-demo "rc=$rc after ${secs}s: $(tail -8 "$O")"

# make deps said, in one line, where the headers came from: .deps, unless this machine has them
# somewhere the namespace does not hide (/usr/include, a python3's nvidia-* wheels)
if [ -e /usr/include/nccl.h ] || [ -e /usr/include/cuda.h ] \
   || python3 -c 'import nvidia' >/dev/null 2>&1; then
  echo "# skip fresh-clone-headers-from-pypi: this machine has NCCL or CUDA headers outside the hidden folders"
else
  n=$(grep -c '^headers: nccl.h, cuda.h from \.deps (PyPI nvidia-nccl-cu13==[0-9.]*, nvidia-cuda-runtime==' "$O")
  [ -d "$T/clone/.deps/nccl/include" ] && [ -f "$T/clone/.deps/cuda/include/cuda_runtime_api.h" ] \
    && [ "$n" -ge 1 ] && pass fresh-clone-headers-from-pypi \
    || fail fresh-clone-headers-from-pypi "$(grep -E '^(headers|fetching)' "$O" | head -4)"
fi

# quiet: no compiler command line; no escape code (the output is a file); lines under 100 characters
# and one line before the quiet build says what it builds
cmds=$(grep -E '^(cc|gcc|clang|ccache) |(^| )-o [^ ]+\.(so|o)( |$)' "$O" | head -3)
[ -z "$cmds" ] && grep -q '^building the library, the tools and the fake NCCL into build/ ' "$O" \
  && pass fresh-clone-demo-quiet || fail fresh-clone-demo-quiet "compiler lines: $cmds; $(grep -c '^building ' "$O") building line(s)"
esc=$(printf '\033')
long=$(awk 'length >= 100' "$O" | head -2 | cut -c1-120)
if ! grep -q "$esc" "$O" && [ -z "$long" ]; then pass fresh-clone-demo-plain-short-lines
else fail fresh-clone-demo-plain-short-lines "escape codes: $(grep -c "$esc" "$O"); long: $long"; fi

# it ends with ncclguard-report on the logs it wrote: the command, then the report's first line,
# and the output's last line is the end of the report's
logs=$(ls "$T/clone/build/demo-logs"/*/*.log 2>/dev/null | wc -l)
cmdline=$(grep -n '^\$ build/ncclguard-report build/demo-logs$' "$O" | cut -d: -f1 | tail -1)
rep="$T/clone/build/demo-logs/report.out"
last=$(tail -n 1 "$O" | sed 's/^ *//')
if [ "$logs" = 3 ] && [ -n "$cmdline" ] && sed -n "$((cmdline + 1))p" "$O" | grep -q '^ncclguard-report: 3 files, ' \
   && [ -s "$rep" ] && [ -n "$last" ] && tail -n 1 "$rep" | grep -qF -- "$last"; then
  pass fresh-clone-demo-ends-with-report
else fail fresh-clone-demo-ends-with-report "logs=$logs report at line ${cmdline:-none}; tail: $(tail -3 "$O")"; fi
