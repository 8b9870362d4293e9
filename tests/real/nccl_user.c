/* libnccluser.so: linked against a real libnccl (NEEDED libnccl.so.2), the way libtorch_cuda.so
 * is (docs/PYTORCH.md §2). user_run() makes a few wrapped and unwrapped calls and prints their results. */
#include <stdio.h>
#include <string.h>

#include <nccl.h>

int user_run(void) {
  int version = 0;
  ncclResult_t rv = ncclGetVersion(&version); /* not wrapped: straight to NCCL */
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  ncclComm_t comm = NULL;
  /* No GPU here: the real NCCL fails cleanly (docs/NCCL.md §6, "No GPU"). */
  ncclResult_t ri = ncclCommInitRank(&comm, 1, id, 0);
  ncclWindow_t win = NULL;
  ncclResult_t rw = ncclCommWindowRegister(NULL, &version, sizeof version, &win, 0);
  printf("version=%d getversion=%d initrank=%d register_null_comm=%d\n", version, (int)rv, (int)ri, (int)rw);
  return 0;
}
