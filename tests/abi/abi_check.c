/* ABI check: ncclguard's own declarations of NCCL and CUDA (shim/nccl_abi.h, shim/cuda_abi.h, and
 * tests/progs/ngapi.h for the header-free scenario programs)
 * against the REAL headers of one NCCL release. Compiled by tests/t_abi.sh with -I pointing at
 * that release's nccl.h: every prototype of nccl_abi.h is then a redeclaration of NCCL's own, and
 * an incompatible one is a compile error; the result codes, the enum values ncclguard passes and
 * the config prefix are compared by static assertions. Prints the header's version. */
#include <stddef.h>
#include <stdio.h>

#include <nccl.h>
#define NG_ABI_CHECK 1
#include "nccl_abi.h"

#define NG_CHECK_RESULT(name, value) _Static_assert((int)name == value, "NCCL result code " #name);
NG_NCCL_RESULTS(NG_CHECK_RESULT)
_Static_assert((int)ncclInt32 == NG_NCCL_INT32, "ncclInt32");
_Static_assert((int)ncclMax == NG_NCCL_MAX, "ncclMax");
_Static_assert(sizeof(ncclDataType_t) == sizeof(int) && sizeof(ncclRedOp_t) == sizeof(int), "enum size");
#define NG_CHECK_FIELD(f)                                                                                    \
  _Static_assert(offsetof(ncclConfig_t, f) == offsetof(struct ng_nccl_config_prefix, f), "ncclConfig_t." #f); \
  _Static_assert(sizeof(((ncclConfig_t*)0)->f) == sizeof(((struct ng_nccl_config_prefix*)0)->f), "ncclConfig_t." #f);
NG_CHECK_FIELD(size)
NG_CHECK_FIELD(magic)
NG_CHECK_FIELD(version)
NG_CHECK_FIELD(blocking)
_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId");
/* the 2.27 layout the agreement channel's split passes (every release since appends only) */
#define NG_CHECK_V27(f)                                                                                       \
  _Static_assert(offsetof(ncclConfig_t, f) == offsetof(struct ng_nccl_config_v22700, f), "ncclConfig_t." #f); \
  _Static_assert(sizeof(((ncclConfig_t*)0)->f) == sizeof(((struct ng_nccl_config_v22700*)0)->f), "ncclConfig_t." #f);
NG_CHECK_V27(size) NG_CHECK_V27(magic) NG_CHECK_V27(version) NG_CHECK_V27(blocking) NG_CHECK_V27(cgaClusterSize)
NG_CHECK_V27(minCTAs) NG_CHECK_V27(maxCTAs) NG_CHECK_V27(netName) NG_CHECK_V27(splitShare) NG_CHECK_V27(trafficClass)
NG_CHECK_V27(commName) NG_CHECK_V27(collnetEnable) NG_CHECK_V27(CTAPolicy) NG_CHECK_V27(shrinkShare)
NG_CHECK_V27(nvlsCTAs)
_Static_assert(sizeof(ncclConfig_t) >= sizeof(struct ng_nccl_config_v22700), "ncclConfig_t since 2.27");
_Static_assert(NCCL_CONFIG_UNDEF_INT == NG_CFG_UNDEF_INT, "NCCL_CONFIG_UNDEF_INT");

/* The header-free scenario programs' declarations (tests/progs/ngapi.h, what ncclguard-doctor --probe
 * runs): every function of their list redeclared against nccl.h, and the values they pass compared. */
#define NG_API_IMPL 1 /* the list and the values only, not the programs' spelling of them */
#include "ngapi.h"
#define NG_REDECLARE(ret, name, params) ret name params;
NG_PROG_NCCL(NG_REDECLARE)
_Static_assert((int)ncclFloat == NG_NCCL_FLOAT, "ncclFloat");
_Static_assert((int)ncclSum == NG_NCCL_SUM, "ncclSum");
_Static_assert(NCCL_WIN_COLL_SYMMETRIC == NG_NCCL_WIN_COLL_SYMMETRIC, "NCCL_WIN_COLL_SYMMETRIC");
_Static_assert(NCCL_CONFIG_UNDEF_INT == NG_NCCL_CONFIG_UNDEF_INT, "NCCL_CONFIG_UNDEF_INT");
#define NG_CHECK_SIM(f)                                                                                          \
  _Static_assert(offsetof(ncclSimInfo_t, f) == offsetof(struct ng_nccl_sim_info, f), "ncclSimInfo_t." #f);     \
  _Static_assert(sizeof(((ncclSimInfo_t*)0)->f) == sizeof(((struct ng_nccl_sim_info*)0)->f), "ncclSimInfo_t." #f);
NG_CHECK_SIM(size)
NG_CHECK_SIM(magic)
NG_CHECK_SIM(version)
NG_CHECK_SIM(estimatedTime)
_Static_assert(sizeof(ncclSimInfo_t) == sizeof(struct ng_nccl_sim_info), "ncclSimInfo_t");

#if defined(NG_WITH_CUDA_H)
#include <cuda.h>
#include "cuda_abi.h"
#define NG_CHECK_CUDA(ours, theirs, value) _Static_assert((long)(theirs) == (long)(ours), #theirs);
NG_CUDA_CONSTS(NG_CHECK_CUDA)
_Static_assert(sizeof(unsigned long long) == sizeof(CUdeviceptr), "CUdeviceptr");
/* the runtime values the header-free programs compare with (ngapi.h), and the driver's that they get */
#include <driver_types.h>
#define NG_CHECK_RT(rt, drv, ours) _Static_assert((int)(rt) == (int)(ours) && (int)(drv) == (int)(ours), #ours);
NG_CHECK_RT(cudaSuccess, CUDA_SUCCESS, NG_CUDA_SUCCESS_RT)
NG_CHECK_RT(cudaErrorNotReady, CUDA_ERROR_NOT_READY, NG_CUDA_ERROR_NOT_READY_RT)
NG_CHECK_RT(cudaErrorStreamCaptureInvalidated, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, NG_CUDA_ERROR_CAPTURE_INVALIDATED_RT)
NG_CHECK_RT(cudaStreamCaptureStatusNone, CU_STREAM_CAPTURE_STATUS_NONE, NG_CAPTURE_STATUS_NONE)
NG_CHECK_RT(cudaStreamCaptureStatusActive, CU_STREAM_CAPTURE_STATUS_ACTIVE, NG_CAPTURE_STATUS_ACTIVE)
NG_CHECK_RT(cudaStreamCaptureStatusInvalidated, CU_STREAM_CAPTURE_STATUS_INVALIDATED, NG_CAPTURE_STATUS_INVALIDATED)
NG_CHECK_RT(cudaStreamCaptureModeGlobal, CU_STREAM_CAPTURE_MODE_GLOBAL, NG_CAPTURE_MODE_GLOBAL)
NG_CHECK_RT(cudaMemcpyHostToDevice, cudaMemcpyHostToDevice, NG_MEMCPY_HOST_TO_DEVICE)
NG_CHECK_RT(cudaMemcpyDeviceToHost, cudaMemcpyDeviceToHost, NG_MEMCPY_DEVICE_TO_HOST)
_Static_assert(sizeof(enum ng_capture_status) == sizeof(CUstreamCaptureStatus), "capture status size");
#endif

/* every function of the list, taken by address: a name the header lacks still links here only
 * as a declaration, which is what ncclguard relies on (it looks functions up at run time). */
int main(void) {
  ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
  if (si.magic != NG_NCCL_SIM_INFO_MAGIC) {
    printf("NCCL_SIM_INFO_INITIALIZER's magic is 0x%x, tests/progs/ngapi.h says 0x%x\n", si.magic, NG_NCCL_SIM_INFO_MAGIC);
    return 1;
  }
  printf("nccl.h %d.%d.%d (%d): %d prototypes compatible\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_VERSION_CODE,
#define NG_COUNT(ret, name, params) +1
         0 NG_NCCL_PROTOS(NG_COUNT));
  return 0;
}
