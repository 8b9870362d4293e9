/* ABI check: ncclguard's own declarations of NCCL and CUDA (shim/nccl_abi.h, shim/cuda_abi.h)
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

#if defined(NG_WITH_CUDA_H)
#include <cuda.h>
#include "cuda_abi.h"
#define NG_CHECK_CUDA(ours, theirs, value) _Static_assert((long)(theirs) == (long)(ours), #theirs);
NG_CUDA_CONSTS(NG_CHECK_CUDA)
_Static_assert(sizeof(unsigned long long) == sizeof(CUdeviceptr), "CUdeviceptr");
#endif

/* every function of the list, taken by address: a name the header lacks still links here only
 * as a declaration, which is what ncclguard relies on (it looks functions up at run time). */
int main(void) {
  printf("nccl.h %d.%d.%d (%d): %d prototypes compatible\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_VERSION_CODE,
#define NG_COUNT(ret, name, params) +1
         0 NG_NCCL_PROTOS(NG_COUNT));
  return 0;
}
