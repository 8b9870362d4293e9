"""Stub of PyTorch 2.11's torch._C._distributed_c10d (the parts the hook and the tests use)."""
import os

import torch

_registry = {}


class Backend(object):
    pass


class ProcessGroupGloo(Backend):
    pass


class _ProcessGroupNCCL(Backend):
    """ProcessGroupNCCL: one communicator per device, created by the first collective on it
    (or at construction for an eager group)."""

    _next = [0x5500000000]

    def __init__(self, pg, eager_device=None):
        self.pg = pg
        self.comms = {}
        if eager_device is not None:
            self._create(eager_device)

    def _create(self, dev):
        if dev not in self.comms:
            self._next[0] += 0x1000
            self.comms[dev] = self._next[0]
            torch._fake_events.append(("comm_init", self.pg.group_name, dev))
        return self.comms[dev]

    def _comm_ptr(self):
        # PyTorch: "Get the communicator of the current device."
        if os.environ.get("FAKE_TORCH_COMM_PTR_RAISES") == "1":
            raise RuntimeError("stub: _comm_ptr failed")
        return self.comms.get(torch.cuda.current_device(), 0)


if os.environ.get("FAKE_TORCH_NO_COMM_PTR") == "1":
    del _ProcessGroupNCCL._comm_ptr
if os.environ.get("FAKE_TORCH_NO_NCCL") != "1":
    ProcessGroupNCCL = _ProcessGroupNCCL


class ProcessGroup(object):
    def __init__(self, name, ranks, rank, backend, eager_device=None):
        self.group_name = name
        self._ranks = ranks
        self._rank = rank
        self._backend_name = backend
        if backend == "nccl":
            self._cuda = _ProcessGroupNCCL(self, eager_device)
        else:
            self._cuda = ProcessGroupGloo()
        _registry[name] = self

    def rank(self):
        return self._rank

    def size(self):
        return len(self._ranks)

    def _get_backend(self, dev):
        if dev.type != "cuda":
            raise RuntimeError("No backend type associated with device type %s" % dev.type)
        return self._cuda


def _resolve_process_group(name):
    if name not in _registry:
        raise ValueError("Could not resolve the process group registered under the name %s" % name)
    return _registry[name]


class _SymmetricMemory(object):
    _backend = {"cuda": "CUDA"}

    def __init__(self, tensor, group_name):
        self.tensor = tensor
        self.group_name = group_name
        self.world_size = _resolve_process_group(group_name).size()

    @staticmethod
    def set_backend(name):
        _SymmetricMemory._backend["cuda"] = name

    @staticmethod
    def get_backend(dev):
        if os.environ.get("FAKE_TORCH_BAD_GET_BACKEND") == "1":
            raise RuntimeError("stub: get_backend failed")
        return _SymmetricMemory._backend.get(dev.type)

    @staticmethod
    def rendezvous(tensor, group_name=None):
        if tensor.device.type != "cuda":
            raise RuntimeError("SymmetricMemory does not support device type %s" % tensor.device.type)
        pg = _resolve_process_group(group_name)
        torch._fake_events.append(("rendezvous", group_name, tensor.device.index))
        if _SymmetricMemory._backend["cuda"] == "NCCL":
            nccl = pg._get_backend(tensor.device)
            if not isinstance(nccl, _ProcessGroupNCCL):
                raise RuntimeError("backend must be a NCCL process group")
            comm = nccl.comms.get(tensor.device.index, 0)  # getCommPtr() under CUDAGuard
            if comm == 0:
                # NCCL 2.28.9: ncclCommWindowRegister(NULL, ...) dereferences NULL.
                import signal
                import sys
                sys.stdout.flush()
                sys.stderr.write("stub: ncclCommWindowRegister(comm=NULL): SIGSEGV\n")
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGSEGV)
        return _SymmetricMemory(tensor, group_name)
