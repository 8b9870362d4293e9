/* stress_threads: one thread per rank-of-its-own, for ThreadSanitizer and leak checks.
 * usage: stress_threads [-t THREADS] [-c REG_CYCLES] [-k COMM_CYCLES] [-f] [-0]
 * Each of THREADS threads (default 8) creates its own 1-rank communicator (ncclCommInitAll,
 * ndev=1), then REG_CYCLES times registers and deregisters a window (every 4th inside a group,
 * every 8th twice), then COMM_CYCLES times creates, splits, registers on and destroys a fresh
 * communicator; all threads run at once, so the registry, the logger (first line, file open) and
 * the agreement resources are used concurrently. -f: after the threads are done and while the
 * process still holds communicators and windows, fork a child that does not use NCCL and exits
 * (prints its pid: it must leave no trace in the log). -0: no warm-up communicator in the main
 * thread first, so the threads race through the library's first-use paths (config, log open).
 * -g: only register inside a group, destroy the communicator in that group, end the group.
 * Prints "stress: threads=N rss_start=KB rss_end=KB fds_start=N fds_end=N tasks_start=N
 * tasks_end=N failures=N" and exits 1 on any failed call. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

static int nthreads = 8, reg_cycles = 200, comm_cycles = 20, do_fork, cold, group_destroy;
static int failures;
static pthread_barrier_t bar;

static long status_field(const char* key) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, n)) v = atol(line + n);
  if (f) fclose(f);
  return v;
}

static int fd_count(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  struct dirent* e;
  while (d && (e = readdir(d))) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n - 1; /* the directory's own descriptor */
}

#define OK(x)                                                                                   \
  do {                                                                                          \
    ncclResult_t r_ = (x);                                                                      \
    if (r_ != ncclSuccess) {                                                                    \
      fprintf(stderr, "stress: %s -> %d (line %d)\n", #x, (int)r_, __LINE__);                  \
      __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                                       \
    }                                                                                           \
  } while (0)

static ncclComm_t keep[64];
static void* keepbuf[64];
static ncclWindow_t keepwin[64];

static void* worker(void* arg) {
  int t = (int)(long)arg, ndev = 1;
  cudaGetDeviceCount(&ndev);
  int dev = t % (ndev > 0 ? ndev : 1);
  cudaSetDevice(dev);
  size_t size = 1u << 20;
  void* buf = NULL;
  OK(ncclMemAlloc(&buf, size));
  ncclComm_t c = NULL;
  OK(ncclCommInitAll(&c, 1, &dev));
  pthread_barrier_wait(&bar);
  for (int i = 0; i < reg_cycles; i++) {
    ncclWindow_t w = NULL, w2 = NULL;
    int grp = i % 4 == 3, twice = i % 8 == 7;
    if (grp) OK(ncclGroupStart());
    OK(ncclCommWindowRegister(c, buf, size, &w, NCCL_WIN_COLL_SYMMETRIC));
    if (twice) OK(ncclCommWindowRegister(c, buf, size, &w2, NCCL_WIN_COLL_SYMMETRIC));
    if (grp) OK(ncclGroupEnd());
    OK(ncclCommWindowDeregister(c, w));
    if (twice) OK(ncclCommWindowDeregister(c, w2));
  }
  for (int k = 0; k < comm_cycles; k++) {
    ncclComm_t d = NULL, s = NULL;
    ncclWindow_t w = NULL;
    OK(ncclCommInitAll(&d, 1, &dev));
    OK(ncclCommSplit(d, 0, 0, &s, NULL));
    OK(ncclCommWindowRegister(s ? s : d, buf, size, &w, NCCL_WIN_COLL_SYMMETRIC));
    OK(ncclCommWindowDeregister(s ? s : d, w));
    if (s) OK(ncclCommDestroy(s));
    OK(ncclCommDestroy(d));
  }
  /* keep one window and the communicator for the fork */
  keep[t] = c, keepbuf[t] = buf;
  OK(ncclCommWindowRegister(c, buf, size, &keepwin[t], NCCL_WIN_COLL_SYMMETRIC));
  return NULL;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-t") && i + 1 < argc) nthreads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-c") && i + 1 < argc) reg_cycles = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-k") && i + 1 < argc) comm_cycles = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-f")) do_fork = 1;
    else if (!strcmp(argv[i], "-0")) cold = 1;
    else if (!strcmp(argv[i], "-g")) group_destroy = 1;
    else { fprintf(stderr, "usage: stress_threads [-t THREADS] [-c REG_CYCLES] [-k COMM_CYCLES] [-f] [-0]\n"); return 2; }
  }
  if (nthreads < 1 || nthreads > 64) nthreads = 8;
  if (group_destroy) { /* -g: register inside a group, destroy the comm in the same group, end it */
    int dev = 0;
    void* buf = NULL;
    ncclComm_t c = NULL;
    ncclWindow_t w = NULL;
    OK(ncclMemAlloc(&buf, 1u << 20));
    OK(ncclCommInitAll(&c, 1, &dev));
    OK(ncclGroupStart());
    OK(ncclCommWindowRegister(c, buf, 1u << 20, &w, NCCL_WIN_COLL_SYMMETRIC));
    printf("stress: destroying %p inside the group\n", (void*)c);
    fflush(stdout);
    ncclResult_t d = ncclCommDestroy(c), e = ncclGroupEnd();
    printf("stress: destroy=%d groupend=%d\n", (int)d, (int)e);
    return 0;
  }
  /* warm-up: the CUDA runtime and one communicator, so the start figures include them */
  int dev = 0, ndev = 0;
  cudaGetDeviceCount(&ndev); /* once before the threads: the fake's lazy device count is not thread-safe */
  ncclComm_t c0 = NULL;
  if (!cold) { /* -0: none, so that the threads meet the library's first-use paths together */
    OK(ncclCommInitAll(&c0, 1, &dev));
    OK(ncclCommDestroy(c0));
  }
  long rss0 = status_field("VmRSS:"), tasks0 = status_field("Threads:");
  int fd0 = fd_count();
  pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
  pthread_t th[64];
  for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void*)(long)t);
  for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
  if (do_fork) {
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) { printf("stress: idle child pid=%d\n", (int)getpid()); fflush(stdout); _exit(0); }
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) failures++;
    /* a child that exits through exit(), running the library's destructors */
    fflush(stdout);
    p = fork();
    if (p == 0) { printf("stress: idle child pid=%d\n", (int)getpid()); exit(0); }
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) failures++;
  }
  for (int t = 0; t < nthreads; t++) {
    OK(ncclCommWindowDeregister(keep[t], keepwin[t]));
    OK(ncclCommDestroy(keep[t]));
    OK(ncclMemFree(keepbuf[t]));
  }
  printf("stress: threads=%d reg_cycles=%d comm_cycles=%d rss_start=%ld rss_end=%ld fds_start=%d fds_end=%d "
         "tasks_start=%ld tasks_end=%ld failures=%d\n",
         nthreads, reg_cycles, comm_cycles, rss0, status_field("VmRSS:"), fd0, fd_count(), tasks0,
         status_field("Threads:"), failures);
  return failures ? 1 : 0;
}
