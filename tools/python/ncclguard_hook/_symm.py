"""The wrapper of torch.distributed._symmetric_memory.rendezvous.

PyTorch 2.11 (torch/distributed/_symmetric_memory/__init__.py) defines
`rendezvous(tensor, group)`, group being a ProcessGroup or a group name, and hands the group
name to the C++ `_SymmetricMemory.rendezvous`. With the NCCL backend the C++ side
(NCCLPeerAllocInfo, symm_mem/NCCLSymmetricMemory.cu) takes `ProcessGroupNCCL::getCommPtr()` on
the tensor's device and calls ncclCommWindowRegister with it. ProcessGroupNCCL creates its
communicator at the first collective unless the group is eager (device_id=), so before that the
pointer is 0 and NCCL 2.28 crashes (docs/PYTORCH.md §1).

The wrapper: when the symm-mem backend of the tensor's device is "NCCL", the group's CUDA
backend is a ProcessGroupNCCL and its `_comm_ptr()` (read on the tensor's device, the device
getCommPtr() looks at) is 0, it runs one one-element all-reduce on that group on the tensor's
device, which makes PyTorch create the communicator, logs it, and calls PyTorch's rendezvous.
Anything else goes straight to PyTorch's function. Any error of its own is logged (once at WARN)
and PyTorch's function is called as if the hook were not there.

A warm-up is remembered per group *object* and device, never per group name: after
destroy_process_group() and init_process_group() PyTorch names the new default group "0" again
(and a new_group "1" again), with a fresh lazy communicator (docs/PYTORCH.md §7). A group counts as
warmed only while it is the very object the warm-up ran on (held by a weak reference, so a dead
group drops out and a recycled id() is not mistaken for it) and its communicator still reads
what the warm-up left (0: the warm-up did not help, do not repeat it).
"""

import functools
import sys
import threading
import time
import weakref

from . import _log

FN = "pyhook.rendezvous"
# What the hook needs from PyTorch, checked when the module is imported.
NEEDS = ("torch.distributed._symmetric_memory.rendezvous",
         "torch.distributed._symmetric_memory.get_backend",
         "torch.distributed.distributed_c10d._resolve_process_group",
         "torch.distributed.all_reduce",
         "torch._C._distributed_c10d.ProcessGroup",
         "torch._C._distributed_c10d.ProcessGroupNCCL._comm_ptr")

_lock = threading.RLock()
_warmed = {}          # (id(group), device index) -> (weakref to the group, comm after the warm-up)
_errors_logged = [0]  # hook errors already logged at WARN


def _lookup(dotted):
    """Resolve a dotted name against sys.modules (never imports anything)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is not None:
            obj = mod
            for p in parts[i:]:
                obj = getattr(obj, p)
            return obj
    raise AttributeError(dotted)


def missing():
    """The names of NEEDS that this PyTorch does not have (empty: the hook can work)."""
    out = []
    for n in NEEDS:
        try:
            _lookup(n)
        except Exception:  # noqa: BLE001
            out.append(n)
    return out


def _inactive_log(what, level=_log.WARN):
    _log.log(level, [("fn", FN), ("decision", "inactive"), ("reason", "no_symbol")],
             "Python hook inactive: %s; a rendezvous on a group without an NCCL communicator "
             "is left to the library's check" % what)


def check_torch_distributed(dist):
    """torch.distributed was just imported: warn when the module the hook watches is gone."""
    try:
        import importlib.machinery
        path = getattr(dist, "__path__", None)
        if not path:
            return
        spec = importlib.machinery.PathFinder.find_spec(
            "torch.distributed._symmetric_memory", list(path))
        if spec is not None:
            return
        c10d = sys.modules.get("torch._C._distributed_c10d")
        if c10d is None or not hasattr(c10d, "ProcessGroupNCCL"):
            return  # no NCCL in this build: nothing to guard
        _inactive_log("this PyTorch has no torch.distributed._symmetric_memory (renamed?)")
    except Exception:  # noqa: BLE001
        pass


def patch_module(mod):
    """torch.distributed._symmetric_memory was just imported: wrap its rendezvous."""
    orig = getattr(mod, "rendezvous", None)
    if orig is None or not callable(orig):
        _inactive_log("PyTorch renamed torch.distributed._symmetric_memory.rendezvous")
        return False
    if getattr(orig, "_ncclguard_hook", False):
        return True
    miss = missing()
    if miss:
        c10d = sys.modules.get("torch._C._distributed_c10d")
        if c10d is not None and not hasattr(c10d, "ProcessGroupNCCL"):
            # A build without NCCL (CPU wheel): the NCCL backend cannot be used at all.
            _inactive_log("this PyTorch has no ProcessGroupNCCL", level=_log.INFO)
        else:
            _inactive_log("PyTorch renamed " + ", ".join(miss))
        return False
    try:
        import inspect
        params = list(inspect.signature(orig).parameters)
    except Exception:  # noqa: BLE001
        params = []
    if not params or params[0] != "tensor" or not (set(params) & {"group", "group_name"}):
        _inactive_log("PyTorch changed the signature of rendezvous to (%s)" % ", ".join(params))
        return False
    mod.rendezvous = _make_wrapper(orig, params)
    _log.log(_log.TRACE, [("fn", FN), ("decision", "installed")],
             "wrapped torch.distributed._symmetric_memory.rendezvous")
    return True


def _make_wrapper(orig, params):
    gkey = "group" if "group" in params else "group_name"
    gpos = params.index(gkey)

    @functools.wraps(orig)
    def rendezvous(*args, **kwargs):
        try:
            tensor = args[0] if args else kwargs.get("tensor")
            if gkey in kwargs:
                group = kwargs[gkey]
            elif len(args) > gpos:
                group = args[gpos]
            else:
                group = None
            _before(tensor, group)
        except Exception as e:  # noqa: BLE001 - the hook must never cost the user a rendezvous
            _hook_error(e)
        return orig(*args, **kwargs)

    rendezvous._ncclguard_hook = True
    return rendezvous


def _hook_error(e):
    _errors_logged[0] += 1
    level = _log.WARN if _errors_logged[0] == 1 else _log.TRACE
    _log.log(level, [("fn", FN), ("decision", "pass"), ("reason", "hook_error")],
             "Python hook failed (%s: %s); calling PyTorch's rendezvous unchanged"
             % (e.__class__.__name__, e))


def _pass(reason, dev=-1, kvs=(), msg=None, t0=None):
    if not _log.enabled(_log.TRACE):
        return
    us = (time.perf_counter() - t0) * 1e6 if t0 is not None else 0.0
    _log.log(_log.TRACE, [("fn", FN)] + list(kvs) + [("us", us), ("decision", "pass"),
                                                     ("reason", reason)],
             msg or "calling PyTorch's rendezvous unchanged", dev=dev)


def _data_ptr(tensor):
    try:
        return tensor.data_ptr()
    except Exception:  # noqa: BLE001
        return 0


def _before(tensor, group):
    t0 = time.perf_counter()
    torch = sys.modules["torch"]
    dist = _lookup("torch.distributed")
    symm = _lookup("torch.distributed._symmetric_memory")
    c10d = _lookup("torch.distributed.distributed_c10d")
    ProcessGroup = _lookup("torch._C._distributed_c10d.ProcessGroup")

    device = getattr(tensor, "device", None)
    if device is None or getattr(device, "type", None) != "cuda":
        return _pass("not_cuda", t0=t0)
    dev = device.index if device.index is not None else torch.cuda.current_device()
    device = torch.device("cuda", dev)

    backend_name = symm.get_backend(device)
    if backend_name != "NCCL":
        return _pass("not_nccl", dev, msg="symmetric-memory backend is %s" % backend_name, t0=t0)

    if not dist.is_initialized():
        return _pass("no_process_group", dev, t0=t0)
    if group is None:
        pg = c10d._get_default_group()
    elif isinstance(group, str):
        try:
            pg = c10d._resolve_process_group(group)
        except Exception:  # noqa: BLE001 - PyTorch reports an unknown name itself
            return _pass("unknown_group", dev, [("group", group)], t0=t0)
    elif isinstance(group, ProcessGroup):
        pg = group
    else:
        return _pass("group_type", dev, t0=t0)
    name = str(pg.group_name)

    try:
        backend = pg._get_backend(device)
    except Exception:  # noqa: BLE001 - no CUDA backend on this group
        return _pass("not_nccl_pg", dev, [("group", name)], t0=t0)
    comm_ptr = getattr(backend, "_comm_ptr", None)
    if comm_ptr is None:  # gloo, a wrapper, a custom backend
        return _pass("not_nccl_pg", dev, [("group", name)],
                     msg="the group's CUDA backend is %s" % type(backend).__name__, t0=t0)

    with _lock:
        # getCommPtr() looks at the *current* device: read it on the tensor's device.
        with torch.cuda.device(dev):
            comm = int(comm_ptr())
            capturing = torch.cuda.is_current_stream_capturing()
        kvs = [("comm", _log.ptr(comm)), ("rank", pg.rank()), ("nranks", pg.size()),
               ("group", name), ("buff", _log.ptr(_data_ptr(tensor))),
               ("size", int(getattr(tensor, "nbytes", 0) or 0))]
        if comm != 0:
            return _pass("comm_exists", dev, kvs, t0=t0)
        if _is_warmed(pg, dev, comm):
            return _pass("warmed", dev, kvs, msg="warm-up already ran on this group and device",
                         t0=t0)
        if capturing:
            return _pass("capturing", dev, kvs, t0=t0)
        _warmup(torch, dist, pg, name, dev, comm_ptr, kvs, t0)


def _forget(ref):
    """Weak-reference callback: the group is gone, so are its entries (no leak)."""
    for key, (r, _) in list(_warmed.items()):
        if r is ref:
            _warmed.pop(key, None)


def _remember(pg, dev, newcomm):
    try:
        ref = weakref.ref(pg, _forget)
    except TypeError:  # a group type without weak references: remember nothing (retries are safe)
        return
    _warmed[(id(pg), dev)] = (ref, newcomm)


def _is_warmed(pg, dev, comm):
    """True only for the same live group object, on this device, whose communicator still
    reads what the warm-up left; a re-created group of the same name (or a recycled id()) is
    not warm."""
    entry = _warmed.get((id(pg), dev))
    if entry is None:
        return False
    ref, warmed_comm = entry
    if ref() is not pg:
        _warmed.pop((id(pg), dev), None)  # another object had this id and died
        return False
    return warmed_comm == comm


def _warmup(torch, dist, pg, name, dev, comm_ptr, kvs, t0):
    """One 1-element all-reduce on the group, on the tensor's device: the first collective of a
    lazily-initialised ProcessGroupNCCL creates its communicator (docs/PYTORCH.md §1)."""
    size = pg.size()
    with torch.cuda.device(dev):
        x = torch.ones(1, device=torch.device("cuda", dev))
        dist.all_reduce(x, group=pg)
        torch.cuda.synchronize(dev)
        got = x.item()
        newcomm = int(comm_ptr())
    _remember(pg, dev, newcomm)
    us = (time.perf_counter() - t0) * 1e6
    kv = [("fn", FN)] + kvs + [("newcomm", _log.ptr(newcomm)), ("us", us),
                               ("decision", "warmup")]
    if newcomm == 0 or got != size:
        _log.log(_log.WARN, kv + [("reason", "warmup_no_comm")],
                 "ran a 1-element all_reduce on group %s (result %s, expected %d) but its NCCL "
                 "communicator is still missing; calling PyTorch's rendezvous anyway"
                 % (name, got, size), dev=dev)
        return
    _log.log(_log.INFO, kv + [("reason", "lazy_comm")],
             "group %s had no NCCL communicator yet (PyTorch creates it at the first collective): "
             "ran a 1-element all_reduce on it, then PyTorch's rendezvous" % name, dev=dev)
