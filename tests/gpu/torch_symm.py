"""PyTorch symmetric memory on the NCCL backend (pytorch/pytorch#188567, docs/PYTORCH.md §1).

Run under torchrun, one process per GPU:
    python3 -m torch.distributed.run --standalone --nproc-per-node=N tests/gpu/torch_symm.py --mode MODE
Modes:
  lazy              init_process_group without device_id (NCCL communicator created lazily),
                    then symm_mem rendezvous on the world group: SIGSEGV on NCCL 2.28.9
  lazy-subgroup     the same on a dist.new_group(...) subgroup
  eager             init_process_group(device_id=...): communicator exists before rendezvous
  collective-first  one all_reduce on the group before rendezvous
Each rank prints "rank R/N: RESULT ok|fail rendezvous=... peer=... allreduce=..." and exits 0 only
if rendezvous worked and the all-reduce result is right; it always ends with destroy_process_group
so that teardown is exercised. Export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1 before running (tests/gpu/run does).
"""
import argparse
import datetime
import gc
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def say(rank, world, msg):
    print(f"rank {rank}/{world}: {msg}", flush=True)


def loaded_nccl():
    """'CODE (PATH)' of the libnccl mapped into this process, from its own ncclGetVersion; 'unknown' if none"""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            paths = [ln.split()[-1] for ln in f if "/libnccl.so" in ln]  # not libncclguard.so
    except OSError:
        paths = []
    for p in dict.fromkeys(paths):
        try:
            v = ctypes.c_int(0)
            if ctypes.CDLL(p).ncclGetVersion(ctypes.byref(v)) == 0:
                return f"{v.value} ({p})"
        except (OSError, AttributeError):
            continue
    return "unknown"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True, choices=["lazy", "lazy-subgroup", "eager", "collective-first"])
    p.add_argument("--numel", type=int, default=1 << 20)
    a = p.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if os.environ.get("NGTEST_HOST_PER_PROCESS") == "1":
        # ncclguard-doctor --probe --ranks N beyond the GPUs: ranks share a GPU, each process a host of its own
        # to NCCL (NCCL_HOSTID), joined over its network transport, as the probe's other programs do
        os.environ["NCCL_HOSTID"] = f"ngtest-{os.getpid()}"
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    if rank == 0:
        say(rank, world, f"torch {torch.__version__} nccl {torch.cuda.nccl.version()} mode {a.mode}")
        # the NCCL this process really runs (the one put first with LD_PRELOAD, else the one PyTorch links), not
        # the version PyTorch was built with: ncclGetVersion of the libnccl mapped here
        say(rank, world, f"loaded NCCL version {loaded_nccl()}")

    kw = {"device_id": dev} if a.mode == "eager" else {}
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120), **kw)
    group = dist.group.WORLD
    if a.mode == "lazy-subgroup":
        group = dist.new_group(list(range(world)))
    grank, gsize = dist.get_rank(group), dist.get_world_size(group)
    if a.mode == "collective-first":
        t = torch.ones(1, device=dev)
        dist.all_reduce(t, group=group)
        torch.cuda.synchronize()
        say(rank, world, f"collective before rendezvous: {t.item()}")

    symm_mem.set_backend("NCCL")
    buf = symm_mem.empty(a.numel, dtype=torch.float32, device=dev)
    say(rank, world, f"step: rendezvous on group {group.group_name} (size {gsize})")
    hdl, rdv = None, "ok"
    try:
        hdl = symm_mem.rendezvous(buf, group.group_name)
    except Exception as e:  # a clean error is an outcome to report, not a crash
        rdv = "error(" + str(e).splitlines()[0][:120].replace(" ", "_") + ")"
    say(rank, world, f"rendezvous: {rdv}")

    buf.fill_(float(grank + 1))
    torch.cuda.synchronize()
    peer = "n/a"
    if hdl is not None and gsize > 1:
        dist.barrier(group=group, device_ids=[dev.index])
        other = (grank + 1) % gsize
        try:
            remote = hdl.get_buffer(other, (a.numel,), torch.float32)
            got = remote[:16].clone()
            torch.cuda.synchronize()
            peer = "ok" if bool(torch.all(got == float(other + 1))) else f"WRONG({got[0].item()})"
        except Exception as e:
            peer = "unsupported(" + type(e).__name__ + ")"
        dist.barrier(group=group, device_ids=[dev.index])

    say(rank, world, "step: all_reduce on the symmetric buffer")
    dist.all_reduce(buf, group=group)
    torch.cuda.synchronize()
    want = gsize * (gsize + 1) / 2
    ar = "ok" if bool(torch.all(buf == want)) else f"WRONG({buf[0].item()}!={want})"

    ok = rdv == "ok" and ar == "ok" and not peer.startswith("WRONG")
    say(rank, world, f"RESULT {'ok' if ok else 'fail'} rendezvous={rdv} peer={peer} allreduce={ar}")
    say(rank, world, "step: destroy_process_group")
    dist.destroy_process_group()
    del hdl, buf
    gc.collect()
    say(rank, world, "step: exit")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
