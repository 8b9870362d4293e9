/* Preflight: the local checks NCCL's symmetric path makes of a window buffer, version by version
 * (docs/NCCL.md), made before NCCL sees the buffer. NCCL makes them before it exchanges anything
 * with its peers, so a rank that fails one returns (an error, or 2.27's NULL window) while the
 * others wait for it: ncclguard finds the same answer first and the ranks agree on it.
 *   every version    device memory (2.30+: or host-NUMA) from the CUDA VMM API
 *                    (cuMemRetainAllocationHandle; cudaMalloc memory fails);
 *   2.27             the allocation's base and size multiples of 2 MiB, the range inside it;
 *   2.28+            (buffer - allocation base) a multiple of 4096; 2.28 checks no range;
 *   2.29             the range inside one allocation; 2.30+ any number of mapped VMM segments.
 * None of these apply when the communicator has no symmetric support (rules.c): NCCL then
 * registers locally or answers with a NULL window, whatever the buffer. */
#include <stdint.h>

#include "guard.h"

static const char* const reason_names[NG_NREASONS] = {
    "ok",          "null_comm",  "null_win",     "null_buff", "zero_size",  "comm_destroyed",
    "not_ready",   "not_device", "wrong_device", "not_vmm",   "misaligned", "out_of_range",
    "capturing",   "has_devcomm", "degraded_windows", "nccl_error", "null_window", "timeout",
    "no_symbol",   "out_of_step", "comm_broken",
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
      return "the buffer is not a CUDA VMM allocation (e.g. cudaMalloc) and this communicator takes NCCL's symmetric "
             "path, which fails on such a buffer on this rank alone (its peers would wait). Fix: allocate it with "
             "ncclMemAlloc (PyTorch: the symmetric-memory or NCCL mem-pool allocator)";
    case NG_R_MISALIGNED:
      return "the buffer does not meet the loaded NCCL's alignment (2.28+: offset from the allocation base a "
             "multiple of 4096; 2.27: allocation base and size multiples of 2 MiB). Fix: register the allocation's "
             "start or an aligned offset (ncclMemAlloc allocations are aligned)";
    case NG_R_OUT_OF_RANGE:
      return "buffer + size runs past the end of its allocation (2.27 and 2.29 refuse it). Fix: register a range "
             "inside one allocation";
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
             "communicator, and the ranks are no longer in step: abort the communicator (ncclCommAbort; "
             "ncclCommFinalize would wait for it) and create a new one";
    case NG_R_OUT_OF_STEP:
      return "the ranks ran different agreement rounds (a rank gave up an earlier round, or registered a different "
             "number of windows in one group): abort the communicator (ncclCommAbort) and create a new one";
    case NG_R_COMM_BROKEN:
      return "an earlier agreement on this communicator failed (its reason was logged then): its ranks are no "
             "longer in step, so ncclguard refuses further registrations on it. Fix: abort the communicator "
             "(ncclCommAbort) and create a new one";
    default: return "";
  }
}

int ng_preflight(const void* buff, size_t size, int dev, int version, unsigned* facts) {
  (void)dev; /* a buffer on another GPU than the communicator's: NCCL's own business, not checked */
  *facts = 0;
  if (!ng_cuda_ok()) return NG_R_OK; /* nothing can be checked: NCCL decides */
  if (version <= 0) version = 23007;  /* unknown: the newest rules */
  int v227 = version < 22800, v229 = version >= 22900 && version < 23000, v230 = version >= 23000;
  uintptr_t p = (uintptr_t)buff, base = 0;
  size_t asize = 0;
  int is_dev = 0, ord = -1, vmm = ng_cuda_is_vmm(buff);
  if (ng_cuda_ptr_device(buff, &is_dev, &ord) || ng_cuda_addr_range(buff, &base, &asize) ||
      (!is_dev && !(v230 && vmm)))
    *facts |= 1u << NG_R_NOT_DEVICE;
  else if (!vmm)
    *facts |= 1u << NG_R_NOT_VMM;
  else {
    if (v227) {
      if (base % (2u << 20) || asize % (2u << 20)) *facts |= 1u << NG_R_MISALIGNED;
    } else if ((p - base) % 4096) {
      *facts |= 1u << NG_R_MISALIGNED;
    }
    /* the range: 2.27 and 2.29 want it inside the allocation (a range that wraps is not); 2.30+
     * takes several back-to-back VMM mappings (expandable segments): only a last byte that is not
     * mapped VMM memory is refused; 2.28 does not look */
    int wraps = size - 1 > UINTPTR_MAX - p;
    int inside = !wraps && size <= asize && p - base <= asize - size;
    if ((v227 || v229) && !inside) *facts |= 1u << NG_R_OUT_OF_RANGE;
    if (v230 && !inside) {
      int last_dev = 0, last_ord = -1;
      const void* last = (const char*)buff + (size - 1);
      if (wraps || ng_cuda_ptr_device(last, &last_dev, &last_ord) || !ng_cuda_is_vmm(last))
        *facts |= 1u << NG_R_OUT_OF_RANGE;
    }
  }
  for (int r = 1; r < NG_NREASONS; r++)
    if (*facts & (1u << r)) return r;
  return NG_R_OK;
}

int ng_capture_hazard(int version) { return version < 23007 && ng_cuda_capturing(); }
