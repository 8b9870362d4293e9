/* Fake CUDA runtime (libcudart.so.13): a thin layer over the fake driver, with the real
 * prototypes of cuda_runtime_api.h. Like the real runtime, the first call that needs a
 * context makes the current device's primary context current. */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static __thread cudaError_t last_err = cudaSuccess;

static cudaError_t map(CUresult r)
{
  cudaError_t e;
  switch (r) {
  case CUDA_SUCCESS: e = cudaSuccess; break;
  case CUDA_ERROR_INVALID_VALUE: e = cudaErrorInvalidValue; break;
  case CUDA_ERROR_OUT_OF_MEMORY: e = cudaErrorMemoryAllocation; break;
  case CUDA_ERROR_NOT_INITIALIZED: e = cudaErrorInitializationError; break;
  case CUDA_ERROR_NO_DEVICE: e = cudaErrorNoDevice; break;
  case CUDA_ERROR_INVALID_DEVICE: e = cudaErrorInvalidDevice; break;
  case CUDA_ERROR_INVALID_CONTEXT: e = cudaErrorDeviceUninitialized; break;
  case CUDA_ERROR_INVALID_HANDLE: e = cudaErrorInvalidResourceHandle; break;
  case CUDA_ERROR_NOT_READY: e = cudaErrorNotReady; break;
  case CUDA_ERROR_NOT_FOUND: e = cudaErrorSymbolNotFound; break;
  case CUDA_ERROR_ILLEGAL_STATE: e = cudaErrorIllegalState; break;
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: e = cudaErrorStreamCaptureUnsupported; break;
  case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: e = cudaErrorStreamCaptureInvalidated; break;
  case CUDA_ERROR_STREAM_CAPTURE_MERGE: e = cudaErrorStreamCaptureMerge; break;
  case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED: e = cudaErrorStreamCaptureUnmatched; break;
  case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: e = cudaErrorStreamCaptureImplicit; break;
  case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: e = cudaErrorStreamCaptureWrongThread; break;
  default: e = cudaErrorUnknown; break;
  }
  if (e != cudaSuccess && e != cudaErrorNotReady) last_err = e;
  return e;
}

static CUresult ensure_ctx(void)
{
  CUcontext c = NULL;
  cuCtxGetCurrent(&c);
  if (c) return CUDA_SUCCESS;
  CUresult r = cuDevicePrimaryCtxRetain(&c, 0);
  if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(c);
  return r;
}
#define CTX() do { CUresult r_ = ensure_ctx(); if (r_ != CUDA_SUCCESS) return map(r_); } while (0)

EXPORT cudaError_t cudaGetLastError(void)
{
  cudaError_t e = last_err;
  last_err = cudaSuccess;
  return e;
}

/* Reads the thread's last error without resetting it (cuda_runtime_api.h) */
EXPORT cudaError_t cudaPeekAtLastError(void) { return last_err; }

struct rt_err { cudaError_t e; const char *name, *str; };
static const struct rt_err rt_errs[] = {
  {cudaSuccess, "cudaSuccess", "no error"},
  {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
  {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
  {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
  {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
  {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
  {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
  {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
  {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
  {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
  {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
  {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
  {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
  {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
  {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
  {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
  {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"},
  {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

EXPORT const char *cudaGetErrorString(cudaError_t error)
{
  for (size_t i = 0; i < sizeof rt_errs / sizeof rt_errs[0]; i++)
    if (rt_errs[i].e == error) return rt_errs[i].str;
  return "unrecognized error code";
}

EXPORT const char *cudaGetErrorName(cudaError_t error)
{
  for (size_t i = 0; i < sizeof rt_errs / sizeof rt_errs[0]; i++)
    if (rt_errs[i].e == error) return rt_errs[i].name;
  return "cudaErrorUnknown";
}

EXPORT cudaError_t cudaGetDeviceCount(int *count) { return map(cuDeviceGetCount(count)); }

EXPORT cudaError_t cudaSetDevice(int device)
{
  CUcontext c;
  CUresult r = cuDevicePrimaryCtxRetain(&c, device);
  if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(c);
  return map(r);
}

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
  CTX();
  if (!devPtr) return map(CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc(&p, size);
  if (r == CUDA_SUCCESS) *devPtr = (void *)(uintptr_t)p;
  return map(r);
}

EXPORT cudaError_t cudaFree(void *devPtr) { CTX(); return map(cuMemFree((CUdeviceptr)(uintptr_t)devPtr)); }

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
  (void)kind;
  CTX();
  return map(cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, count));
}

EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
  CTX();
  return map(cuMemsetD8((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count));
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
  CTX();
  return map(cuStreamCreate(pStream, flags & cudaStreamNonBlocking ? CU_STREAM_NON_BLOCKING : 0));
}
EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream) { return cudaStreamCreateWithFlags(pStream, 0); }
EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) { return map(cuStreamDestroy(stream)); }
EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) { return map(cuStreamQuery(stream)); }
EXPORT cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) { return map(cuMemGetInfo(free_b, total)); }
EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) { CTX(); return map(cuStreamSynchronize(stream)); }

EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
  CTX();
  return map(cuStreamBeginCapture(stream, (CUstreamCaptureMode)mode));
}

EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
  return map(cuThreadExchangeStreamCaptureMode((CUstreamCaptureMode *)mode));
}

EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
  CTX();
  return map(cuStreamEndCapture(stream, pGraph));
}

EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
  CTX();
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = cuStreamIsCapturing(stream, &st);
  if (r == CUDA_SUCCESS && pCaptureStatus) *pCaptureStatus = (enum cudaStreamCaptureStatus)st;
  return map(r);
}

EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph) { return map(cuGraphDestroy(graph)); }

