"""Stub torch.cuda: a current device per process, nothing else."""
import contextlib

import torch

_current = [0]
_capturing = [False]


def current_device():
    return _current[0]


def set_device(d):
    _current[0] = d.index if isinstance(d, torch.device) else int(d)


@contextlib.contextmanager
def device(d):
    old = _current[0]
    _current[0] = d.index if isinstance(d, torch.device) else int(d)
    try:
        yield
    finally:
        _current[0] = old


def synchronize(d=None):
    torch._fake_events.append(("synchronize", d.index if isinstance(d, torch.device) else d))


def is_current_stream_capturing():
    return _capturing[0]
