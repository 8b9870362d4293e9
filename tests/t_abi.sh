# One library for every NCCL: libncclguard.so builds with a C compiler and uthash alone (no nccl.h,
# no cuda.h), exports the same names whatever headers the machine has, and its own declarations of
# NCCL's ABI (shim/nccl_abi.h) agree with the real nccl.h of one release per minor version.
. "$NG_ROOT/tests/lib.sh"
. "$NG_ROOT/tests/nccl_wheels.sh"

# --- builds with no NCCL or CUDA header: a nccl.h or cuda.h that the library included would #error
mkdir -p "$T/poison"
for h in nccl.h cuda.h cuda_runtime.h cuda_runtime_api.h; do echo "#error $h must not be needed" >"$T/poison/$h"; done
if make -s -C "$NG_ROOT" BUILD="$T/nohdr" SAN="" CFLAGS="-O2 -g -I$T/poison" NCCL_INCLUDE= CUDA_INCLUDE= lib >"$T/nohdr.log" 2>&1; then
  pass lib-builds-without-nccl-or-cuda-headers
else fail lib-builds-without-nccl-or-cuda-headers "$(tail -5 "$T/nohdr.log")"; fi
# the map's names: the wrapped NCCL functions and dlsym/dlvsym (x86_64 only: shim/dlsym.c)
want=$(sed -n 's/^ *\([a-z][A-Za-z_]*\);$/\1/p' "$NG_ROOT/shim/ncclguard.map" | sort | tr '\n' ' ')
[ "$(uname -m)" = x86_64 ] || want=$(echo "$want" | tr ' ' '\n' | grep -v '^dl' | tr '\n' ' ')
got=$(nm -D --defined-only "$T/nohdr/libncclguard.so" 2>/dev/null | awk '{print $3}' | sort | tr '\n' ' ')
got2=$(nm -D --defined-only "$SHIM" | awk '$3 ~ /^(p?nccl|dl)/ {print $3}' | sort | tr '\n' ' ')
[ -n "$want" ] && [ "$got" = "$want" ] && [ "$got2" = "$want" ] && pass exports-same-without-headers \
  || fail exports-same-without-headers "map: $want | no headers: $got | suite build: $got2"

# --- the ABI check against real headers -------------------------------------------------------------
abi() { # NAME INCLUDE-DIR: compile tests/abi/abi_check.c against that nccl.h and run it
  cuda=""
  [ -n "${CUDA_INCLUDE_DIR:-}" ] && cuda="-I$CUDA_INCLUDE_DIR -DNG_WITH_CUDA_H"
  if ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -I"$2" $cuda -I"$NG_ROOT/shim" -I"$NG_ROOT/tests/progs" "$NG_ROOT/tests/abi/abi_check.c" \
       -o "$T/abi-$1" >"$T/abi-$1.log" 2>&1 && out=$("$T/abi-$1"); then
    pass "abi-nccl-$1 ($out)"
  else fail "abi-nccl-$1" "$(head -5 "$T/abi-$1.log")"; fi
}
CUDA_INCLUDE_DIR=""
for d in /usr/local/cuda/include /usr/include; do [ -f "$d/cuda.h" ] && { CUDA_INCLUDE_DIR=$d; break; }; done
# the check can fail: a deliberately wrong redeclaration must not compile
mk=$(ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h 2>/dev/null | head -1)
if [ -n "$mk" ]; then
  printf '#include <nccl.h>\n#define NG_ABI_CHECK 1\n#include "nccl_abi.h"\nncclResult_t ncclCommCount(const ncclComm_t c, long* n);\nint main(void){return 0;}\n' >"$T/wrong.c"
  if ${CC:-cc} -std=gnu11 -I"$(dirname "$mk")" -I"$NG_ROOT/shim" "$T/wrong.c" -o "$T/wrong" >/dev/null 2>&1; then
    fail abi-check-detects-a-wrong-prototype "a wrong ncclCommCount prototype compiled"
  else pass abi-check-detects-a-wrong-prototype; fi
  abi "system-$(basename "$(dirname "$(dirname "$mk")")")" "$(dirname "$mk")"
fi
fetched=0
for v in $NG_NCCL_RELEASES; do
  d=$(ng_nccl_release "$v") || { echo "# skip abi-nccl-$v: nvidia-nccl-cu13==$v not reachable on PyPI"; continue; }
  fetched=$((fetched + 1))
  abi "$v" "$d/include"
done
[ "$fetched" -gt 0 ] || echo "# skip abi-nccl-wheels: PyPI not reachable"
