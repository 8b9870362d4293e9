/* cpubench: what ncclguard costs where it is not wanted (issue 22's bars), measured side by side.
 *   cpubench spawn N LIB PROG [ARG...]
 *                                    start PROG 2N times (posix_spawn + waitpid, one at a time),
 *                                    alternately without and with LD_PRELOAD=LIB (the rest of the
 *                                    environment as given); prints the medians of each and the
 *                                    median of the N paired differences (with - without):
 *                                    "spawn n=N bare_us=A preload_us=B diff_us=C"
 *   cpubench group N                 N pairs ncclGroupStart(); ncclGroupEnd() with nothing in them
 *                                    (the only wrapped calls on a data path; collectives are not
 *                                    wrapped), through the global scope as PyTorch calls them;
 *                                    prints "group n=N ns_per_pair=X"
 * For group, the environment (LD_PRELOAD or not) is the caller's: tests/bench/run alternates them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char** environ;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc >= 5 && !strcmp(argv[1], "spawn")) {
    int n = atoi(argv[2]);
    if (n < 1) return 2;
    /* two environments: this one without LD_PRELOAD, and the same with LD_PRELOAD=LIB */
    int ne = 0;
    while (environ[ne]) ne++;
    char** bare = calloc((size_t)ne + 2, sizeof *bare);
    char** pre = calloc((size_t)ne + 2, sizeof *pre);
    double* t[2] = {calloc((size_t)n, sizeof(double)), calloc((size_t)n, sizeof(double))};
    double* d = calloc((size_t)n, sizeof(double));
    char* lp = malloc(strlen(argv[3]) + 12);
    if (!bare || !pre || !t[0] || !t[1] || !d || !lp) return 2;
    sprintf(lp, "LD_PRELOAD=%s", argv[3]);
    int nb = 0;
    for (int i = 0; i < ne; i++)
      if (strncmp(environ[i], "LD_PRELOAD=", 11)) bare[nb] = pre[nb] = environ[i], nb++;
    pre[nb] = lp;
    for (int i = 0; i < 2 * n; i++) {
      int k = i & 1;
      pid_t pid;
      int st;
      double t0 = now_us();
      if (posix_spawn(&pid, argv[4], NULL, NULL, argv + 4, k ? pre : bare) != 0) { perror("posix_spawn"); return 1; }
      if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) { fprintf(stderr, "child failed\n"); return 1; }
      t[k][i / 2] = now_us() - t0;
    }
    for (int i = 0; i < n; i++) d[i] = t[1][i] - t[0][i];
    qsort(t[0], (size_t)n, sizeof(double), cmp);
    qsort(t[1], (size_t)n, sizeof(double), cmp);
    qsort(d, (size_t)n, sizeof(double), cmp);
    printf("spawn n=%d bare_us=%.1f preload_us=%.1f diff_us=%.1f\n", n, t[0][n / 2], t[1][n / 2], d[n / 2]);
    return 0;
  }
  if (argc >= 3 && !strcmp(argv[1], "group")) {
    long n = atol(argv[2]);
    typedef int (*fn_t)(void);
    fn_t start = (fn_t)dlsym(RTLD_DEFAULT, "ncclGroupStart"), end = (fn_t)dlsym(RTLD_DEFAULT, "ncclGroupEnd");
    if (!start || !end || n < 1) { fprintf(stderr, "cpubench: no ncclGroupStart/End (link libnccl)\n"); return 2; }
    for (long i = 0; i < n / 10 + 1; i++) start(), end(); /* warm: first-call resolutions */
    double t0 = now_us();
    for (long i = 0; i < n; i++)
      if (start() != 0 || end() != 0) { fprintf(stderr, "cpubench: group call failed\n"); return 1; }
    printf("group n=%ld ns_per_pair=%.1f\n", n, (now_us() - t0) * 1e3 / (double)n);
    return 0;
  }
  fprintf(stderr, "usage: cpubench spawn N LIB PROG [ARG...] | cpubench group N\n");
  return 2;
}
