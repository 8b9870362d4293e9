/* The CUDA driver API, found at run time (no NEEDED entry on libcuda): used for preflight
 * (what kind of memory a buffer is) and for the agreement all-reduce (a private stream and a
 * few bytes of device memory). Types and constants are declared in cuda_abi.h, so that building
 * the library needs no CUDA header; tests/abi checks them against cuda.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "guard.h"

#include "cuda_abi.h"

typedef int ng_cudev;

static struct {
  ng_cures (*cuInit)(unsigned);
  ng_cures (*cuCtxGetCurrent)(ng_ctx*);
  ng_cures (*cuCtxSetCurrent)(ng_ctx);
  ng_cures (*cuCtxGetDevice)(ng_cudev*);
  ng_cures (*cuDeviceGet)(ng_cudev*, int);
  ng_cures (*cuDevicePrimaryCtxRetain)(ng_ctx*, ng_cudev);
  ng_cures (*cuPointerGetAttribute)(void*, int, ng_devptr);
  ng_cures (*cuMemGetAddressRange)(ng_devptr*, size_t*, ng_devptr);
  ng_cures (*cuMemRetainAllocationHandle)(unsigned long long*, void*);
  ng_cures (*cuMemRelease)(unsigned long long);
  ng_cures (*cuMemAlloc)(ng_devptr*, size_t);
  ng_cures (*cuMemFree)(ng_devptr);
  ng_cures (*cuMemAllocHost)(void**, size_t);
  ng_cures (*cuMemFreeHost)(void*);
  ng_cures (*cuMemcpyHtoDAsync)(ng_devptr, const void*, size_t, ng_stream);
  ng_cures (*cuMemcpyDtoHAsync)(void*, ng_devptr, size_t, ng_stream);
  ng_cures (*cuStreamCreate)(ng_stream*, unsigned);
  ng_cures (*cuStreamQuery)(ng_stream);
  ng_cures (*cuStreamDestroy)(ng_stream);
  ng_cures (*cuStreamIsCapturing)(ng_stream, int*);
  ng_cures (*cuThreadExchangeStreamCaptureMode)(int*);
  ng_cures (*cuDriverGetVersion)(int*);
  ng_cures (*cuDeviceGetAttribute)(int*, int, ng_cudev);
} cu;
static int cu_state; /* 0 untried, 1 ok, -1 unavailable */
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

/* CUDA is not fork-safe: a child forked while another thread is inside the driver can inherit a
 * held driver lock and crash or hang at exit (seen on 2 x H200 with a thread registering in a
 * loop during fork). ncclguard's own driver calls hold this lock for reading, and fork() waits
 * for them (pthread_atfork prepare), so ncclguard never adds to that risk. Calls never nest.
 * The handlers are registered when the driver is first loaded (cu_load), after every constructor's
 * (NG_ON_FORK): this prepare runs first, before the other modules' locks are taken. Not at load time: a
 * child makes the lock anew (below), which a lock never used there does not need, and ThreadSanitizer
 * keeps the old one's writer across pthread_rwlock_init (a child that loads the driver itself would then
 * be reported). */
static pthread_rwlock_t fork_lock;
static void fork_prepare(void) { pthread_rwlock_wrlock(&fork_lock); }
static void fork_parent(void) { pthread_rwlock_unlock(&fork_lock); }
static void fork_child(void);
static void fork_lock_init(void) {
  pthread_rwlockattr_t a;
  pthread_rwlockattr_init(&a);
  pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&fork_lock, &a);
  pthread_rwlockattr_destroy(&a);
}
static void enter(void) { pthread_rwlock_rdlock(&fork_lock); }
static void leave(void) { pthread_rwlock_unlock(&fork_lock); }

static const char* const lost =
    "no buffer preflight and no cross-rank agreement in this process (registrations go to NCCL unchecked; a "
    "rank whose buffer NCCL rejects can leave its peers hanging, as without ncclguard)";

static void cu_load(void) {
  fork_lock_init();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  /* A wrong NCCLGUARD_CUDA_LIB must not switch protection off silently: warn and use the driver
   * NCCL itself uses. Without any driver NCCL cannot run on a GPU either; still a WARN, naming
   * what is lost. */
  const char* lib = ng_cfg.cuda_lib[0] ? ng_cfg.cuda_lib : "libcuda.so.1";
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h && ng_cfg.cuda_lib[0]) {
    ng_log_msg(NG_LOG_WARN, -1, "cuda", "NCCLGUARD_CUDA_LIB=%s cannot be loaded (%s); using libcuda.so.1 instead",
               lib, dlerror());
    lib = "libcuda.so.1";
    h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) {
    cu_state = -1;
    ng_log_msg(NG_LOG_WARN, -1, "cuda", "CUDA driver %s cannot be loaded (%s): %s", lib, dlerror(), lost);
    return;
  }
  struct { void** slot; const char* name; } want[] = {
      {(void**)&cu.cuInit, "cuInit"},
      {(void**)&cu.cuCtxGetCurrent, "cuCtxGetCurrent"},
      {(void**)&cu.cuCtxSetCurrent, "cuCtxSetCurrent"},
      {(void**)&cu.cuCtxGetDevice, "cuCtxGetDevice"},
      {(void**)&cu.cuDeviceGet, "cuDeviceGet"},
      {(void**)&cu.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
      {(void**)&cu.cuPointerGetAttribute, "cuPointerGetAttribute"},
      {(void**)&cu.cuMemGetAddressRange, "cuMemGetAddressRange_v2"},
      {(void**)&cu.cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle"},
      {(void**)&cu.cuMemRelease, "cuMemRelease"},
      {(void**)&cu.cuMemAlloc, "cuMemAlloc_v2"},
      {(void**)&cu.cuMemFree, "cuMemFree_v2"},
      {(void**)&cu.cuMemAllocHost, "cuMemAllocHost_v2"},
      {(void**)&cu.cuMemFreeHost, "cuMemFreeHost"},
      {(void**)&cu.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
      {(void**)&cu.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
      {(void**)&cu.cuStreamCreate, "cuStreamCreate"},
      {(void**)&cu.cuStreamQuery, "cuStreamQuery"},
      {(void**)&cu.cuStreamDestroy, "cuStreamDestroy_v2"},
      {(void**)&cu.cuStreamIsCapturing, "cuStreamIsCapturing"},
      {(void**)&cu.cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode"},
      {(void**)&cu.cuDriverGetVersion, "cuDriverGetVersion"},
      {(void**)&cu.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    *want[i].slot = ng_dl_sym(h, want[i].name);
    if (!*want[i].slot) {
      cu_state = -1;
      ng_log_msg(NG_LOG_WARN, -1, "cuda", "CUDA driver %s lacks %s: %s", lib, want[i].name, lost);
      return;
    }
  }
  enter();
  cu_state = cu.cuInit(0) == NG_CUDA_SUCCESS ? 1 : -1;
  leave();
  if (cu_state < 0) ng_log_msg(NG_LOG_WARN, -1, "cuda", "cuInit failed in %s: %s", lib, lost);
}

int ng_cuda_ok(void) {
  pthread_once(&cu_once, cu_load);
  return cu_state > 0;
}

/* Primary contexts retained by ncclguard: one retain per device for the life of the process,
 * taken only when a thread drives a device that is not its current one (one thread, many GPUs). */
#define NG_MAXDEV 256
static ng_ctx primary[NG_MAXDEV];
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;

static int push_locked(int dev, ng_ctx* saved);
int ng_cuda_push(int dev, ng_ctx* saved) {
  *saved = NULL;
  if (!ng_cuda_ok() || NG_FP("cuda.push")) return -1;
  enter();
  int r = push_locked(dev, saved);
  leave();
  return r;
}

static int push_locked(int dev, ng_ctx* saved) {
  if (cu.cuCtxGetCurrent(saved) != NG_CUDA_SUCCESS) return -1;
  if (dev < 0) return *saved ? 0 : -1;
  ng_cudev cur;
  if (*saved && !cu.cuCtxGetDevice(&cur) && cur == dev) return 0;
  if (dev >= NG_MAXDEV) return -1;
  pthread_mutex_lock(&primary_lock);
  ng_ctx ctx = primary[dev];
  ng_cudev d;
  if (!ctx && !cu.cuDeviceGet(&d, dev) && !cu.cuDevicePrimaryCtxRetain(&ctx, d)) primary[dev] = ctx;
  pthread_mutex_unlock(&primary_lock);
  if (!ctx || cu.cuCtxSetCurrent(ctx)) return -1;
  return 0;
}

/* In a forked child, CUDA initialised by the parent cannot be used: ncclguard stops using it. The lock held
 * for writing by prepare is made anew (glibc's rwlock knows its writer by thread id, which the child's
 * thread does not share), and so is the lock of the primary contexts. */
static void fork_child(void) {
  fork_lock_init();
  pthread_mutex_init(&primary_lock, NULL);
  if (cu_state > 0) cu_state = -1;
}

void ng_cuda_pop(ng_ctx saved) {
  ng_ctx cur = NULL;
  if (cu_state <= 0) return;
  enter();
  if (!cu.cuCtxGetCurrent(&cur) && cur != saved) cu.cuCtxSetCurrent(saved);
  leave();
}

/* One guarded driver call: evaluates `call` with the fork lock held for reading. Its failpoint is
 * "cuda.<function>": the call is skipped and fails with CUDA_ERROR_OUT_OF_MEMORY (2). */
#define NG_CU_FAIL 2
#define GUARDED(fn, ...) \
  (NG_FP("cuda." #fn) ? NG_CU_FAIL : (enter(), guarded_ret = cu.fn(__VA_ARGS__), leave(), guarded_ret))
static __thread ng_cures guarded_ret;

int ng_cuda_stream_create(ng_stream* s) { return GUARDED(cuStreamCreate, s, NG_CU_STREAM_NON_BLOCKING); }
int ng_cuda_stream_destroy(ng_stream s) { return GUARDED(cuStreamDestroy, s); }
int ng_cuda_alloc(ng_devptr* p, size_t bytes) { return GUARDED(cuMemAlloc, p, bytes); }
int ng_cuda_free(ng_devptr p) { return GUARDED(cuMemFree, p); }
int ng_cuda_host_alloc(void** p, size_t bytes) { return GUARDED(cuMemAllocHost, p, bytes); }
int ng_cuda_host_free(void* p) { return GUARDED(cuMemFreeHost, p); }
int ng_cuda_h2d(ng_devptr dst, const void* src, size_t n, ng_stream s) {
  return GUARDED(cuMemcpyHtoDAsync, dst, src, n, s);
}
int ng_cuda_d2h(void* dst, ng_devptr src, size_t n, ng_stream s) {
  return GUARDED(cuMemcpyDtoHAsync, dst, src, n, s);
}

int ng_cuda_stream_done(ng_stream s) {
  ng_cures r = GUARDED(cuStreamQuery, s);
  if (r == NG_CUDA_SUCCESS) return 1;
  if (r == NG_CUDA_ERROR_NOT_READY) return 0;
  return -r;
}

int ng_cuda_ptr_device(const void* p, int* is_device, int* ordinal) {
  if (!ng_cuda_ok()) return -1;
  unsigned int mt = 0;
  int ord = -1;
  *is_device = 0;
  if (GUARDED(cuPointerGetAttribute, &mt, NG_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (ng_devptr)(uintptr_t)p)) return 0;
  *is_device = mt == NG_CU_MEMORYTYPE_DEVICE;
  if (!GUARDED(cuPointerGetAttribute, &ord, NG_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (ng_devptr)(uintptr_t)p))
    *ordinal = ord;
  return 0;
}

int ng_cuda_addr_range(const void* p, uintptr_t* base, size_t* size) {
  ng_devptr b = 0;
  if (!ng_cuda_ok() || GUARDED(cuMemGetAddressRange, &b, size, (ng_devptr)(uintptr_t)p)) return -1;
  *base = (uintptr_t)b;
  return 0;
}

int ng_cuda_is_allocation(const void* p, int dev) {
  if (!ng_cuda_ok() || dev < 0) return -1;
  ng_ctx saved;
  if (ng_cuda_push(dev, &saved)) return -1; /* as NCCL looks it up: on the communicator's device */
  ng_devptr b = 0;
  size_t size = 0;
  ng_cures r = GUARDED(cuMemGetAddressRange, &b, &size, (ng_devptr)(uintptr_t)p);
  ng_cuda_pop(saved);
  if (r == NG_CUDA_SUCCESS) return 1;
  return r == NG_CUDA_ERROR_NOT_FOUND || r == NG_CUDA_ERROR_INVALID_VALUE ? 0 : -1;
}

int ng_cuda_is_vmm(const void* p) {
  unsigned long long h;
  if (!ng_cuda_ok() || GUARDED(cuMemRetainAllocationHandle, &h, (void*)p)) return 0;
  (void)GUARDED(cuMemRelease, h);
  return 1;
}

int ng_cuda_capturing(void) {
  if (!ng_cuda_ok()) return 0;
  int st = NG_CU_STREAM_CAPTURE_STATUS_NONE;
  /* A capture on a blocking stream makes the legacy stream report an implicit capture. The
   * per-thread default stream is NOT queried: asking creates it, and a process forked after that
   * crashes in its exit handlers (seen on 2 x H200 with NCCL 2.28.9, tests/gpu/results). */
  ng_cures r = GUARDED(cuStreamIsCapturing, NG_CU_STREAM_LEGACY, &st);
  return r == NG_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT || (!r && st != NG_CU_STREAM_CAPTURE_STATUS_NONE);
}

int ng_cuda_relaxed_capture(int* saved_mode) {
  int mode = NG_CU_STREAM_CAPTURE_MODE_RELAXED;
  if (!ng_cuda_ok() || GUARDED(cuThreadExchangeStreamCaptureMode, &mode)) return -1;
  *saved_mode = mode;
  return 0;
}

void ng_cuda_restore_capture(int saved_mode) {
  if (cu_state > 0) (void)GUARDED(cuThreadExchangeStreamCaptureMode, &saved_mode);
}

int ng_cuda_driver_version(void) {
  int v = -1;
  if (!ng_cuda_ok() || GUARDED(cuDriverGetVersion, &v)) return -1;
  return v;
}

int ng_cuda_vmm_supported(int dev) {
  ng_cudev d;
  int v = -1;
  if (!ng_cuda_ok() || dev < 0 || GUARDED(cuDeviceGet, &d, dev) ||
      GUARDED(cuDeviceGetAttribute, &v, NG_CU_DEVICE_ATTRIBUTE_VMM_SUPPORTED, d))
    return -1;
  return v != 0;
}
