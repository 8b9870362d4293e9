/* libnccluser.so: linked against a real libnccl (NEEDED libnccl.so.2), the way libtorch_cuda.so
 * is (docs/PYTORCH.md §2). user_run() makes a few wrapped and unwrapped calls and prints their results. */
#include <stdio.h>
#include <string.h>

#include <nccl.h>

int user_run(void) {
  int version = 0;
  ncclResult_t rv = ncclGetVersion(&version); /* not wrapped: straight to NCCL */
  /* Each answer is written (and flushed) as it comes: the registration on a NULL communicator below
   * is a SIGSEGV in NCCL 2.27 and 2.28 where a GPU is present (docs/NCCL.md §3), and the
   * answers before it must still reach the test. */
  printf("version=%d getversion=%d", version, (int)rv);
  fflush(stdout);
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  ncclComm_t comm = NULL;
  /* Without a GPU the real NCCL fails cleanly (docs/NCCL.md §6, "No GPU"). */
  ncclResult_t ri = ncclCommInitRank(&comm, 1, id, 0);
  printf(" initrank=%d", (int)ri);
  fflush(stdout);
  ncclWindow_t win = NULL;
  ncclResult_t rw = ncclCommWindowRegister(NULL, &version, sizeof version, &win, 0);
  printf(" register_null_comm=%d\n", (int)rw);
  return 0;
}
