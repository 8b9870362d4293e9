"""A ctypes binding in the style of vLLM's legacy pynccl_wrapper.py (and SGLang's pynccl): the library
is loaded with ctypes.CDLL (dlopen, RTLD_LOCAL) and every function is found by attribute lookup, i.e.
dlsym(handle, name). Issue 22.
usage: python3 pynccl_like.py LIBNCCL null|init
  null  ncclCommWindowRegister(NULL, ...): "RESULT null=<rc>" (NCCL 2.28 alone: SIGSEGV)
  init  one rank: ncclGetUniqueId, ncclCommInitRank, ncclMemAlloc, ncclCommWindowRegister,
        ncclAllReduce, ncclCommWindowDeregister, ncclCommDestroy: "RESULT init ..." """
import ctypes
import sys

ncclResult_t = ctypes.c_int
ncclComm_t = ctypes.c_void_p
ncclWindow_t = ctypes.c_void_p


class ncclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


class Function:
    def __init__(self, name, restype, argtypes):
        self.name, self.restype, self.argtypes = name, restype, argtypes


# the way pynccl_wrapper.py declares them
exported_functions = [
    Function("ncclGetVersion", ncclResult_t, [ctypes.POINTER(ctypes.c_int)]),
    Function("ncclGetUniqueId", ncclResult_t, [ctypes.POINTER(ncclUniqueId)]),
    Function("ncclCommInitRank", ncclResult_t, [ctypes.POINTER(ncclComm_t), ctypes.c_int, ncclUniqueId, ctypes.c_int]),
    Function("ncclMemAlloc", ncclResult_t, [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]),
    Function("ncclCommWindowRegister", ncclResult_t,
             [ncclComm_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ncclWindow_t), ctypes.c_int]),
    Function("ncclCommWindowDeregister", ncclResult_t, [ncclComm_t, ncclWindow_t]),
    Function("ncclAllReduce", ncclResult_t,
             [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ncclComm_t, ctypes.c_void_p]),
    Function("ncclCommDestroy", ncclResult_t, [ncclComm_t]),
]


def main():
    lib = ctypes.CDLL(sys.argv[1])
    f = {}
    for func in exported_functions:
        fn = getattr(lib, func.name)
        fn.restype, fn.argtypes = func.restype, func.argtypes
        f[func.name] = fn
    if sys.argv[2] == "null":
        buf = ctypes.create_string_buffer(4096)
        win = ncclWindow_t()
        sys.stdout.flush()
        r = f["ncclCommWindowRegister"](None, ctypes.cast(buf, ctypes.c_void_p), 4096, ctypes.byref(win), 0)
        print("RESULT null=%d" % r, flush=True)
    else:
        uid = ncclUniqueId()
        comm = ncclComm_t()
        buf = ctypes.c_void_p()
        win = ncclWindow_t()
        r = [f["ncclGetUniqueId"](ctypes.byref(uid)), f["ncclCommInitRank"](ctypes.byref(comm), 1, uid, 0),
             f["ncclMemAlloc"](ctypes.byref(buf), 1 << 21)]
        r.append(f["ncclCommWindowRegister"](comm, buf, 1 << 21, ctypes.byref(win), 1))
        r.append(f["ncclAllReduce"](buf, buf, 16, 7, 0, comm, None))  # float32 (7), sum (0), default stream
        r.append(f["ncclCommWindowDeregister"](comm, win))
        r.append(f["ncclCommDestroy"](comm))
        print("RESULT init uid=%d init=%d alloc=%d reg=%d allreduce=%d dereg=%d destroy=%d win=%s"
              % tuple(r + ["set" if win.value else "NULL"]), flush=True)


main()
