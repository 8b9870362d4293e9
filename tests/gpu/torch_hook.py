"""GPU proof of the Python start-up hook (tools/python): symm_mem rendezvous with the NCCL
backend on a group whose NCCL communicator does not exist yet (pytorch/pytorch#188567, docs/PYTORCH.md §1).

Run with one process per GPU, under the launcher (which puts tools/python on PYTHONPATH):
    tools/ncclguard-run -l info -- python3 -m torch.distributed.run --standalone \
        --nproc-per-node=2 tests/gpu/torch_hook.py --mode lazy
Modes:
  lazy           init_process_group("nccl") without device_id: the communicator is created at
                 the first collective; rendezvous on the world group
  lazy-subgroup  the same, rendezvous on dist.new_group(all ranks) (also lazy)
  eager          init_process_group(device_id=...): the communicator exists; the hook must not act
Options: --by object|name (pass the group object, the default, or its name),
         --require-hook (fail at once, without a rendezvous, if the hook is not active: a lazy
         rendezvous without it kills the process with SIGSEGV on NCCL 2.28.9),
         --no-peer-check (skip reading the peer's symmetric buffer through the handle).
Each rank prints one line
    RESULT ok|fail mode=M rank=R world=W by=B hook=active|absent comm_before=0x.. rendezvous=..
           peer=.. allreduce=.. teardown=..
after destroy_process_group() has returned, and exits 0 only if the line says ok. In the lazy
modes "ok" also requires comm_before=0x0 (else the run proves nothing); in eager mode it requires
a communicator before the rendezvous. With `-l info` the hook's line
    ... NCCLGUARD INFO fn=pyhook.rendezvous comm=0x0 ... decision=warmup reason=lazy_comm ...
appears once per rank in the lazy modes and never in eager mode.
If the machine forbids NVLink multicast, export NCCL_NVLS_ENABLE=0
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 first (as tests/gpu/run does).
"""
import argparse
import datetime
import gc
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem


def comm_ptr(group, dev):
    """ProcessGroupNCCL::getCommPtr() of the group on dev (0: not created yet), or None."""
    try:
        backend = group._get_backend(dev)
        with torch.cuda.device(dev):
            return int(backend._comm_ptr())
    except Exception:  # noqa: BLE001
        return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True, choices=["lazy", "lazy-subgroup", "eager"])
    p.add_argument("--by", default="object", choices=["object", "name"])
    p.add_argument("--numel", type=int, default=1 << 16)
    p.add_argument("--require-hook", action="store_true")
    p.add_argument("--no-peer-check", action="store_true")
    a = p.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    hook = "active" if getattr(symm_mem.rendezvous, "_ncclguard_hook", False) else "absent"
    if rank == 0:
        print("torch %s nccl %s mode %s hook %s PYTHONPATH=%s" % (
            torch.__version__, ".".join(map(str, torch.cuda.nccl.version())), a.mode, hook,
            os.environ.get("PYTHONPATH", "")), flush=True)
    if a.require_hook and hook != "active":
        print("RESULT fail mode=%s rank=%d why=hook_absent" % (a.mode, rank), flush=True)
        sys.exit(1)

    kw = {"device_id": dev} if a.mode == "eager" else {}
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120), **kw)
    group = dist.group.WORLD
    if a.mode == "lazy-subgroup":
        group = dist.new_group(list(range(world)))
    grank, gsize = dist.get_rank(group), dist.get_world_size(group)

    before = comm_ptr(group, dev)
    symm_mem.set_backend("NCCL")
    buf = symm_mem.empty(a.numel, dtype=torch.float32, device=dev)
    hdl, rdv = None, "ok"
    try:
        hdl = symm_mem.rendezvous(buf, group.group_name if a.by == "name" else group)
        if hdl.world_size != gsize or hdl.rank != grank:
            rdv = "wrong(rank=%d,world=%d)" % (hdl.rank, hdl.world_size)
    except Exception as e:  # noqa: BLE001 - a clean error is an outcome to report
        rdv = "error(" + str(e).splitlines()[0][:120].replace(" ", "_") + ")"

    buf.fill_(float(grank + 1))
    torch.cuda.synchronize()
    peer = "skipped"
    if hdl is not None and gsize > 1 and not a.no_peer_check:
        dist.barrier(group=group, device_ids=[dev.index])
        other = (grank + 1) % gsize
        try:
            got = hdl.get_buffer(other, (a.numel,), torch.float32)[:16].clone()
            torch.cuda.synchronize()
            peer = "ok" if bool(torch.all(got == float(other + 1))) else "WRONG(%s)" % got[0].item()
        except Exception as e:  # noqa: BLE001
            peer = "unsupported(" + type(e).__name__ + ")"
        dist.barrier(group=group, device_ids=[dev.index])

    # A plain all-reduce on an ordinary tensor, on the group and (subgroup mode) on the world.
    ar = "ok"
    for g in ([group, dist.group.WORLD] if group is not dist.group.WORLD else [group]):
        n = dist.get_world_size(g)
        x = torch.full((1024,), float(dist.get_rank(g) + 1), device=dev)
        dist.all_reduce(x, group=g)
        torch.cuda.synchronize()
        want = n * (n + 1) / 2
        if not bool(torch.all(x == want)):
            ar = "WRONG(%s!=%s)" % (x[0].item(), want)
    after = comm_ptr(group, dev)

    teardown = "ok"
    try:
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001
        teardown = "error(" + type(e).__name__ + ")"
    del hdl, buf
    gc.collect()
    torch.cuda.synchronize()

    why = []
    if rdv != "ok":
        why.append("rendezvous")
    if ar != "ok":
        why.append("allreduce")
    if peer.startswith("WRONG"):
        why.append("peer")
    if teardown != "ok":
        why.append("teardown")
    if a.mode.startswith("lazy") and before != 0:
        why.append("lazy_mode_but_comm_existed")
    if a.mode == "eager" and not before:
        why.append("eager_mode_but_no_comm")
    fmt = lambda v: "unknown" if v is None else "0x%x" % v  # noqa: E731
    print("RESULT %s mode=%s rank=%d world=%d by=%s hook=%s comm_before=%s comm_after=%s "
          "rendezvous=%s peer=%s allreduce=%s teardown=%s%s" % (
              "ok" if not why else "fail", a.mode, rank, world, a.by, hook, fmt(before),
              fmt(after), rdv, peer, ar, teardown, "" if not why else " why=" + ",".join(why)),
          flush=True)
    sys.exit(0 if not why else 1)


if __name__ == "__main__":
    main()
