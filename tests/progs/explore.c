/* explore: randomised fault exploration of window registration (issue 19). N ranks (one process each,
 * fork); each schedule makes a fresh communicator, runs one all-reduce, then a registration (or a group
 * of two) with a fault injected on one or more ranks, then the application's own all-reduce, and
 * checks, on every rank: the all-reduce is correct or an error (never wrong data), an error leaves *win
 * NULL, no call hangs past its bound. The fault of a schedule is drawn from (seed, schedule) alike on
 * every rank. Against the fakes only (the faults are the fakes' knobs: FAKE_CUDA_OOM_BELOW,
 * FAKE_NCCL_REG_DELAY_MS). The fakes' collective-matching checker (FAKE_NCCL_MISMATCH_FILE) sees every
 * collective of every schedule.
 *
 *   explore [-n RANKS] [--schedules K] [--seed S] [--timeout-ms T] [--fast]
 *     T: the NCCLGUARD_TIMEOUT the program sets for itself (default 600 ms); delays are drawn around it
 *     --fast: only the faults that end without waiting for a timeout (none, a slow rank below T/2, a
 *             cudaMalloc buffer, size 0, a NULL buffer, a group with a cudaMalloc buffer): thousands of
 *             schedules in a minute
 * Prints one line per violation and "explore: RESULT schedules=K violations=V faults=<counts>";
 * exit 1 if any violation. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define COUNT 256
enum { F_NONE, F_OOM, F_DELAY_SHORT, F_DELAY_HALF, F_DELAY_PAST, F_NOT_VMM, F_ZERO_SIZE, F_NULL_BUFF, F_GROUP_OOM,
       F_GROUP_NOT_VMM, F_OOM_TWO, F_NFAULTS };
static const char* fname[] = {"none",     "oom",       "delay<T/2",  "T/2<delay<T", "delay>T", "not_vmm",
                              "zero_size", "null_buff", "group+oom", "group+not_vmm", "oom-2-ranks"};
struct shared {
  volatile int gen;
  ncclUniqueId id;
  volatile int violations;
  volatile int arrived[20000];
};
static struct shared* sh;
static int nranks = 2, schedules = 100, timeout_ms = 600;
static unsigned seed = 1;
static int fast;
static const int fast_faults[] = {F_NONE, F_DELAY_SHORT, F_NOT_VMM, F_ZERO_SIZE, F_NULL_BUFF, F_GROUP_NOT_VMM};
#define NFAST ((int)(sizeof fast_faults / sizeof fast_faults[0]))
static uint64_t mix(uint64_t x);
/* the fault of schedule k, alike on every rank */
static int fault_of(uint64_t h) { return fast ? fast_faults[h % NFAST] : (int)(h % F_NFAULTS); }

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* every rank waits for the others at the start of schedule k (a host barrier through shared memory) */
static void barrier(int k) {
  __atomic_add_fetch(&sh->arrived[k], 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&sh->arrived[k], __ATOMIC_ACQUIRE) < nranks) usleep(100);
}

static void violation(int rank, int k, int f, const char* what) {
  __atomic_add_fetch(&sh->violations, 1, __ATOMIC_ACQ_REL);
  ng_say("explore: VIOLATION schedule=%d rank=%d fault=%s: %s", k, rank, fname[f], what);
}

static int run_rank(int rank) {
  int ndev = 1;
  cudaGetDeviceCount(&ndev);
  cudaSetDevice(rank % (ndev > 0 ? ndev : 1));
  char tbuf[32];
  snprintf(tbuf, sizeof tbuf, "%g", timeout_ms / 1000.0);
  setenv("NCCLGUARD_TIMEOUT", tbuf, 1);
  void *vmm = NULL, *plain = NULL;
  ncclMemAlloc(&vmm, 4 << 20);
  cudaMalloc(&plain, 1 << 21);
  float* d = NULL;
  cudaMalloc((void**)&d, COUNT * sizeof(float));
  for (int k = 0; k < schedules; k++) {
    uint64_t h = mix(((uint64_t)seed << 32) ^ (uint64_t)k);
    int f = fault_of(h), victim = (int)((h >> 16) % (uint64_t)nranks);
    int victim2 = (victim + 1 + (int)((h >> 24) % (uint64_t)(nranks - 1))) % nranks;
    int hit = rank == victim || (f == F_OOM_TWO && rank == victim2);
    barrier(k);
    if (rank == 0) {
      ncclGetUniqueId(&sh->id);
      __atomic_store_n(&sh->gen, k + 1, __ATOMIC_RELEASE);
    } else {
      while (__atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE) < k + 1) usleep(100);
    }
    ncclComm_t c = NULL;
    if (ncclCommInitRank(&c, nranks, sh->id, rank) != ncclSuccess) {
      violation(rank, k, f, "ncclCommInitRank failed");
      continue;
    }
    const char* warm = ng_app_allreduce(c, d, COUNT, rank, nranks, 4 * timeout_ms);
    if (strcmp(warm, "ok")) violation(rank, k, f, "the warm-up all-reduce failed");
    void* buf = vmm;
    size_t size = 1 << 21;
    if (hit && (f == F_NOT_VMM || f == F_GROUP_NOT_VMM)) buf = plain;
    if (hit && f == F_ZERO_SIZE) size = 0;
    if (hit && f == F_NULL_BUFF) buf = NULL;
    char ms[32] = "";
    if (hit && f == F_DELAY_SHORT) snprintf(ms, sizeof ms, "%d", timeout_ms / 5);
    if (hit && f == F_DELAY_HALF) snprintf(ms, sizeof ms, "%d", timeout_ms * 7 / 10);
    if (hit && f == F_DELAY_PAST) snprintf(ms, sizeof ms, "%d", timeout_ms * 2);
    if (ms[0]) setenv("FAKE_NCCL_REG_DELAY_MS", ms, 1);
    if (hit && (f == F_OOM || f == F_GROUP_OOM || f == F_OOM_TWO)) setenv("FAKE_CUDA_OOM_BELOW", "1048576", 1);
    ncclWindow_t sentinel = (ncclWindow_t)(uintptr_t)0x5a5a5a5a;
    ncclWindow_t w[2] = {sentinel, sentinel};
    ncclResult_t r, r2 = ncclSuccess;
    int group = f == F_GROUP_OOM || f == F_GROUP_NOT_VMM;
    if (group) {
      ncclGroupStart();
      r = ncclCommWindowRegister(c, buf, size, &w[0], NCCL_WIN_COLL_SYMMETRIC);
      r2 = ncclCommWindowRegister(c, (char*)vmm + (2 << 20), 1 << 21, &w[1], NCCL_WIN_COLL_SYMMETRIC);
      ncclResult_t e = ncclGroupEnd();
      if (r == ncclSuccess) r = e;
      if (r2 == ncclSuccess) r2 = e;
    } else {
      r = ncclCommWindowRegister(c, buf, size, &w[0], NCCL_WIN_COLL_SYMMETRIC);
    }
    unsetenv("FAKE_NCCL_REG_DELAY_MS");
    unsetenv("FAKE_CUDA_OOM_BELOW");
    if (r != ncclSuccess && w[0] != NULL) violation(rank, k, f, "an error left *win set");
    if (group && r2 != ncclSuccess && w[1] != NULL) violation(rank, k, f, "an error left the second *win set");
    const char* ar = ng_app_allreduce(c, d, COUNT, rank, nranks, 3 * timeout_ms);
    if (!strcmp(ar, "wrong")) violation(rank, k, f, "the application's all-reduce gave wrong data");
    if (getenv("EXPLORE_VERBOSE"))
      ng_say("explore: schedule=%d rank=%d fault=%s%s reg=%s allreduce=%s", k, rank, fname[f], hit ? "(here)" : "",
             ng_rc_name(r), ar);
    for (int i = 0; i < 2; i++)
      if (r == ncclSuccess && w[i] && w[i] != sentinel) ncclCommWindowDeregister(c, w[i]);
    ncclCommAbort(c); /* whatever happened: the next schedule starts on a fresh communicator */
  }
  return 0;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--fast")) fast = 1;
    else if (!v) return 2;
    else if (!strcmp(a, "-n")) nranks = atoi(v), i++;
    else if (!strcmp(a, "--schedules")) schedules = atoi(v), i++;
    else if (!strcmp(a, "--seed")) seed = (unsigned)strtoul(v, NULL, 0), i++;
    else if (!strcmp(a, "--timeout-ms")) timeout_ms = atoi(v), i++;
    else return 2;
  }
  if (nranks < 2 || nranks > 8 || schedules < 1 || schedules > 20000) {
    fprintf(stderr, "explore: -n 2..8, --schedules 1..20000\n");
    return 2;
  }
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 2;
  memset((void*)sh, 0, sizeof *sh);
  pid_t pid[8];
  for (int r = 0; r < nranks; r++) {
    pid[r] = fork();
    if (pid[r] == 0) _exit(run_rank(r));
  }
  int bad = 0;
  for (int r = 0; r < nranks; r++) {
    int st;
    waitpid(pid[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
      bad = 1;
      ng_say("explore: VIOLATION rank %d ended with %s %d", r, WIFEXITED(st) ? "exit" : "signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
  }
  int counts[F_NFAULTS] = {0};
  for (int k = 0; k < schedules; k++) counts[fault_of(mix(((uint64_t)seed << 32) ^ (uint64_t)k))]++;
  char cs[512] = "";
  size_t l = 0;
  for (int f = 0; f < F_NFAULTS; f++) {
    int w = snprintf(cs + l, sizeof cs - l, "%s%s:%d", f ? "," : "", fname[f], counts[f]);
    if (w > 0 && (size_t)w < sizeof cs - l) l += (size_t)w;
  }
  ng_say("explore: RESULT ranks=%d schedules=%d violations=%d faults=%s", nranks, schedules, sh->violations + bad, cs);
  return sh->violations || bad ? 1 : 0;
}
