"""featroutes.py MODE LIBNCCL: feature detection the way Python bindings ask it (tests/t_dlsym.sh), in
featroutes.c's words. "handle" is ctypes.CDLL(LIBNCCL)'s attribute lookup (dlsym on the library's handle),
"default" is ctypes.CDLL(None)'s (dlsym on the program's handle: the global scope).
  before   CDLL(None) before any libnccl is loaded, then LIBNCCL loaded RTLD_GLOBAL ("default_after")
  global   LIBNCCL loaded with mode=RTLD_GLOBAL: "handle", "default"
  local    LIBNCCL loaded as ctypes does by default (RTLD_LOCAL): "handle", "default"
"""
import ctypes
import os
import sys

NAMES = ("ncclGroupSimulateEnd ncclCommInitRankScalable ncclCommShrink ncclCommWindowRegister "
         "ncclCommWindowDeregister ncclDevCommCreate ncclDevCommDestroy ncclCommRevoke ncclCommGrow "
         "ncclCommSuspend ncclCommResume ncclCommQueryProperties ncclCommInitRank ncclAllReduce").split()


class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]


def where(lib, name):
    try:
        f = getattr(lib, name)
    except AttributeError:
        return "absent"
    d = DlInfo()
    if not ctypes.CDLL(None).dladdr(ctypes.cast(f, ctypes.c_void_p), ctypes.byref(d)) or not d.fname:
        return "other"
    base = os.path.basename(d.fname.decode())
    return "guard" if base.startswith("libncclguard") else "nccl" if base.startswith("libnccl") else "other"


def say(route, lib):
    for n in NAMES:
        print("ROUTE %s %s=%s" % (route, n, where(lib, n)))


mode, path = sys.argv[1], sys.argv[2]
if mode == "before":
    say("default", ctypes.CDLL(None))
    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    say("default_after", ctypes.CDLL(None))
else:
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL if mode == "global" else ctypes.RTLD_LOCAL)
    say("handle", lib)
    say("default", ctypes.CDLL(None))
