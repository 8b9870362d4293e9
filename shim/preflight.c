/* Preflight: what this rank can tell about a buffer before NCCL sees it (FACTS 3 and 4):
 * device memory of the communicator's GPU, allocated through the VMM API (cudaMalloc memory
 * fails inside NCCL and damages the communicator or hangs the peer), offset from the
 * allocation base aligned as the loaded NCCL requires, range inside the allocation, and no
 * stream capture in progress (NCCL before 2.30.7 fails and invalidates the capture). */
#include <stdint.h>

#include "guard.h"

static const char* const reason_names[NG_NREASONS] = {
    "ok",          "null_comm",  "null_win",     "null_buff", "zero_size",  "comm_destroyed",
    "not_ready",   "not_device", "wrong_device", "not_vmm",   "misaligned", "out_of_range",
    "capturing",   "has_devcomm", "degraded_windows", "nccl_error", "null_window", "timeout",
    "no_symbol",
};

const char* ng_reason_name(int r) { return (unsigned)r < NG_NREASONS ? reason_names[r] : "unknown"; }

const char* ng_reason_advice(int r) {
  switch (r) {
    case NG_R_NULL_COMM:
      return "the communicator does not exist yet (PyTorch creates it lazily at the first collective). Fix: "
             "init_process_group(..., device_id=torch.device('cuda', local_rank)), or run one collective "
             "(e.g. dist.barrier(group)) on the group before symmetric-memory rendezvous; ncclguard-run's "
             "Python hook does the latter for you";
    case NG_R_NULL_WIN: return "the window output pointer is NULL. Fix: pass the address of an ncclWindow_t";
    case NG_R_NULL_BUFF: return "the buffer is NULL. Fix: register memory from ncclMemAlloc";
    case NG_R_ZERO_SIZE: return "the size is 0. Fix: register a non-empty buffer";
    case NG_R_COMM_DESTROYED: return "the communicator was already destroyed or aborted";
    case NG_R_NOT_READY: return "the nonblocking communicator is still initialising";
    case NG_R_NOT_DEVICE: return "the buffer is not CUDA device memory. Fix: allocate it with ncclMemAlloc";
    case NG_R_WRONG_DEVICE:
      return "the buffer lives on another GPU than the communicator. Fix: allocate it on the communicator's device";
    case NG_R_NOT_VMM:
      return "the buffer is not a CUDA VMM allocation (e.g. cudaMalloc); NCCL would fail and leave peers hanging. "
             "Fix: allocate it with ncclMemAlloc (PyTorch: the symmetric-memory or NCCL mem-pool allocator)";
    case NG_R_MISALIGNED:
      return "the buffer's offset from its allocation base is not a multiple of 4096 (NCCL 2.28+; 2 MiB for base "
             "and size on 2.27). Fix: register the allocation's start or an aligned offset";
    case NG_R_OUT_OF_RANGE: return "buffer + size runs past the end of its allocation";
    case NG_R_CAPTURING:
      return "a CUDA graph capture is in progress; NCCL before 2.30.7 fails and invalidates the capture. Fix: "
             "register before capturing (or NCCL >= 2.30.7)";
    case NG_R_HAS_DEVCOMM:
      return "this communicator has a device communicator: device code would read a NULL window (illegal memory "
             "access), so ncclguard does not degrade here";
    case NG_R_DEGRADED_WINDOWS:
      return "windows of this communicator were degraded to unregistered buffers; device code would read a NULL "
             "window. Fix: the reason logged when they were degraded";
    case NG_R_NCCL_ERROR:
      return "NCCL itself failed to register on at least one rank (its error is logged there); ranks where it "
             "succeeded deregistered again";
    case NG_R_NULL_WINDOW:
      return "NCCL returned success with a NULL window: the communicator has no symmetric support (CUDA P2P "
             "between all ranks, NCCL_WIN_ENABLE, cuMem)";
    case NG_R_TIMEOUT:
      return "a peer did not take part within NCCLGUARD_TIMEOUT; is ncclguard loaded on every rank, and does every "
             "rank register the same windows in the same order? The agreement all-reduce stays queued on the "
             "communicator: end it with ncclCommAbort (ncclCommFinalize would wait for it)";
    default: return "";
  }
}

int ng_preflight(const void* buff, size_t size, int dev) {
  if (!ng_cuda_ok()) return NG_R_OK; /* nothing can be checked: NCCL decides */
  int version = ng_nccl_version();
  int is_dev = 0, ord = -1;
  if (ng_cuda_ptr_device(buff, &is_dev, &ord) || !is_dev) return NG_R_NOT_DEVICE;
  if (dev >= 0 && ord >= 0 && ord != dev) return NG_R_WRONG_DEVICE;
  uintptr_t base;
  size_t asize;
  if (ng_cuda_addr_range(buff, &base, &asize)) return NG_R_NOT_DEVICE;
  uintptr_t p = (uintptr_t)buff;
  if (p + size > base + asize) {
    /* Several VMM allocations can be mapped back to back (expandable segments): only a range
     * whose last byte is not device memory at all is refused. */
    int last_dev = 0, last_ord = -1;
    if (ng_cuda_ptr_device((const char*)buff + size - 1, &last_dev, &last_ord) || !last_dev)
      return NG_R_OUT_OF_RANGE;
  }
  if (!ng_cuda_is_vmm(buff)) return NG_R_NOT_VMM;
  if (version >= 22800 || version == 0) {
    if ((p - base) % 4096) return NG_R_MISALIGNED;
  } else if (version >= 22700) {
    if (p % (2u << 20) || size % (2u << 20)) return NG_R_MISALIGNED;
  }
  if (version < 23007 && ng_cuda_capturing()) return NG_R_CAPTURING;
  return NG_R_OK;
}
