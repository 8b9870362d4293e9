/* The header-free programs' NCCL and CUDA (see ngapi.h): libnccl and libcuda.so.1 opened once, at the
 * first call, and every function the programs call looked up. Nothing here is interposed: NCCL's
 * functions are found through the global scope, where a preloaded library comes first. */
#define _GNU_SOURCE
#define NG_API_IMPL
#include "ngapi.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a host per process (NGTEST_HOST_PER_PROCESS=1) ----
 * ncclguard-doctor --probe --ranks N, with more ranks than GPUs, runs ranks that share a GPU; NCCL refuses two
 * ranks of one host on one GPU, and takes its host identity from NCCL_HOSTID. With NGTEST_HOST_PER_PROCESS=1
 * this program and every child it forks (one process per rank) set NCCL_HOSTID=ngtest-<pid>: to NCCL each
 * rank is on a host of its own, joined over the network transport (as tests/gpu/hostid.c does for the GPU
 * suite). The string is a static buffer given to putenv; a forked child rewrites its pid in place (no
 * allocation, no lock in the fork handler). */
static char host_entry[48] = "NCCL_HOSTID=ngtest-";
static void host_id_write(void) {
  char d[24];
  int n = 0;
  unsigned long v = (unsigned long)getpid();
  do {
    d[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v && n < (int)sizeof d);
  size_t at = sizeof "NCCL_HOSTID=ngtest-" - 1;
  while (n > 0 && at + 1 < sizeof host_entry) host_entry[at++] = d[--n];
  host_entry[at] = 0;
}
__attribute__((constructor)) static void host_per_process(void) {
  const char* on = getenv("NGTEST_HOST_PER_PROCESS");
  if (!on || strcmp(on, "1") != 0) return;
  host_id_write();
  putenv(host_entry);
  pthread_atfork(NULL, NULL, host_id_write);
}

/* ---- NCCL ---- */
struct ng_api_nccl {
#define NG_API_PTR(ret, name, params) ret(*name) params;
  NG_PROG_NCCL(NG_API_PTR)
#undef NG_API_PTR
};
static struct ng_api_nccl api;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static int nccl_version;

static void die(const char* fmt, const char* a, const char* b) {
  char line[1024];
  int n = snprintf(line, sizeof line, fmt, a, b);
  if (n > 0) {
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
  }
  exit(2);
}

static void load_nccl(void) {
  const char* lib = getenv("NGTEST_NCCL_LIB");
  if (!lib || !*lib) lib = "libnccl.so.2";
  /* RTLD_GLOBAL: the library joins the global scope, where ncclguard (preloaded) looks it up */
  if (!dlopen(lib, RTLD_NOW | RTLD_GLOBAL)) {
    const char* e = dlerror();
    die("scenario program: NCCL (%s) cannot be loaded: %s; set NGTEST_NCCL_LIB=/path/to/libnccl.so.2", lib, e ? e : "?");
  }
#define NG_API_FIND(ret, name, params)                                                           \
  if (!(api.name = (ret(*) params)dlsym(RTLD_DEFAULT, #name)))                                    \
    die("scenario program: the loaded NCCL (%s) has no %s: NCCL 2.27 or later is needed", lib, #name);
  NG_PROG_NCCL(NG_API_FIND)
#undef NG_API_FIND
  api.ncclGetVersion(&nccl_version);
}

const struct ng_api_nccl* ng_api(void) {
  pthread_once(&nccl_once, load_nccl);
  return &api;
}

int ng_api_nccl_version(void) {
  ng_api();
  return nccl_version;
}

/* ---- CUDA: the runtime subset over the driver API ---- */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef unsigned long long CUdeviceptr;
static struct {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*cuStreamCreate)(cudaStream_t*, unsigned);
  CUresult (*cuStreamDestroy)(cudaStream_t);
  CUresult (*cuStreamSynchronize)(cudaStream_t);
  CUresult (*cuStreamQuery)(cudaStream_t);
  CUresult (*cuStreamBeginCapture)(cudaStream_t, int);
  CUresult (*cuStreamEndCapture)(cudaStream_t, ng_cuda_graph_t*);
  CUresult (*cuStreamIsCapturing)(cudaStream_t, enum ng_capture_status*);
  CUresult (*cuGraphDestroy)(ng_cuda_graph_t);
  CUresult (*cuGetErrorString)(CUresult, const char**);
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static CUresult cu_init_rc;
static __thread ng_cuda_error_t last_error;

static void load_cuda(void) {
  const char* lib = getenv("NGTEST_CUDA_LIB");
  if (!lib || !*lib) lib = "libcuda.so.1";
  void* h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char* e = dlerror();
    die("scenario program: the CUDA driver (%s) cannot be loaded: %s; run on a GPU node (or set NGTEST_CUDA_LIB)", lib, e ? e : "?");
  }
  static const struct { void** fn; const char* name; } want[] = {
      {(void**)&cu.cuInit, "cuInit"},
      {(void**)&cu.cuDeviceGetCount, "cuDeviceGetCount"},
      {(void**)&cu.cuDeviceGet, "cuDeviceGet"},
      {(void**)&cu.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
      {(void**)&cu.cuCtxGetCurrent, "cuCtxGetCurrent"},
      {(void**)&cu.cuCtxSetCurrent, "cuCtxSetCurrent"},
      {(void**)&cu.cuMemAlloc, "cuMemAlloc_v2"},
      {(void**)&cu.cuMemFree, "cuMemFree_v2"},
      {(void**)&cu.cuMemcpyHtoD, "cuMemcpyHtoD_v2"},
      {(void**)&cu.cuMemcpyDtoH, "cuMemcpyDtoH_v2"},
      {(void**)&cu.cuMemcpy, "cuMemcpy"},
      {(void**)&cu.cuStreamCreate, "cuStreamCreate"},
      {(void**)&cu.cuStreamDestroy, "cuStreamDestroy_v2"},
      {(void**)&cu.cuStreamSynchronize, "cuStreamSynchronize"},
      {(void**)&cu.cuStreamQuery, "cuStreamQuery"},
      {(void**)&cu.cuStreamBeginCapture, "cuStreamBeginCapture_v2"},
      {(void**)&cu.cuStreamEndCapture, "cuStreamEndCapture"},
      {(void**)&cu.cuStreamIsCapturing, "cuStreamIsCapturing"},
      {(void**)&cu.cuGraphDestroy, "cuGraphDestroy"},
      {(void**)&cu.cuGetErrorString, "cuGetErrorString"},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    if (!(*want[i].fn = dlsym(h, want[i].name))) die("scenario program: the CUDA driver (%s) has no %s", lib, want[i].name);
  cu_init_rc = cu.cuInit(0);
}

/* every call: the driver loaded and initialised; a failed cuInit is the call's error */
static ng_cuda_error_t ready(void) {
  pthread_once(&cu_once, load_cuda);
  return cu_init_rc;
}

static ng_cuda_error_t rt(CUresult r) {
  if (r) last_error = r;
  return r;
}

/* the runtime's implicit context: device 0's primary context when the thread has none */
static ng_cuda_error_t with_ctx(void) {
  CUresult r = ready();
  if (r) return rt(r);
  CUcontext c = NULL;
  cu.cuCtxGetCurrent(&c);
  return c ? 0 : ng_cudaSetDevice(0);
}

ng_cuda_error_t ng_cudaGetDeviceCount(int* count) {
  CUresult r = ready();
  return rt(r ? r : cu.cuDeviceGetCount(count));
}

ng_cuda_error_t ng_cudaSetDevice(int dev) {
  CUresult r = ready();
  CUdevice d;
  CUcontext c;
  if (!r) r = cu.cuDeviceGet(&d, dev);
  if (!r) r = cu.cuDevicePrimaryCtxRetain(&c, d);
  if (!r) r = cu.cuCtxSetCurrent(c);
  return rt(r);
}

ng_cuda_error_t ng_cudaMalloc(void** p, size_t bytes) {
  CUresult r = with_ctx();
  CUdeviceptr d = 0;
  if (!r) r = rt(cu.cuMemAlloc(&d, bytes));
  *p = r ? NULL : (void*)(uintptr_t)d;
  return r;
}

ng_cuda_error_t ng_cudaFree(void* p) {
  CUresult r = with_ctx();
  return r ? r : rt(cu.cuMemFree((CUdeviceptr)(uintptr_t)p));
}

ng_cuda_error_t ng_cudaMemcpy(void* dst, const void* src, size_t bytes, int kind) {
  CUresult r = with_ctx();
  if (r) return r;
  if (kind == NG_MEMCPY_HOST_TO_DEVICE) return rt(cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes));
  if (kind == NG_MEMCPY_DEVICE_TO_HOST) return rt(cu.cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes));
  return rt(cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes)); /* unified addressing */
}

ng_cuda_error_t ng_cudaStreamCreate(cudaStream_t* s) {
  CUresult r = with_ctx();
  return r ? r : rt(cu.cuStreamCreate(s, 0)); /* a blocking stream, as cudaStreamCreate makes */
}

ng_cuda_error_t ng_cudaStreamDestroy(cudaStream_t s) {
  CUresult r = ready();
  return rt(r ? r : cu.cuStreamDestroy(s));
}

ng_cuda_error_t ng_cudaStreamSynchronize(cudaStream_t s) {
  CUresult r = with_ctx();
  return r ? r : rt(cu.cuStreamSynchronize(s));
}

ng_cuda_error_t ng_cudaStreamQuery(cudaStream_t s) {
  CUresult r = ready();
  return r ? rt(r) : cu.cuStreamQuery(s); /* "not ready" is no error to remember */
}

ng_cuda_error_t ng_cudaStreamBeginCapture(cudaStream_t s, int mode) {
  CUresult r = ready();
  return rt(r ? r : cu.cuStreamBeginCapture(s, mode));
}

ng_cuda_error_t ng_cudaStreamEndCapture(cudaStream_t s, ng_cuda_graph_t* g) {
  CUresult r = ready();
  return rt(r ? r : cu.cuStreamEndCapture(s, g));
}

ng_cuda_error_t ng_cudaStreamIsCapturing(cudaStream_t s, enum ng_capture_status* status) {
  CUresult r = ready();
  return rt(r ? r : cu.cuStreamIsCapturing(s, status));
}

ng_cuda_error_t ng_cudaGraphDestroy(ng_cuda_graph_t g) {
  CUresult r = ready();
  return rt(r ? r : cu.cuGraphDestroy(g));
}

ng_cuda_error_t ng_cudaGetLastError(void) {
  ng_cuda_error_t e = last_error;
  last_error = 0;
  return e;
}

const char* ng_cudaGetErrorString(ng_cuda_error_t e) {
  const char* s = NULL;
  (void)ready();
  if (cu.cuGetErrorString) cu.cuGetErrorString(e, &s);
  return s ? s : "unknown CUDA error";
}
