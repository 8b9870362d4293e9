# The Python hook against a REAL PyTorch, without a GPU: every name the hook looks up resolves
# on the real modules, it wraps the real rendezvous, and its decision path (group by object, by
# name, None; backend lookups) runs on a real gloo process group up to the point where a GPU
# would be needed. Needs a Python with torch: $NG_TORCH_PYTHON, else python3 if it has torch;
# otherwise the cases are skipped. (pip install torch: about 1.5 minutes and 4.6 GB.)
: "${NG_ROOT:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$NG_ROOT/tests/lib.sh"

HOOK=$NG_ROOT/tools/python
PY=${NG_TORCH_PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  echo "# skip real_torch: no torch in ${PY} (set NG_TORCH_PYTHON)"
  exit 0
fi

cat >"$T/real.py" <<'EOF'
import os, sys, warnings
warnings.filterwarnings("ignore")
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import ncclguard_hook._symm as hs

print("VERSION", torch.__version__)
r = symm_mem.rendezvous
print("WRAPPED", getattr(r, "_ncclguard_hook", False), r.__name__, r.__doc__ == r.__wrapped__.__doc__,
      r.__wrapped__.__module__)
print("MISSING", hs.missing())
print("LOADER", type(symm_mem.__loader__).__name__, type(symm_mem.__spec__.loader).__name__)
from torch._C._distributed_c10d import ProcessGroupNCCL
print("COMMPTR_DOC", "current device" in (ProcessGroupNCCL._comm_ptr.__doc__ or ""))

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("PORT", "29531"))
dist.init_process_group("gloo", rank=0, world_size=1)
sub = dist.new_group([0])
symm_mem.set_backend("NCCL")

class CudaLike(object):
    """Duck tensor on cuda:0: lets the hook's decision run on a machine without a GPU."""
    device = torch.device("cuda", 0)
    nbytes = 64
    def data_ptr(self):
        return 0x1000

def call(t, g):
    try:
        symm_mem.rendezvous(t, g)
        return "returned"
    except Exception as e:
        return "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:80])

print("CPU", call(torch.zeros(4), dist.group.WORLD))
print("WORLD", call(CudaLike(), dist.group.WORLD))
print("WORLDNAME", call(CudaLike(), dist.group.WORLD.group_name))
print("SUB", call(CudaLike(), sub))
print("SUBNAME", call(CudaLike(), sub.group_name))
print("NONE", call(CudaLike(), None))
print("UNKNOWN", call(CudaLike(), "no-such-group"))
dist.destroy_process_group()
EOF

env -u RANK NCCLGUARD_LOG=trace PYTHONPATH="$HOOK" PYTHONDONTWRITEBYTECODE=1 PORT=$((29000 + $$ % 1000)) \
  timeout -k 5 120 "$PY" "$T/real.py" >"$T/real.out" 2>"$T/real.err"
r=$?
[ $r = 0 ] || fail real_torch_run "exit $r: $(tail -5 "$T/real.err")"
v=$(sed -n 's/^VERSION //p' "$T/real.out")

if has "$T/real.out" '^WRAPPED True rendezvous True torch.distributed._symmetric_memory$' \
   && has "$T/real.err" 'decision=installed'; then pass "real_torch_wraps_rendezvous ($v)"
else fail real_torch_wraps_rendezvous "$(grep WRAPPED "$T/real.out"; grep -v Warn "$T/real.err" | tail -3)"; fi

if has "$T/real.out" '^MISSING \[\]$' && has "$T/real.out" '^LOADER SourceFileLoader SourceFileLoader$' && has "$T/real.out" '^COMMPTR_DOC True$' && ! has "$T/real.err" 'inactive'; then
  pass "real_torch_names_resolve ($v)"
else fail real_torch_names_resolve "$(grep -E 'MISSING|COMMPTR' "$T/real.out")"; fi

# CPU tensor: not_cuda, PyTorch's own error unchanged
if has "$T/real.out" '^CPU RuntimeError: SymmetricMemory does not support device type cpu' \
   && has "$T/real.err" 'decision=pass reason=not_cuda'; then pass real_torch_cpu_tensor_passes
else fail real_torch_cpu_tensor_passes "$(grep '^CPU' "$T/real.out")"; fi

# group by object/name, subgroup by object/name, None -> default group: resolved by PyTorch's
# own resolver, NCCL symm-mem backend seen, the gloo group's CUDA backend has no _comm_ptr
n=$(grep -c 'decision=pass reason=not_nccl_pg msg="the group.s CUDA backend is ProcessGroupGloo"' "$T/real.err")
w=$(grep -c 'group=0 .*reason=not_nccl_pg' "$T/real.err")
s=$(grep -c 'group=1 .*reason=not_nccl_pg' "$T/real.err")
if [ "$n" = 5 ] && [ "$w" = 3 ] && [ "$s" = 2 ] && ! grep -q hook_error "$T/real.err" \
   && has "$T/real.out" '^NONE TypeError: rendezvous: unsupported group type'; then
  pass real_torch_group_resolution
else fail real_torch_group_resolution "not_nccl_pg lines: $n (world $w, sub $s); $(grep -E '^(WORLD|SUB|NONE)' "$T/real.out")"; fi

if has "$T/real.err" 'group=no-such-group .*reason=unknown_group' && has "$T/real.out" '^UNKNOWN '; then
  pass real_torch_unknown_group_passes
else fail real_torch_unknown_group_passes "$(grep UNKNOWN "$T/real.out")"; fi
