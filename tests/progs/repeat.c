/* repeat: one allocation registered as a window many times, without deregistration in between
 * (NVIDIA/nccl#2331, issue 20): NCCL 2.28/2.29 reuse the allocation, 2.30.7 reserves symmetric address
 * space of the whole allocation for every window and runs out. N ranks (fork; one: ncclCommInitAll).
 *
 *   repeat [-n RANKS] [--size BYTES] [--times K] [--halves] [--drop-first-on R] [--rank1-drops]
 *     --size     the buffer registered (default 2M; "24G" on an H200 reproduces the report)
 *     --halves   allocate 2 x size and register its two halves alternately
 *     --drop-first-on R   rank R deregisters its first window right after registering it (its peers keep
 *                theirs): the next registration is a repeat of a live window on the peers only
 *     --rank1-drops  the last rank deregisters each window right after registering it: at the next
 *                registration its peers hold a live window of the same arguments, it does not
 *     --expect-all   a rank that got fewer than K windows fails (and says so in a second line,
 *                "rank R/N: RESULT ok|fail ...", the form ngtest and the probe read)
 * Each rank registers K times, counts the windows it got, then runs an all-reduce on the buffer,
 * deregisters every window it got (each must succeed) and frees the buffer. Prints
 * "RESULT rank=R windows=W of K first_fail=<result> allreduce=<ok|wrong|error> dereg=<ok|fail>" and,
 * on a failure, NCCL's last error. Exit 1 if a rank's all-reduce or deregistration failed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static int nranks = 1, times = 12, halves = 0, drop_on = -1, drops = 0, expect_all = 0;
static size_t size = 2u << 20;
static struct { volatile int ready; ncclUniqueId id; }* sh;

static int run_rank(int rank) {
  int ndev = 1;
  cudaGetDeviceCount(&ndev);
  int dev = rank % (ndev > 0 ? ndev : 1);
  cudaSetDevice(dev);
  ncclComm_t c = NULL;
  ncclResult_t r;
  if (nranks == 1) {
    r = ncclCommInitAll(&c, 1, &dev);
  } else {
    if (rank == 0) {
      ncclGetUniqueId(&sh->id);
      __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
    } else {
      while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) usleep(200);
    }
    r = ncclCommInitRank(&c, nranks, sh->id, rank);
  }
  if (r != ncclSuccess) {
    ng_say("RESULT rank=%d init=%s", rank, ng_rc_name(r));
    return 1;
  }
  char* buf = NULL;
  if ((r = ncclMemAlloc((void**)&buf, halves ? 2 * size : size)) != ncclSuccess) {
    ng_say("RESULT rank=%d ncclMemAlloc=%s", rank, ng_rc_name(r));
    return 1;
  }
  ncclWindow_t* w = calloc((size_t)times, sizeof *w);
  int got = 0;
  ncclResult_t first_fail = ncclSuccess;
  const char* why = "";
  for (int i = 0; i < times; i++) {
    r = ncclCommWindowRegister(c, buf + (halves && (i & 1) ? size : 0), size, &w[i], NCCL_WIN_COLL_SYMMETRIC);
    if (i == 0 && rank == drop_on && r == ncclSuccess && w[0]) {
      if (ncclCommWindowDeregister(c, w[0]) != ncclSuccess) ng_say("rank %d: deregistration of the first window failed", rank);
      w[0] = NULL;
      continue;
    }
    if (r == ncclSuccess && w[i]) got++;
    else if (first_fail == ncclSuccess) {
      first_fail = r == ncclSuccess ? ncclInvalidUsage : r; /* success with a NULL window counts as no window */
      why = r == ncclSuccess ? "NULL window" : ng_last_error(c);
    }
    if (drops && rank == nranks - 1 && w[i] && ncclCommWindowDeregister(c, w[i]) == ncclSuccess) w[i] = NULL;
  }
  const char* ar = ng_app_allreduce(c, (float*)buf, 1024, rank, nranks, 20000);
  int dereg_ok = 1;
  for (int i = 0; i < times; i++)
    if (w[i] && ncclCommWindowDeregister(c, w[i]) != ncclSuccess) dereg_ok = 0;
  ng_say("RESULT rank=%d windows=%d of %d first_fail=%s allreduce=%s dereg=%s%s%s%s", rank, got, times,
         ng_rc_name(first_fail), ar, dereg_ok ? "ok" : "fail", *why ? " last=\"" : "", why, *why ? "\"" : "");
  int bad = strcmp(ar, "ok") || !dereg_ok;
  if (expect_all) {
    if (got < times || bad)
      ng_say("rank %d/%d: RESULT fail %d of %d windows, first failure %s%s%s%s | allreduce=%s dereg=%s", rank, nranks, got,
             times, ng_rc_name(first_fail), *why ? " \"" : "", why, *why ? "\"" : "", ar, dereg_ok ? "ok" : "fail");
    else
      ng_say("rank %d/%d: RESULT ok windows=%d of %d", rank, nranks, got, times);
    bad |= got < times;
  }
  ncclCommDestroy(c);
  ncclMemFree(buf);
  free(w);
  return bad;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--times") && i + 1 < argc) times = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
      if (ng_parse_size(argv[++i], &size)) return 2;
    } else if (!strcmp(argv[i], "--halves")) halves = 1;
    else if (!strcmp(argv[i], "--drop-first-on") && i + 1 < argc) drop_on = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rank1-drops")) drops = 1;
    else if (!strcmp(argv[i], "--expect-all")) expect_all = 1;
    else {
      fprintf(stderr, "usage: repeat [-n RANKS] [--size BYTES] [--times K] [--halves] [--drop-first-on R] "
                      "[--rank1-drops] [--expect-all]\n");
      return 2;
    }
  }
  if (nranks < 1 || nranks > 8 || times < 1 || times > 10000) return 2;
  if (nranks == 1) return run_rank(0);
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 2;
  pid_t pid[8];
  for (int r = 0; r < nranks; r++)
    if ((pid[r] = fork()) == 0) _exit(run_rank(r));
  int bad = 0;
  for (int r = 0; r < nranks; r++) {
    int st;
    waitpid(pid[r], &st, 0);
    bad |= !WIFEXITED(st) || WEXITSTATUS(st);
  }
  return bad;
}
