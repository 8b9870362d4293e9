/* Preflight: the local checks NCCL's symmetric path makes of a window buffer, version by version
 * (docs/NCCL.md), made before NCCL sees the buffer. NCCL makes them before it exchanges anything
 * with its peers, so a rank that fails one returns (an error, or 2.27's NULL window) while the
 * others wait for it: ncclguard finds the same answer first and the ranks agree on it.
 *   every version    device memory (2.30+: or host-NUMA) from the CUDA VMM API
 *                    (cuMemRetainAllocationHandle; cudaMalloc memory fails);
 *   2.27             the allocation's base and size multiples of 2 MiB, buff + size (modulo 2^64) inside it;
 *   2.28+            (buffer - allocation base) a multiple of 4096; 2.28 checks no range;
 *   2.29             the range inside one allocation; 2.30+ any number of mapped VMM segments.
 * It also says what NCCL places in the symmetric space (*alloc, voted: policy.c): the allocation on 2.27-2.29,
 * the span of the range's segments on 2.30+.
 * None of these apply when the communicator has no symmetric support (rules.c): NCCL then
 * registers locally or answers with a NULL window, whatever the buffer - except on 2.27, which looks
 * the allocation up on every path (rules.all_paths, ng_cuda_is_allocation in policy.c). */
#include <stdint.h>

#include "guard.h"

/* The reasons' names, levels and advice: one table, shim/reasons.def. */
static const struct {
  const char* name;
  int level;
  const char* advice;
} reasons[NG_NREASONS] = {
#define NG_REASON(id, name, level, advice) [NG_R_##id] = {name, NG_LOG_##level, advice},
#include "reasons.def"
#undef NG_REASON
};

const char* ng_reason_name(int r) { return (unsigned)r < NG_NREASONS ? reasons[r].name : "unknown"; }
int ng_reason_level(int r) { return (unsigned)r < NG_NREASONS ? reasons[r].level : NG_LOG_WARN; }
/* NG_R_OK has no advice to give (its table text describes it for docs/LOG.md). */
const char* ng_reason_advice(int r) { return (unsigned)r < NG_NREASONS && r != NG_R_OK ? reasons[r].advice : ""; }

/* The size NCCL 2.30+ places for [p, p + size) in the symmetric space: the sizes of every segment (allocation)
 * the range covers, summed from its first allocation [base, base + asize) on (ncclCuMemGetAddressRange,
 * src/include/alloc.h at v2.30.3-1 to v2.30.7-1: the total it passes to symMemoryObtain, whose ncclSpaceAlloc
 * places it; v2.30.7-1 reserves the largest total among the ranks). 0 when a segment cannot be read (NCCL
 * fails there itself): the sizes are then not compared. Before 2.30 the allocation alone is placed (2.28
 * looks up the first byte, 2.29 refuses a range past its allocation). */
static size_t segments_span(uintptr_t p, size_t size, uintptr_t base, size_t asize) {
  uintptr_t end = p + size, at = base + asize;
  size_t span = asize;
  for (int n = 0; at < end; n++) {
    uintptr_t b = 0;
    size_t s = 0;
    if (n >= 4096 || ng_cuda_addr_range((const void*)at, &b, &s) || !s || b + s <= at) return 0;
    span += s;
    at = b + s;
  }
  return span;
}

int ng_preflight(const void* buff, size_t size, int dev, int version, unsigned* facts, size_t* alloc, uintptr_t* abase) {
  *alloc = 0;
  *abase = 0;
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
    *alloc = asize;
    *abase = base;
    if (v227) {
      if (base % (2u << 20) || asize % (2u << 20)) *facts |= 1u << NG_R_MISALIGNED;
    } else if ((p - base) % 4096) {
      *facts |= 1u << NG_R_MISALIGNED;
    }
    /* the range: 2.27 wants buff + size at most the allocation's end, computed modulo 2^64 as NCCL
     * does (register.cc at v2.27.7-1), so a range that wraps passes and registers; 2.29 wants it
     * inside the allocation (a range that wraps finds no allocation and fails: docs/NCCL.md §2); 2.30+
     * takes several back-to-back VMM mappings (expandable segments): only a last byte that is not
     * mapped VMM memory is refused, and a range that wraps fails (or aborts NCCL); 2.28 does not look */
    int wraps = size - 1 > UINTPTR_MAX - p;
    int inside = !wraps && size <= asize && p - base <= asize - size;
    if (v227 && !((uintptr_t)(p + size) <= base + asize)) *facts |= 1u << NG_R_OUT_OF_RANGE;
    if (v229 && !inside) *facts |= 1u << NG_R_OUT_OF_RANGE;
    if (v230 && !inside) {
      int last_dev = 0, last_ord = -1;
      const void* last = (const char*)buff + (size - 1);
      if (wraps || ng_cuda_ptr_device(last, &last_dev, &last_ord) || !ng_cuda_is_vmm(last))
        *facts |= 1u << NG_R_OUT_OF_RANGE;
      else if ((*alloc = segments_span(p, size, base, asize)) != asize)
        *abase = 0; /* what 2.30 places: every segment's size; several allocations have no one base (NCCL
                     * 2.30.3 - 2.30.4 reuse a place only where base, size and every segment match) */
    }
  }
  for (int r = 1; r < NG_NREASONS; r++)
    if (*facts & (1u << r)) return r;
  return NG_R_OK;
}

int ng_capture_hazard(int version) { return version < 23007 && ng_cuda_capturing(); }
