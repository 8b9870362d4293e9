"""Stub torch.distributed.distributed_c10d."""
import os

import torch
from torch._C._distributed_c10d import (  # noqa: F401
    ProcessGroup, _ProcessGroupNCCL, _registry, _resolve_process_group)

_world = {"default": None, "count": 0}


def _rank_world():
    return int(os.environ.get("RANK", "0")), int(os.environ.get("FAKE_TORCH_WORLD", "2"))


def init_process_group(backend="nccl", device_id=None, **_):
    rank, world = _rank_world()
    eager = device_id.index if device_id is not None else None
    _world["default"] = ProcessGroup("0", list(range(world)), rank, backend, eager)
    _world["count"] = 1


def new_group(ranks=None, backend=None, **_):
    rank, world = _rank_world()
    ranks = list(ranks) if ranks is not None else list(range(world))
    name = str(_world["count"])
    _world["count"] += 1
    default = _get_default_group()
    return ProcessGroup(name, ranks, ranks.index(rank), backend or default._backend_name)


def is_initialized():
    return _world["default"] is not None


def _get_default_group():
    if _world["default"] is None:
        raise ValueError("Default process group has not been initialized")
    return _world["default"]


def get_rank(group=None):
    return (group or _get_default_group()).rank()


def all_reduce(tensor, op=None, group=None, async_op=False):
    pg = group or _get_default_group()
    torch._fake_events.append(("all_reduce", pg.group_name, tensor.device.index, tensor.numel()))
    if pg._backend_name == "nccl":
        pg._cuda._create(tensor.device.index)
    tensor.values = [v * pg.size() for v in tensor.values]


def destroy_process_group(group=None):
    # PyTorch 2.11 shuts the group's backends down (their communicators are gone); destroying the
    # default group (None) destroys every group and resets the group counter, so the next
    # init_process_group names its group "0" again and the next new_group "1" again, each with a
    # fresh lazy communicator (docs/PYTORCH.md §7).
    if group is None or group is _world["default"]:
        pgs = list(_registry.values())
        _registry.clear()
        _world["default"] = None
        _world["count"] = 0
    else:
        pgs = [group]
        _registry.pop(group.group_name, None)
    for pg in pgs:
        if isinstance(pg._cuda, _ProcessGroupNCCL):
            pg._cuda.comms.clear()
        torch._fake_events.append(("destroy", pg.group_name))
