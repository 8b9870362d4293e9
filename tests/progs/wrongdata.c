/* wrongdata: a fault on one rank around a window registration, then the application's own all-reduce;
 * checks that it is correct or an error on every rank, never wrong data (issue 19: a round of
 * ncclguard's that one rank left would pair with that rank's next collective). Two ranks, one process
 * each (fork), rank r on GPU r % ndev; the same source runs against the fakes (CI) and a real NCCL.
 *
 *   wrongdata oom       rank 1's device allocations of up to 64 KiB fail during its registration (the
 *                       agreement's scratch: a GPU whose memory the caching allocator holds); fakes only
 *                       (FAKE_CUDA_OOM_BELOW)
 *   wrongdata slow      rank 1 is held WRONGDATA_DELAY_MS (default 2500) inside NCCL's registration
 *                       (the fakes' FAKE_NCCL_REG_DELAY_MS, set on that rank only)
 *   wrongdata settings  rank 0 runs with NCCLGUARD_ON_FAILURE=degrade, rank 1 with error, and both
 *                       register a cudaMalloc buffer (refused on NCCL's symmetric path)
 *   wrongdata stalewin  rank 0 is held WRONGDATA_DELAY_MS inside NCCL's registration past
 *                       NCCLGUARD_TIMEOUT (the watchdog revokes it after NCCL wrote its window)
 *   wrongdata extra     an application out of step: in one group, rank 0 registers one window, rank 1
 *                       two (the halves of its buffer); the round's header differs (its count)
 * WRONGDATA_APP_REVOKE=1: after its all-reduce each rank revokes the communicator itself ("revoke=").
 * WRONGDATA_END_TWICE=1: then each rank aborts it, and destroys and finalizes it after the abort.
 * Before the registration the ranks run one all-reduce (the communicator is warm, as in a job).
 * Each rank prints "RESULT rank=R reg=<result> win=<null|set> allreduce=<ok|error|hang|wrong>"; the
 * application's all-reduce is waited for --wait SEC (default 8) and "hang" if it did not end.
 * Exit: 1 if a rank saw wrong data, 124 if a rank did not end within --timeout SEC (default 60). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define COUNT 1024
struct shared {
  volatile int ready;
  ncclUniqueId id;
};
static struct shared* sh;
static const char* mode;
static int wait_s = 8, timeout_s = 60;

static int run_rank(int rank) {
  int ndev = 1;
  cudaGetDeviceCount(&ndev);
  cudaSetDevice(rank % (ndev > 0 ? ndev : 1));
  if (!strcmp(mode, "settings")) setenv("NCCLGUARD_ON_FAILURE", rank == 0 ? "degrade" : "error", 1);
  if (rank == 0) {
    ncclGetUniqueId(&sh->id);
    __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
  } else {
    while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) usleep(200);
  }
  ncclComm_t c = NULL;
  ncclResult_t r = ncclCommInitRank(&c, 2, sh->id, rank);
  if (r != ncclSuccess) {
    ng_say("RESULT rank=%d init=%s", rank, ng_rc_name(r));
    return 0;
  }
  float* d = NULL;
  cudaMalloc((void**)&d, COUNT * sizeof(float));
  const char* warm = ng_app_allreduce(c, d, COUNT, rank, 2, wait_s * 1000);
  void* buf = NULL;
  if (!strcmp(mode, "settings")) cudaMalloc(&buf, 1 << 21);
  else ncclMemAlloc(&buf, 1 << 21);
  const char* delay = getenv("WRONGDATA_DELAY_MS");
  int faulty = !strcmp(mode, "stalewin") ? rank == 0 : rank == 1;
  if (faulty && !strcmp(mode, "oom")) setenv("FAKE_CUDA_OOM_BELOW", "65536", 1);
  if (faulty && (!strcmp(mode, "slow") || !strcmp(mode, "stalewin")))
    setenv("FAKE_NCCL_REG_DELAY_MS", delay ? delay : "2500", 1);
  ncclWindow_t w = (ncclWindow_t)(uintptr_t)0x5a5a5a5a; /* a caller's uninitialised variable */
  if (!strcmp(mode, "extra")) {
    ncclWindow_t w2 = NULL;
    ncclGroupStart();
    r = ncclCommWindowRegister(c, buf, 1 << 20, &w, NCCL_WIN_COLL_SYMMETRIC);
    if (faulty) ncclCommWindowRegister(c, (char*)buf + (1 << 20), 1 << 20, &w2, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess) r = e;
  } else {
    r = ncclCommWindowRegister(c, buf, 1 << 21, &w, NCCL_WIN_COLL_SYMMETRIC);
  }
  unsetenv("FAKE_CUDA_OOM_BELOW");
  unsetenv("FAKE_NCCL_REG_DELAY_MS");
  const char* win = w == NULL ? "null" : w == (ncclWindow_t)(uintptr_t)0x5a5a5a5a ? "untouched" : "set";
  const char* ar = ng_app_allreduce(c, d, COUNT, rank, 2, wait_s * 1000);
  /* WRONGDATA_APP_REVOKE=1: then the application revokes the communicator itself (ncclCommRevoke, 2.28.7+) */
  char rv[200] = "";
  if (getenv("WRONGDATA_APP_REVOKE")) { /* looked up: NCCL before 2.28.7 has no ncclCommRevoke */
    ncclResult_t (*revoke)(ncclComm_t, int) = (ncclResult_t(*)(ncclComm_t, int))dlsym(RTLD_DEFAULT, "ncclCommRevoke");
    snprintf(rv, sizeof rv, " revoke=%s", revoke ? ng_rc_name(revoke(c, 0)) : "missing");
  }
  /* WRONGDATA_END_TWICE=1: then abort the communicator, and destroy and finalize it after that */
  if (getenv("WRONGDATA_END_TWICE")) {
    ncclResult_t a = ncclCommAbort(c), b = ncclCommDestroy(c), f = ncclCommFinalize(c);
    snprintf(rv + strlen(rv), sizeof rv - strlen(rv), " abort=%s destroy=%s finalize=%s", ng_rc_name(a), ng_rc_name(b),
             ng_rc_name(f));
  }
  ng_say("RESULT rank=%d warm=%s reg=%s win=%s allreduce=%s%s", rank, warm, ng_rc_name(r), win, ar, rv);
  /* a rank whose peer may hang leaves without tearing down (no wait on a dead communicator) */
  fflush(stdout);
  _exit(!strcmp(ar, "wrong") ? 1 : 0);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: wrongdata oom|slow|settings|stalewin|extra [--wait SEC] [--timeout SEC]\n");
    return 2;
  }
  mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--wait")) wait_s = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--timeout")) timeout_s = atoi(argv[i + 1]);
  }
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 2;
  memset((void*)sh, 0, sizeof *sh);
  pid_t pid[2];
  for (int r = 0; r < 2; r++) {
    pid[r] = fork();
    if (pid[r] == 0) _exit(run_rank(r));
  }
  int bad = 0, left = 2;
  double until = ng_now_us() + timeout_s * 1e6;
  int done[2] = {0, 0};
  while (left && ng_now_us() < until) {
    for (int r = 0; r < 2; r++) {
      int st;
      if (!done[r] && waitpid(pid[r], &st, WNOHANG) == pid[r]) {
        done[r] = 1, left--;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 1;
      }
    }
    usleep(10000);
  }
  for (int r = 0; r < 2; r++)
    if (!done[r]) kill(pid[r], SIGKILL), waitpid(pid[r], NULL, 0);
  return left ? 124 : bad;
}
