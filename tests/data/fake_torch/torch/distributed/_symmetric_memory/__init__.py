"""Stub torch.distributed._symmetric_memory: PyTorch 2.11's entry points and their checks."""
import os

import torch
import torch.distributed.distributed_c10d as c10d
from torch._C._distributed_c10d import _SymmetricMemory


def empty(*size, dtype=None, device=None):
    n = 1
    for s in size:
        n *= s
    return torch.empty(n, device=device)


def _rendezvous(tensor, group):
    from torch._C._distributed_c10d import ProcessGroup

    if isinstance(group, str):
        group_name = group
    elif isinstance(group, ProcessGroup):
        group_name = group.group_name
    else:
        raise TypeError("rendezvous: unsupported group type: %s" % type(group))
    return _SymmetricMemory.rendezvous(tensor, group_name)


if os.environ.get("FAKE_TORCH_RENAME") == "1":
    rendezvous_v2 = _rendezvous
else:
    def rendezvous(tensor, group):
        return _rendezvous(tensor, group)


def set_backend(name):
    _SymmetricMemory.set_backend(name)


def get_backend(device):
    return _SymmetricMemory.get_backend(torch.device(device))
