/* ncclMemAlloc and the CUDA runtime's last error the call leaves in this thread (docs/NCCL.md §2).
 * Usage: memalloc SIZE [--pending]   --pending: a runtime error is left unread before the call.
 * Prints one line: result=<ncclResult_t> ptr=set|null lasterr=<cudaGetLastError's name after the call>. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: memalloc SIZE [--pending]\n");
    return 2;
  }
  size_t size = strtoull(argv[1], NULL, 0);
  if (cudaSetDevice(0) != cudaSuccess) return 3;
  (void)cudaGetLastError();
  if (argc > 2 && !strcmp(argv[2], "--pending")) (void)cudaSetDevice(100000); /* unread: invalid device */
  void* p = NULL;
  ncclResult_t r = ncclMemAlloc(&p, size);
  cudaError_t e = cudaGetLastError();
  printf("memalloc result=%d ptr=%s lasterr=%s\n", (int)r, p ? "set" : "null", cudaGetErrorName(e));
  if (r == ncclSuccess && ncclMemFree(p) != ncclSuccess) return 4;
  return 0;
}
