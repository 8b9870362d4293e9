/* The wrapper of ncclMemAlloc: forwarded untouched; a failure is said in one WARN line with the CUDA
 * runtime error it left in the calling thread, read without consuming it (docs/NCCL.md §2, "What a failed
 * ncclMemAlloc leaves behind"), and that error is cleared where NCCL's call set it and nothing was pending
 * before (NCCLGUARD_MEMALLOC_CLEAR; docs/behaviour.md). ncclMemFree is not wrapped: nothing to add there. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "guard.h"

/* The CUDA runtime the application's runtime calls reach, found at run time (ncclguard has no NEEDED
 * entry on libcudart): the one in the global scope, else one already loaded RTLD_LOCAL (PyTorch's). Never
 * loads one. Its last error is per thread; cudaPeekAtLastError reads it, cudaGetLastError reads and resets
 * it (the runtime's documented contract). */
struct cudart {
  int (*peek)(void);
  int (*get)(void);
  const char* (*name)(int);
};
static struct cudart rt_found; /* written once, before `rt_ready` publishes it */
static int rt_ready;

static const struct cudart* cudart(void) {
  if (__atomic_load_n(&rt_ready, __ATOMIC_ACQUIRE)) return &rt_found;
  if (NG_FP("cudart.find")) return NULL;
  static const char* const sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};
  void* h = RTLD_DEFAULT;
  void* peek = ng_dl_sym(h, "cudaPeekAtLastError");
  for (size_t i = 0; !peek && i < sizeof sonames / sizeof sonames[0]; i++) {
    h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD); /* kept open: its functions are kept */
    peek = h ? ng_dl_sym(h, "cudaPeekAtLastError") : NULL;
  }
  void* get = peek ? ng_dl_sym(h, "cudaGetLastError") : NULL;
  if (!get) return NULL; /* no runtime loaded (yet): asked again at the next call */
  /* published without a lock (none to hold across fork): the first thread to claim the slot fills it; a
   * thread that finds the runtime meanwhile uses its own copy for this call */
  static int claimed;
  static __thread struct cudart mine;
  int zero = 0;
  struct cudart* slot = __atomic_compare_exchange_n(&claimed, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
                            ? &rt_found : &mine;
  slot->peek = (int (*)(void))peek;
  slot->get = (int (*)(void))get;
  slot->name = (const char* (*)(int))ng_dl_sym(h, "cudaGetErrorName");
  if (slot == &rt_found) __atomic_store_n(&rt_ready, 1, __ATOMIC_RELEASE);
  return slot;
}

static const char* err_name(const struct cudart* rt, int e, char* buf, size_t cap) {
  const char* n = rt && rt->name ? rt->name(e) : NULL;
  if (n && *n) return n;
  snprintf(buf, cap, "cudaError%d", e);
  return buf;
}

/* The line of a failed call: what the runtime holds now, and the fix. */
static void log_failure(size_t size, ncclResult_t res, double t0, const struct cudart* rt, int before,
                        int after, int cleared) {
  char nb[32], state[80], msg[700];
  const char* en = after > 0 ? err_name(rt, after, nb, sizeof nb) : "";
  const char* head = "";
  if (!rt || after < 0) {
    snprintf(state, sizeof state, "unread");
    head = "no CUDA runtime is loaded where ncclguard can read its error (a libnccl linked with its own copy of the "
           "runtime, as NCCL's releases are, keeps the error there, where the application's runtime never reports it)";
  } else if (after == 0) {
    snprintf(state, sizeof state, "none");
    head = "it left no CUDA runtime error in this thread";
  } else if (cleared) {
    snprintf(state, sizeof state, "cleared:%s", en);
    head = "it left the CUDA runtime error set in this thread, and ncclguard cleared it (none was pending before the "
           "call; NCCLGUARD_MEMALLOC_CLEAR=0 keeps it)";
  } else if (before > 0) {
    snprintf(state, sizeof state, "kept:%s", en);
    head = "a CUDA runtime error was already pending in this thread before the call (the application's own, or "
           "overwritten by NCCL's): left as it is, the next cudaGetLastError returns it";
  } else {
    snprintf(state, sizeof state, "left:%s", en);
    head = "it left the CUDA runtime error set in this thread: the next cudaGetLastError (PyTorch's check after its "
           "next kernel launch) reports it as its own";
  }
  const char* fix = (after > 0 && !cleared) ? "Fix: clear it with cudaGetLastError() before falling back to a plain "
                                              "buffer (cudaMalloc or the caching allocator)"
                                            : "Fix: fall back to a plain buffer (cudaMalloc or the caching allocator), "
                                              "or free memory and allocate less";
  snprintf(msg, sizeof msg, "ncclMemAlloc of %zu bytes failed (%s); %s. %s", size, ng_result_name(res), head, fix);
  if (!ng_log_on(NG_LOG_WARN)) return;
  struct ng_line l;
  ng_line_begin(&l, NG_LOG_WARN, -1);
  ng_kv_str(&l, "fn", "ncclMemAlloc");
  ng_kv_ptr(&l, "buff", NULL); /* after a failure *ptr is no allocation (the caller's old value, or an address
                                   NCCL reserved and kept) */
  ng_kv_uint(&l, "size", size);
  ng_kv_str(&l, "result", ng_result_name(res));
  ng_kv_dbl(&l, "us", ng_now_us() - t0);
  ng_kv_str(&l, "decision", ng_decision_name(NG_D_PASS));
  ng_kv_str(&l, "reason", ng_reason_name(NG_R_NCCL_ERROR));
  ng_kv_str(&l, "cuda_error", state);
  ng_line_end(&l, "%s", msg);
}

NG_API ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  NG_FOREIGN(ncclMemAlloc, ptr, size);
  ncclResult_t res;
  if (ng_bypass()) { /* NCCLGUARD_DISABLE, or NCCL's own call (its CE collectives allocate with it) */
    NG_CALL(res, ncclMemAlloc, ptr, size);
    return res;
  }
  double t0 = ng_now_us();
  /* Whether an error is pending before the call: read (never reset) only where the clearing may follow */
  const struct cudart* rt = ng_cfg.memalloc_clear ? cudart() : NULL;
  int before = rt ? rt->peek() : -1;
  NG_CALL(res, ncclMemAlloc, ptr, size);
  if (res == ncclSuccess) {
    if (ng_log_on(NG_LOG_INFO)) {
      struct ng_line l;
      ng_line_begin(&l, NG_LOG_INFO, -1);
      ng_kv_str(&l, "fn", "ncclMemAlloc");
      ng_kv_ptr(&l, "buff", ptr ? *ptr : NULL);
      ng_kv_uint(&l, "size", size);
      ng_kv_str(&l, "result", ng_result_name(res));
      ng_kv_dbl(&l, "us", ng_now_us() - t0);
      ng_kv_str(&l, "decision", ng_decision_name(NG_D_PASS));
      ng_kv_str(&l, "reason", ng_reason_name(NG_R_OK));
      ng_line_end(&l, NULL);
    }
    return res;
  }
  ng_stat_add(NG_ST_ERRORS, 1);
  if (!rt) rt = cudart();
  int after = rt ? rt->peek() : -1;
  int cleared = 0;
  /* Cleared only when NCCL's call set it: nothing was pending before (an error the application had not read
   * yet is never touched) */
  if (after > 0 && before == 0 && ng_cfg.memalloc_clear && !NG_FP("cudart.clear")) {
    (void)rt->get();
    cleared = 1;
  }
  log_failure(size, res, t0, rt, before, after, cleared);
  return res;
}
NG_SELF(ncclMemAlloc)
