"""NCCL through nccl4py (NVIDIA's Python bindings, PyPI "nccl4py"), at the level of nccl.bindings.nccl:
nccl4py 0.6.0 finds each NCCL function with dlsym(RTLD_DEFAULT, name) first and only where that is
NULL loads libnccl with cuda.pathfinder and looks the name up on its handle
(NVIDIA/nccl, bindings/nccl4py/nccl/bindings/_internal/nccl_linux.pyx, _check_or_init_nccl). Issue 22.
usage: python3 nccl4py_prog.py probe|null|init|core
  probe only the LIB line below
  null  comm_window_register(Comm(0), ...): "RESULT null=<NCCL status>" (NCCL 2.28 alone: SIGSEGV)
  init  one rank: get_unique_id, comm_init_rank, mem_alloc, comm_window_register, all_reduce,
        comm_window_deregister, mem_free, comm_destroy: "RESULT init ..."
  core  nccl.core (the high-level API) refuses a null communicator's register_window itself:
        "RESULT core=<exception class>"
Every mode first prints "LIB <path of the libnccl nccl4py loaded> <ncclGetVersion>"."""
import ctypes
import sys

import nccl.bindings.nccl as n
from nccl.bindings._internal import nccl as _internal


def status(call):
    try:
        return 0, call()
    except n.NCCLError as e:
        return int(e.status), None


def main():
    print("LIB %s %d" % (_internal._inspect_loaded_library_path(), n.get_version()), flush=True)
    mode = sys.argv[1]
    if mode == "null":
        buf = n.mem_alloc(4096)
        r, _ = status(lambda: n.comm_window_register(n.Comm(0), buf, 4096, 0))
        print("RESULT null=%d" % r, flush=True)
    elif mode == "init":
        uid = n.get_unique_id()
        r, comm = status(lambda: n.comm_init_rank(1, uid, 0))
        buf = n.mem_alloc(1 << 21)
        rr, win = status(lambda: n.comm_window_register(comm, buf, 1 << 21, 1))  # NCCL_WIN_COLL_SYMMETRIC
        ra, _ = status(lambda: n.all_reduce(buf, buf, 16, int(n.DataType.Float32), int(n.RedOp.Sum), comm, 0))
        # the collective runs on the default stream: wait for it before freeing its buffer (nccl4py
        # has no synchronisation of its own; cuda-python's would need a real driver)
        ctypes.CDLL("libcuda.so.1").cuCtxSynchronize()
        rd, _ = status(lambda: n.comm_window_deregister(comm, win))
        n.mem_free(buf)
        rx, _ = status(lambda: n.comm_destroy(comm))
        print("RESULT init init=%d reg=%d allreduce=%d dereg=%d destroy=%d win=%s"
              % (r, rr, ra, rd, rx, "set" if win else "NULL"), flush=True)
    elif mode == "core":
        import nccl.core as core
        try:
            core.Communicator(0).register_window(None)
            print("RESULT core=none", flush=True)
        except Exception as e:  # noqa: BLE001 - the class is the result
            print("RESULT core=%s %s" % (type(e).__name__, e), flush=True)


main()
