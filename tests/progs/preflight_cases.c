/* One rank (ncclCommInitAll on device 0) registering buffers that only the preflight can judge:
 *   wrong-device  an ncclMemAlloc buffer allocated on device 1
 *   out-of-range  size twice the allocation
 *   host          plain host memory (malloc)
 * Prints "RESULT case=<name> reg=<rc> win=<ptr>"; exit 0 when it ran. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

int main(int argc, char** argv) {
  const char* c = argc > 1 ? argv[1] : "";
  int dev = 0;
  ncclComm_t comm;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) { printf("RESULT init failed\n"); return 1; }
  void* buf = NULL;
  size_t size = 1 << 21;
  if (!strcmp(c, "wrong-device")) {
    cudaSetDevice(1);
    if (ncclMemAlloc(&buf, size) != ncclSuccess) { printf("RESULT alloc failed\n"); return 1; }
    cudaSetDevice(0);
  } else if (!strcmp(c, "out-of-range")) {
    if (ncclMemAlloc(&buf, size) != ncclSuccess) { printf("RESULT alloc failed\n"); return 1; }
    size *= 2;
  } else if (!strcmp(c, "host")) {
    buf = malloc(size);
  } else {
    fprintf(stderr, "usage: preflight_cases wrong-device|out-of-range|host\n");
    return 2;
  }
  ncclWindow_t w = NULL;
  ncclResult_t r = ncclCommWindowRegister(comm, buf, size, &w, NCCL_WIN_COLL_SYMMETRIC);
  printf("RESULT case=%s reg=%d win=%p\n", c, (int)r, (void*)w);
  if (w) ncclCommWindowDeregister(comm, w);
  ncclCommDestroy(comm);
  if (!strcmp(c, "host")) free(buf);
  else ncclMemFree(buf);
  return 0;
}
