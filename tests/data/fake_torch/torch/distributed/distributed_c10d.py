"""Stub torch.distributed.distributed_c10d."""
import os

import torch
from torch._C._distributed_c10d import ProcessGroup, _registry, _resolve_process_group  # noqa: F401

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
    _registry.clear()
    _world["default"] = None
