/* A communicator with a device communicator must never get a degraded (NULL) window: device
 * code reads windows unchecked (docs/PYTORCH.md §3). One rank: register an ncclMemAlloc buffer, create a
 * device communicator, then register a cudaMalloc buffer. With ncclguard the second
 * registration fails with ncclInvalidUsage instead of returning a NULL window.
 * Prints "RESULT first=<rc> devcomm=<rc> second=<rc> win2=<ptr>"; exit 0 when it ran. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

typedef ncclResult_t (*devcomm_fn)(ncclComm_t, const void*, void*);

int main(void) {
  ncclComm_t comm;
  int dev = 0;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) { printf("RESULT init failed\n"); return 1; }
  void *good = NULL, *bad = NULL;
  if (ncclMemAlloc(&good, 1 << 21) != ncclSuccess || cudaMalloc(&bad, 1 << 21) != cudaSuccess) {
    printf("RESULT alloc failed\n");
    return 1;
  }
  ncclWindow_t w1 = NULL, w2 = NULL;
  ncclResult_t r1 = ncclCommWindowRegister(comm, good, 1 << 21, &w1, NCCL_WIN_COLL_SYMMETRIC);
  devcomm_fn create = (devcomm_fn)dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
  static unsigned char reqs[256], out[4096]; /* zeroed requirements: NCCL 2.28's "none" */
  ncclResult_t rd = create ? create(comm, reqs, out) : ncclInvalidUsage;
  ncclResult_t r2 = ncclCommWindowRegister(comm, bad, 1 << 21, &w2, NCCL_WIN_COLL_SYMMETRIC);
  printf("RESULT first=%d devcomm=%d second=%d win2=%p\n", (int)r1, (int)rd, (int)r2, (void*)w2);
  if (w1) ncclCommWindowDeregister(comm, w1);
  if (w2) ncclCommWindowDeregister(comm, w2);
  ncclCommDestroy(comm);
  ncclMemFree(good);
  cudaFree(bad);
  return 0;
}
