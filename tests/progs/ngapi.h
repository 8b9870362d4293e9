/* The NCCL and CUDA calls of the scenario programs, for their header-free build (NG_HEADERFREE: the
 * programs `ncclguard-doctor --probe` runs and tests/gpu/run runs, `make probe` -> $(BUILD)/probe/).
 * No nccl.h and no CUDA header: NCCL's types come from shim/nccl_abi.h (the library's own
 * declarations, checked against every nccl.h by tests/t_abi.sh), the few constants beyond it are
 * below (tests/abi/abi_check.c redeclares the list against every nccl.h and compares the values with
 * nccl.h and driver_types.h), and the libraries are
 * opened at run time by ngapi.c:
 *   - libnccl: $NGTEST_NCCL_LIB, else "libnccl.so.2" (the library path), loaded RTLD_GLOBAL; every NCCL
 *     function is then looked up with dlsym(RTLD_DEFAULT), so a preloaded library that defines it
 *     (ncclguard) receives the call, as it does in a program linked against libnccl;
 *   - libcuda.so.1 ($NGTEST_CUDA_LIB): the CUDA runtime calls the programs make (cudaSetDevice,
 *     cudaMalloc, streams, capture) are mapped onto the driver API, which every GPU node has (the
 *     runtime, libcudart, is not always on the library path). Only the values the programs compare
 *     with are the runtime's own (success, not ready, capture invalidated: the same numbers in both).
 * A library that cannot be loaded, or lacks a function the programs call, ends the program with one
 * line naming it (exit 2) before any rank starts. */
#ifndef NG_NGAPI_H
#define NG_NGAPI_H
#include <limits.h>
#include <stddef.h>
#include "nccl_abi.h"

/* ---- NCCL: the values the programs use beyond nccl_abi.h (nccl.h's names, our values) ---- */
#define NG_NCCL_FLOAT 7              /* ncclFloat (ncclFloat32) */
#define NG_NCCL_SUM 0                /* ncclSum */
#define NG_NCCL_WIN_COLL_SYMMETRIC 1 /* NCCL_WIN_COLL_SYMMETRIC */
#define NG_NCCL_CONFIG_UNDEF_INT INT_MIN
/* ncclSimInfo_t (2.22+; nccl_abi.h keeps it opaque) and its initializer's magic */
struct ng_nccl_sim_info {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
};
#define NG_NCCL_SIM_INFO_MAGIC 0x74685283u
#ifndef NG_ABI_CHECK
#define ncclSimInfo_t struct ng_nccl_sim_info /* nccl_abi.h's is opaque; nccl.h's own in the ABI check */
#endif

/* X(return, name, (parameters)): every NCCL function the header-free programs call */
#define NG_PROG_NCCL(X)                                                                                   \
  X(ncclResult_t, ncclGetVersion, (int* version))                                                         \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))                                             \
  X(const char*, ncclGetErrorString, (ncclResult_t result))                                               \
  X(ncclResult_t, ncclCommInitRank, (ncclComm_t * newcomm, int nranks, ncclUniqueId commId, int rank))    \
  X(ncclResult_t, ncclCommInitRankConfig,                                                                 \
    (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))                 \
  X(ncclResult_t, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int* devlist))                    \
  X(ncclResult_t, ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t* newcomm,               \
                                  ncclConfig_t* config))                                                  \
  X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * asyncError))                    \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))                                                     \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t comm))                                                       \
  X(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))                                     \
  X(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))                                   \
  X(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))                                       \
  X(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))                                                \
  X(ncclResult_t, ncclMemFree, (void* ptr))                                                               \
  X(ncclResult_t, ncclCommWindowRegister, (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,   \
                                           int winFlags))                                                 \
  X(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))                          \
  X(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle))       \
  X(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))                              \
  X(ncclResult_t, ncclGroupStart, (void))                                                                 \
  X(ncclResult_t, ncclGroupEnd, (void))                                                                   \
  X(ncclResult_t, ncclAllReduce, (const void* sendbuff, void* recvbuff, size_t count,                     \
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,               \
                                  cudaStream_t stream))

/* ---- CUDA: the runtime API subset, our names and values (driver_types.h's) ---- */
typedef int ng_cuda_error_t;
typedef struct CUgraph_st* ng_cuda_graph_t;
enum { NG_CUDA_SUCCESS_RT = 0, NG_CUDA_ERROR_NOT_READY_RT = 600, NG_CUDA_ERROR_CAPTURE_INVALIDATED_RT = 901 };
enum ng_capture_status { NG_CAPTURE_STATUS_NONE = 0, NG_CAPTURE_STATUS_ACTIVE = 1, NG_CAPTURE_STATUS_INVALIDATED = 2 };
enum { NG_CAPTURE_MODE_GLOBAL = 0 };
enum { NG_MEMCPY_HOST_TO_DEVICE = 1, NG_MEMCPY_DEVICE_TO_HOST = 2 };

ng_cuda_error_t ng_cudaGetDeviceCount(int* count);
ng_cuda_error_t ng_cudaSetDevice(int dev);
ng_cuda_error_t ng_cudaMalloc(void** p, size_t bytes);
ng_cuda_error_t ng_cudaFree(void* p);
ng_cuda_error_t ng_cudaMemcpy(void* dst, const void* src, size_t bytes, int kind);
ng_cuda_error_t ng_cudaStreamCreate(cudaStream_t* s);
ng_cuda_error_t ng_cudaStreamDestroy(cudaStream_t s);
ng_cuda_error_t ng_cudaStreamSynchronize(cudaStream_t s);
ng_cuda_error_t ng_cudaStreamQuery(cudaStream_t s);
ng_cuda_error_t ng_cudaStreamBeginCapture(cudaStream_t s, int mode);
ng_cuda_error_t ng_cudaStreamEndCapture(cudaStream_t s, ng_cuda_graph_t* g);
ng_cuda_error_t ng_cudaStreamIsCapturing(cudaStream_t s, enum ng_capture_status* status);
ng_cuda_error_t ng_cudaGraphDestroy(ng_cuda_graph_t g);
ng_cuda_error_t ng_cudaGetLastError(void);
const char* ng_cudaGetErrorString(ng_cuda_error_t e);

/* the loaded NCCL's version code (ncclGetVersion), for NCCL_CONFIG_INITIALIZER's version field */
int ng_api_nccl_version(void);

#ifndef NG_API_IMPL
/* The programs' spelling, onto the above. NCCL's functions through the table ngapi.c fills. */
struct ng_api_nccl {
#define NG_API_PTR(ret, name, params) ret(*name) params;
  NG_PROG_NCCL(NG_API_PTR)
#undef NG_API_PTR
};
const struct ng_api_nccl* ng_api(void);
#define ncclGetVersion (*ng_api()->ncclGetVersion)
#define ncclGetUniqueId (*ng_api()->ncclGetUniqueId)
#define ncclGetErrorString (*ng_api()->ncclGetErrorString)
#define ncclCommInitRank (*ng_api()->ncclCommInitRank)
#define ncclCommInitRankConfig (*ng_api()->ncclCommInitRankConfig)
#define ncclCommInitAll (*ng_api()->ncclCommInitAll)
#define ncclCommSplit (*ng_api()->ncclCommSplit)
#define ncclCommGetAsyncError (*ng_api()->ncclCommGetAsyncError)
#define ncclCommDestroy (*ng_api()->ncclCommDestroy)
#define ncclCommAbort (*ng_api()->ncclCommAbort)
#define ncclCommCount (*ng_api()->ncclCommCount)
#define ncclCommUserRank (*ng_api()->ncclCommUserRank)
#define ncclGroupSimulateEnd (*ng_api()->ncclGroupSimulateEnd)
#define NCCL_SIM_INFO_INITIALIZER \
  {sizeof(struct ng_nccl_sim_info), NG_NCCL_SIM_INFO_MAGIC, (unsigned)ng_api_nccl_version(), -1.0f}
#define ncclMemAlloc (*ng_api()->ncclMemAlloc)
#define ncclMemFree (*ng_api()->ncclMemFree)
#define ncclCommWindowRegister (*ng_api()->ncclCommWindowRegister)
#define ncclCommWindowDeregister (*ng_api()->ncclCommWindowDeregister)
#define ncclCommRegister (*ng_api()->ncclCommRegister)
#define ncclCommDeregister (*ng_api()->ncclCommDeregister)
#define ncclGroupStart (*ng_api()->ncclGroupStart)
#define ncclGroupEnd (*ng_api()->ncclGroupEnd)
#define ncclAllReduce (*ng_api()->ncclAllReduce)
#define ncclFloat NG_NCCL_FLOAT
#define ncclSum NG_NCCL_SUM
#define NCCL_WIN_COLL_SYMMETRIC NG_NCCL_WIN_COLL_SYMMETRIC
/* NCCL's initializer: the prefix every version shares, sized as such (NCCL copies `size` bytes and
 * keeps its own defaults for the rest), stamped with the loaded version */
#define NCCL_CONFIG_INITIALIZER \
  {sizeof(ncclConfig_t), NG_NCCL_CONFIG_MAGIC, (unsigned)ng_api_nccl_version(), NG_NCCL_CONFIG_UNDEF_INT}

typedef ng_cuda_error_t cudaError_t;
typedef ng_cuda_graph_t cudaGraph_t;
#define cudaSuccess NG_CUDA_SUCCESS_RT
#define cudaErrorNotReady NG_CUDA_ERROR_NOT_READY_RT
#define cudaErrorStreamCaptureInvalidated NG_CUDA_ERROR_CAPTURE_INVALIDATED_RT
#define cudaStreamCaptureStatus ng_capture_status
#define cudaStreamCaptureStatusNone NG_CAPTURE_STATUS_NONE
#define cudaStreamCaptureStatusActive NG_CAPTURE_STATUS_ACTIVE
#define cudaStreamCaptureStatusInvalidated NG_CAPTURE_STATUS_INVALIDATED
#define cudaStreamCaptureModeGlobal NG_CAPTURE_MODE_GLOBAL
#define cudaMemcpyHostToDevice NG_MEMCPY_HOST_TO_DEVICE
#define cudaMemcpyDeviceToHost NG_MEMCPY_DEVICE_TO_HOST
#define cudaGetDeviceCount ng_cudaGetDeviceCount
#define cudaSetDevice ng_cudaSetDevice
#define cudaMalloc ng_cudaMalloc
#define cudaFree ng_cudaFree
#define cudaMemcpy ng_cudaMemcpy
#define cudaStreamCreate ng_cudaStreamCreate
#define cudaStreamDestroy ng_cudaStreamDestroy
#define cudaStreamSynchronize ng_cudaStreamSynchronize
#define cudaStreamQuery ng_cudaStreamQuery
#define cudaStreamBeginCapture ng_cudaStreamBeginCapture
#define cudaStreamEndCapture ng_cudaStreamEndCapture
#define cudaStreamIsCapturing ng_cudaStreamIsCapturing
#define cudaGraphDestroy ng_cudaGraphDestroy
#define cudaGetLastError ng_cudaGetLastError
#define cudaGetErrorString ng_cudaGetErrorString
#endif
#endif
