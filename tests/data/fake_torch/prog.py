"""Test program for tests/t_pyhook.sh, run against the stub torch (or the real one, see
tests/t_pyhook_torch.sh). Prints WRAPPED <bool>, then ERROR, EVENTS <list> at the end, and with
--incarnations N > 1 (destroy_process_group, init again) HOOK_WARMED <groups the hook remembers>."""
import argparse
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--init", default="lazy", choices=["lazy", "eager", "gloo"])
ap.add_argument("--backend", default="NCCL", choices=["NCCL", "CUDA", "none"])
ap.add_argument("--group", default="world",
                choices=["world", "world-name", "sub", "sub-name", "none"])
ap.add_argument("--times", type=int, default=1)
ap.add_argument("--capture", action="store_true")
ap.add_argument("--symbol", default="rendezvous")
ap.add_argument("--incarnations", type=int, default=1,
                help="destroy_process_group() and start again, this many times in all")
a = ap.parse_args()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

rank = int(os.environ.get("RANK", "0"))
dev = torch.device("cuda", rank)
print("WRAPPED", hasattr(getattr(symm_mem, a.symbol), "__wrapped__"))
sys.stdout.flush()
err = None
for inc in range(a.incarnations):
    if inc:
        del group
        dist.destroy_process_group()
    if a.init == "eager":
        dist.init_process_group("nccl", device_id=dev)
    else:
        dist.init_process_group("gloo" if a.init == "gloo" else "nccl")
    if a.backend != "none":
        symm_mem.set_backend(a.backend)
    group = dist.distributed_c10d._get_default_group()
    if a.group.startswith("sub"):
        group = dist.new_group(ranks=list(range(group.size())))
    if a.group.endswith("-name"):
        group = group.group_name
    if a.group == "none":
        group = None
    if a.capture:
        torch.cuda._capturing[0] = True
    t = symm_mem.empty(16, device=dev)
    for _ in range(a.times):
        try:
            getattr(symm_mem, a.symbol)(t, group)
        except Exception as e:  # noqa: BLE001
            err = "%s: %s" % (type(e).__name__, e)
print("ERROR", err)
print("EVENTS", [e for e in torch._fake_events if e[0] != "synchronize"])
hook = sys.modules.get("ncclguard_hook._symm")
if hook is not None and a.incarnations > 1:
    import gc
    gc.collect()
    print("HOOK_WARMED", len(hook._warmed))  # groups the hook remembers (dead ones drop out)
