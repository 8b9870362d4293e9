"""Stub torch.distributed (PyTorch 2.11 names)."""

import torch
from torch._C._distributed_c10d import ProcessGroup  # noqa: F401

from . import distributed_c10d
from .distributed_c10d import (  # noqa: F401
    all_reduce, destroy_process_group, get_rank, init_process_group, is_initialized, new_group)


def is_available():
    return True
