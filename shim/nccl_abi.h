/* The part of NCCL's ABI that ncclguard touches, declared in our own words, so that the library
 * builds with a C compiler alone (no nccl.h, no CUDA header) and one binary serves every NCCL
 * version: a function the loaded NCCL lacks is found missing at run time (real.c) and never
 * called.
 *
 * Written once: the prototypes are one list (NG_NCCL_PROTOS), the result codes another
 * (NG_NCCL_RESULTS). tests/abi/abi_check.c includes the REAL nccl.h of a given version first,
 * defines NG_ABI_CHECK (our type declarations are then skipped) and includes this file: every
 * prototype below is a redeclaration the compiler checks against NCCL's own, and static
 * assertions compare the result codes, the enum values and the config prefix. CI runs that check
 * against the nccl.h of one release per minor version from 2.27 to 2.32 (tests/t_abi.sh). */
#ifndef NCCLGUARD_NCCL_ABI_H
#define NCCLGUARD_NCCL_ABI_H

#include <stddef.h>

/* result codes: stable since NCCL 2.0 (ncclRemoteError 2.13, ncclInProgress 2.14) */
#define NG_NCCL_RESULTS(X)                                                                       \
  X(ncclSuccess, 0) X(ncclUnhandledCudaError, 1) X(ncclSystemError, 2) X(ncclInternalError, 3) \
  X(ncclInvalidArgument, 4) X(ncclInvalidUsage, 5) X(ncclRemoteError, 6) X(ncclInProgress, 7)

/* the values of the enums ncclguard passes to NCCL itself (its agreement all-reduce) */
#define NG_NCCL_INT32 2 /* ncclInt32 */
#define NG_NCCL_MAX 2   /* ncclMax */

/* The prefix of ncclConfig_t that every version since 2.14 shares (NCCL versions the struct by
 * its `size` and `version` fields and only appends). ncclguard reads `blocking` alone. */
struct ng_nccl_config_prefix {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
};
#define NG_NCCL_CONFIG_MAGIC 0xcafebeefu
/* ncclConfig_t as NCCL 2.27 lays it out (nccl.h.in at v2.27.7-1: every later release only appends), for the
 * agreement channel's ncclCommSplit (channel.c): passed with version 2.27.0 and its own size, NCCL 2.27 to
 * 2.32 copy these fields and default the later ones (parseCommConfig, src/init.cc at v2.30.7-1).
 * NG_CFG_UNDEF_INT / a NULL pointer: "not set" (NCCL_CONFIG_UNDEF_INT is INT_MIN). */
struct ng_nccl_config_v22700 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
};
#define NG_CFG_UNDEF_INT (-2147483647 - 1)
#define NG_NCCL_VERSION_2_27_0 22700

#ifndef NG_ABI_CHECK
typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
/* winFlags (nccl.h, 2.27+): NCCL_WIN_COLL_SYMMETRIC */
#define NG_WIN_COLL_SYMMETRIC 0x01
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum {
#define NG_ENUM_RESULT(name, value) name = value,
  NG_NCCL_RESULTS(NG_ENUM_RESULT)
#undef NG_ENUM_RESULT
  ncclNumResults = 8
} ncclResult_t;
typedef int ncclDataType_t; /* an enum in nccl.h: int-sized */
typedef int ncclRedOp_t;
typedef struct ng_nccl_config_prefix ncclConfig_t;
typedef struct ncclSimInfo ncclSimInfo_t; /* opaque: only passed through */
typedef struct CUstream_st* cudaStream_t;
#endif

/* Device-API types (nccl_device/core.h, a C++ header): opaque, only passed through. */
struct ncclDevCommRequirements;
struct ncclDevComm;
struct ng_nccl_props; /* the prefix of ncclCommProperties_t ncclguard reads (rules.c) */

/* X(return, name, (parameters)): every NCCL function ncclguard wraps or calls. */
#define NG_NCCL_PROTOS(X)                                                                                 \
  X(ncclResult_t, ncclGetVersion, (int* version))                                                         \
  X(const char*, ncclGetLastError, (ncclComm_t comm))                                                     \
  X(ncclResult_t, ncclCommInitRank, (ncclComm_t * newcomm, int nranks, ncclUniqueId commId, int rank))    \
  X(ncclResult_t, ncclCommInitRankConfig,                                                                 \
    (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))                 \
  X(ncclResult_t, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int* devlist))                    \
  X(ncclResult_t, ncclCommInitRankScalable,                                                               \
    (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config)) \
  X(ncclResult_t, ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t* newcomm,               \
                                  ncclConfig_t* config))                                                  \
  X(ncclResult_t, ncclCommShrink, (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,         \
                                   ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags))           \
  X(ncclResult_t, ncclCommGrow, (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,     \
                                 ncclComm_t* newcomm, ncclConfig_t* config))                              \
  X(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))                                                    \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))                                                     \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t comm))                                                       \
  X(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))                                     \
  X(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags))                                           \
  X(ncclResult_t, ncclCommResume, (ncclComm_t comm))                                                       \
  X(ncclResult_t, ncclCommWindowRegister, (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,   \
                                           int winFlags))                                                 \
  X(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))                          \
  X(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle))      \
  X(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))                              \
  X(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))                                                \
  X(ncclResult_t, ncclGroupStart, (void))                                                                 \
  X(ncclResult_t, ncclGroupEnd, (void))                                                                   \
  X(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))                                        \
  X(ncclResult_t, ncclAllReduce, (const void* sendbuff, void* recvbuff, size_t count,                     \
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,               \
                                  cudaStream_t stream))                                                   \
  X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * asyncError))                    \
  X(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))                                 \
  X(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))                                   \
  X(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))

/* The device API (C++ header): checked by name and arity only, not by the compiler. */
#define NG_NCCL_DEVPROTOS(X)                                                                            \
  X(ncclResult_t, ncclDevCommCreate, (ncclComm_t comm, struct ncclDevCommRequirements const* reqs,     \
                                      struct ncclDevComm* outDevComm))                                 \
  X(ncclResult_t, ncclDevCommDestroy, (ncclComm_t comm, struct ncclDevComm const* devComm))              \
  X(ncclResult_t, ncclCommQueryProperties, (ncclComm_t comm, struct ng_nccl_props * props))

#define NG_DECLARE_PROTO(ret, name, params) ret name params;
NG_NCCL_PROTOS(NG_DECLARE_PROTO)
#ifndef NG_ABI_CHECK
NG_NCCL_DEVPROTOS(NG_DECLARE_PROTO)
#endif
#undef NG_DECLARE_PROTO

#endif
