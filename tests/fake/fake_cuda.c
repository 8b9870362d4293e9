/* Fake CUDA driver: version, errors, devices, contexts. Compiled against the real cuda.h, so
 * un-suffixed names here export the _v2 symbols that cuda.h maps them to. */
#define _GNU_SOURCE
#include "fake_cuda_int.h"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))

static struct CUctx_st ctxs[FC_MAXDEV];
static __thread struct CUctx_st *cur_ctx; /* per thread, NULL until set (as in CUDA) */

int fc_device_count(void)
{
  static int n = -1;
  if (n < 0) {
    const char *e = getenv("FAKE_CUDA_DEVICES");
    int v = e && *e ? atoi(e) : 8;
    if (v < 0) v = 0;
    if (v > FC_MAXDEV) v = FC_MAXDEV;
    n = v;
  }
  return n;
}

/* The device the calling thread works on: its current context's, else 0 (lenient: the real
 * driver would answer CUDA_ERROR_INVALID_CONTEXT for most calls without a context). */
int fc_current_dev(void) { return cur_ctx ? cur_ctx->dev : 0; }

EXPORT CUresult cuInit(unsigned int flags)
{
  (void)flags;
  return fc_device_count() > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000;
  return CUDA_SUCCESS;
}

struct errname { CUresult r; const char *name, *str; };
static const struct errname errs[] = {
  {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
  {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
  {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
  {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
  {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
  {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
  {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
  {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
  {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
  {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
  {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
  {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
  {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
  {CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences"},
  {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began"},
  {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"},
  {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
  {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
  {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
    if (errs[i].r == error) { *pStr = errs[i].str; return CUDA_SUCCESS; }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
    if (errs[i].r == error) { *pStr = errs[i].name; return CUDA_SUCCESS; }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

static int valid_dev(CUdevice d) { return d >= 0 && d < fc_device_count(); }

EXPORT CUresult cuDeviceGetCount(int *count)
{
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = fc_device_count();
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "Fake H200");
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = FC_TOTAL_MEM;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
  case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *pi = 1; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = 0x18 + dev; break;
  case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = 0; break;
  case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; break;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
  case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: *pi = 0; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: { /* FAKE_CUDA_COMPUTE_MODE: nvidia-smi -c's setting (0 default, 2
                                              prohibited, 3 exclusive process: one context on the GPU at a time) */
    const char *m = getenv("FAKE_CUDA_COMPUTE_MODE");
    *pi = m && *m ? atoi(m) : 0;
    break;
  }
  default: *pi = 0; break;
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
  if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(dev) || !valid_dev(peerDev)) return CUDA_ERROR_INVALID_DEVICE;
  *canAccessPeer = 1;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
  ctxs[dev].dev = dev;
  *pctx = &ctxs[dev];
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
  return valid_dev(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static int valid_ctx(CUcontext c)
{
  return c >= &ctxs[0] && c < &ctxs[FC_MAXDEV] && valid_dev((int)(c - &ctxs[0]));
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = cur_ctx;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
  if (ctx && !valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx) ctx->dev = (int)(ctx - &ctxs[0]);
  cur_ctx = ctx;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *device = cur_ctx->dev;
  return CUDA_SUCCESS;
}

/* cuCtxCreate (-> cuCtxCreate_v4): the fake has one context per device, the primary one. */
EXPORT CUresult cuCtxCreate(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
  (void)params; (void)flags;
  CUresult r = cuDevicePrimaryCtxRetain(pctx, dev);
  if (r == CUDA_SUCCESS) cur_ctx = *pctx;
  return r;
}

EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
  if (!valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (cur_ctx == ctx) cur_ctx = NULL;
  return CUDA_SUCCESS;
}

/* cuCtxSynchronize: potentially unsafe during capture; waits for every stream of the process */
EXPORT CUresult cuCtxSynchronize(void)
{
  CUresult r = fc_unsafe_check();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&fc_lock);
  extern struct CUstream_st *fc_all_streams;
  for (;;) {
    int busy = 0;
    for (struct CUstream_st *s = fc_all_streams; s; s = s->next_all)
      if (!s->destroyed && s->pending > 0) busy = 1;
    if (!busy) break;
    pthread_cond_wait(&fc_cond, &fc_lock);
  }
  pthread_mutex_unlock(&fc_lock);
  return CUDA_SUCCESS;
}

/* Plain (un-suffixed) names of a few _v2 functions, for callers that dlsym the old names.
 * Their old prototypes are ABI-compatible on x86-64/aarch64 for the fake's purposes. */
#define PLAIN_ALIAS(plain, v2) __asm__(".globl " #plain "\n.set " #plain ", " #v2)
PLAIN_ALIAS(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
PLAIN_ALIAS(cuCtxDestroy, cuCtxDestroy_v2);
PLAIN_ALIAS(cuDeviceTotalMem, cuDeviceTotalMem_v2);
