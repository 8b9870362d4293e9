/* orders: the ranks of one communicator place or group the same registrations differently among their
 * collectives, as NCCL allows (a registration is a host-side exchange of its own; collectives are the device
 * sequence) and as pools that grow at rank-dependent moments do. N processes (fork), rank r on GPU r % ndev,
 * one communicator (two in group-two), made and warm (one application all-reduce) before the mode runs; then
 * the application's all-reduce again at the end. Every rank prints one line:
 *   RESULT rank=R mode=M reg=<result> [reg2=<result>] win=<set|null> [win2=..] [x=ok|wrong|error|hang]
 *          [devcomm=<result>] ar=<ok|wrong|error|hang>
 *
 *   orders reg-ar      even ranks enqueue the application's all-reduce X (not waited for), then register W;
 *                      odd ranks register W, then enqueue X. NCCL alone: X right, W registered on every rank
 *   orders group       rank 0 registers W1 and W2 in one ncclGroupStart/End, the others one at a time
 *   orders group-two   two communicators A and B over the same ranks: rank 0 registers on A and on B in one
 *                      group, the others on A, then on B ("reg"/"win" are A's, "reg2"/"win2" B's)
 *   orders pgroup      every rank opens the group with pncclGroupStart, NCCL's profiling name (as a tracer that
 *                      forwards to it does), registers W inside, ends it with pncclGroupEnd, then asks for a
 *                      device communicator ("devcomm": NCCL alone succeeds on 2.28.3+)
 *   orders zero        every rank registers a size-0 buffer (NCCL 2.28: success, nothing registered), then asks
 *                      for a device communicator
 *   orders reuse-pair  rank 0 registers W0 in allocation X, the others in an allocation of their own of the same
 *                      size; then every rank registers R1 and R2, both inside X, in one group. Before 2.30.7 NCCL
 *                      reuses the place of an allocation it placed (on rank 0) and places X anew elsewhere: both
 *                      must be refused on every rank alike (one by one they are); "reg"/"reg2" are R1/R2
 *   orders spec "P0|P1|..."  one small program per rank (the differential explorer, tests/t_safety.sh): each a
 *                      list of operations separated by spaces, run in order:
 *                        A<c>  enqueue the application's all-reduce on communicator c (0 or 1), not waited for
 *                        R<c>  register a new 2 MiB ncclMemAlloc window on c (NCCL_WIN_COLL_SYMMETRIC)
 *                        D<c>  deregister the oldest live window of c
 *                        [ ]   ncclGroupStart / ncclGroupEnd around the operations between them
 *                      then every all-reduce is waited for. The line lists, in order, every registration's
 *                      result and window and every all-reduce's state: "ops=R0:ncclSuccess:set,A0:ok,..."
 * Options: -n RANKS (default 2), --wait SEC (each all-reduce, default 10), --timeout SEC (whole run, 90).
 * Exit: 1 if a rank saw wrong data, 124 if a rank did not end in time, 0 otherwise. */
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
  ncclUniqueId a, b;
  volatile int wrong;
  volatile int done[8];
  char line[8][512];
};
static struct shared* sh;
static const char* mode;
static char* spec; /* spec mode: the ranks' programs, '|' between them */
static int nranks = 2, wait_s = 10, timeout_s = 90;

static const char* winword(ncclWindow_t w) { return w == NULL ? "null" : "set"; }

static void* vmm_buf(size_t n) {
  void* p = NULL;
  return ncclMemAlloc(&p, n) == ncclSuccess ? p : NULL;
}

/* the application's all-reduce X: (rank + 1) everywhere, its own buffer and stream, enqueued only */
struct xop {
  float *d, *h;
  cudaStream_t s;
  ncclResult_t r;
};
static void x_enqueue(struct xop* x, ncclComm_t c, int rank) {
  cudaMalloc((void**)&x->d, COUNT * sizeof(float));
  cudaStreamCreate(&x->s);
  x->h = malloc(COUNT * sizeof *x->h);
  for (int i = 0; i < COUNT; i++) x->h[i] = (float)(rank + 1);
  cudaMemcpy(x->d, x->h, COUNT * sizeof *x->h, cudaMemcpyHostToDevice);
  x->r = ncclAllReduce(x->d, x->d, COUNT, ncclFloat, ncclSum, c, x->s);
}
static const char* x_state(struct xop* x) {
  if (x->r != ncclSuccess) return "error";
  double until = ng_now_us() + wait_s * 1e6;
  cudaError_t q;
  while ((q = cudaStreamQuery(x->s)) == cudaErrorNotReady && ng_now_us() < until) usleep(500);
  if (q == cudaErrorNotReady) return "hang";
  if (q != cudaSuccess) return "error";
  cudaMemcpy(x->h, x->d, COUNT * sizeof *x->h, cudaMemcpyDeviceToHost);
  for (int i = 0; i < COUNT; i++)
    if (x->h[i] != (float)(nranks * (nranks + 1) / 2)) return "wrong";
  return "ok";
}

typedef ncclResult_t (*group_fn)(void);
typedef ncclResult_t (*devcomm_fn)(ncclComm_t, const void*, void*);
static const char* devcomm(ncclComm_t c) {
  devcomm_fn create = (devcomm_fn)dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
  static unsigned char reqs[256], out[4096]; /* zeroed requirements: NCCL 2.28's "none" */
  return create ? ng_rc_name(create(c, reqs, out)) : "absent";
}

/* spec mode: this rank's program (the rank-th '|'-separated part), its outcomes appended to line */
#define SPEC_MAX 16
static void run_spec(int rank, ncclComm_t a, ncclComm_t b, char* line, int* n, size_t cap) {
  char prog[256] = "";
  const char* p = spec;
  for (int r = 0; r < rank && p; r++) p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL;
  if (p) snprintf(prog, sizeof prog, "%.*s", (int)(strchr(p, '|') ? strchr(p, '|') - p : (long)strlen(p)), p);
  struct { char kind; int c; ncclResult_t r; ncclWindow_t w; struct xop x; } op[SPEC_MAX];
  ncclWindow_t live[2][SPEC_MAX];
  int nlive[2] = {0, 0}, head[2] = {0, 0}, nop = 0, depth = 0;
  for (char* t = strtok(prog, " "); t && nop < SPEC_MAX; t = strtok(NULL, " ")) {
    while (*t == '[') ncclGroupStart(), depth++, t++; /* "[R0" opens a group before its operation */
    int ends = 0;
    for (size_t l = strlen(t); l > 0 && t[l - 1] == ']'; l--) t[l - 1] = 0, ends++;
    if (!*t) goto end_groups;
    int c = t[1] == '1' ? 1 : 0;
    ncclComm_t cm = c ? b : a;
    op[nop].kind = *t, op[nop].c = c, op[nop].w = NULL;
    if (*t == 'A') {
      x_enqueue(&op[nop].x, cm, rank);
    } else if (*t == 'R') {
      void* buf = vmm_buf(2 << 20);
      op[nop].r = ncclCommWindowRegister(cm, buf, 2 << 20, &op[nop].w, NCCL_WIN_COLL_SYMMETRIC);
      if (depth > 0 && op[nop].r == ncclSuccess) op[nop].r = ncclInProgress; /* its group's end says */
      live[c][nlive[c]++] = (ncclWindow_t)&op[nop].w; /* (the window is read once it is written) */
    } else if (*t == 'D') {
      ncclWindow_t* wp = head[c] < nlive[c] ? (ncclWindow_t*)live[c][head[c]++] : NULL;
      op[nop].r = wp ? ncclCommWindowDeregister(cm, *wp) : ncclInvalidUsage;
    }
    nop++;
  end_groups:
    for (; ends > 0 && depth > 0; ends--, depth--) {
      ncclResult_t e = ncclGroupEnd();
      for (int k = 0; k < nop; k++) /* the group's registrations take its deferred result */
        if (op[k].kind == 'R' && op[k].r == ncclInProgress) op[k].r = e;
    }
  }
  while (depth-- > 0) ncclGroupEnd();
  *n += snprintf(line + *n, cap - *n, " ops=");
  for (int k = 0; k < nop; k++) {
    const char* sep = k ? "," : "";
    if (op[k].kind == 'A') *n += snprintf(line + *n, cap - *n, "%sA%d:%s", sep, op[k].c, x_state(&op[k].x));
    else if (op[k].kind == 'R')
      *n += snprintf(line + *n, cap - *n, "%sR%d:%s:%s", sep, op[k].c, ng_rc_name(op[k].r), winword(op[k].w));
    else *n += snprintf(line + *n, cap - *n, "%sD%d:%s", sep, op[k].c, ng_rc_name(op[k].r));
  }
}

static int run(int rank) {
  int ndev = 1;
  cudaGetDeviceCount(&ndev);
  cudaSetDevice(rank % (ndev > 0 ? ndev : 1));
  while (!sh->ready) usleep(1000);
  ncclComm_t a = NULL, b = NULL;
  if (ncclCommInitRank(&a, nranks, sh->a, rank) != ncclSuccess) {
    ng_say("RESULT rank=%d mode=%s init=failed", rank, mode);
    return 0;
  }
  int two = !strcmp(mode, "group-two") || (!strcmp(mode, "spec") && strpbrk(spec, "1"));
  if (two && ncclCommInitRank(&b, nranks, sh->b, rank) != ncclSuccess) {
    ng_say("RESULT rank=%d mode=%s init=failed", rank, mode);
    return 0;
  }
  float* d = NULL;
  cudaMalloc((void**)&d, COUNT * sizeof(float));
  const char* warm = ng_app_allreduce(a, d, COUNT, rank, nranks, wait_s * 1000);
  if (two) warm = strcmp(warm, "ok") ? warm : ng_app_allreduce(b, d, COUNT, rank, nranks, wait_s * 1000);
  char line[512];
  int n = snprintf(line, sizeof line, "RESULT rank=%d mode=%s warm=%s", rank, mode, warm);
  ncclWindow_t w1 = NULL, w2 = NULL;
  ncclResult_t r1 = ncclSuccess, r2 = ncclSuccess;
  int has2 = 0;
  if (!strcmp(mode, "reg-ar")) {
    void* buf = vmm_buf(2 << 20);
    struct xop x;
    if (rank % 2 == 0) x_enqueue(&x, a, rank);
    r1 = ncclCommWindowRegister(a, buf, 2 << 20, &w1, NCCL_WIN_COLL_SYMMETRIC);
    if (rank % 2 == 1) x_enqueue(&x, a, rank);
    n += snprintf(line + n, sizeof line - n, " x=%s", x_state(&x));
  } else if (!strcmp(mode, "group") || !strcmp(mode, "group-two")) {
    void *p1 = vmm_buf(2 << 20), *p2 = vmm_buf(2 << 20);
    ncclComm_t c2 = !strcmp(mode, "group-two") ? b : a;
    has2 = 1;
    if (rank == 0) {
      ncclGroupStart();
      r1 = ncclCommWindowRegister(a, p1, 2 << 20, &w1, NCCL_WIN_COLL_SYMMETRIC);
      r2 = ncclCommWindowRegister(c2, p2, 2 << 20, &w2, NCCL_WIN_COLL_SYMMETRIC);
      ncclResult_t e = ncclGroupEnd();
      if (r1 == ncclSuccess) r1 = e;
      if (r2 == ncclSuccess) r2 = e;
    } else {
      r1 = ncclCommWindowRegister(a, p1, 2 << 20, &w1, NCCL_WIN_COLL_SYMMETRIC);
      r2 = ncclCommWindowRegister(c2, p2, 2 << 20, &w2, NCCL_WIN_COLL_SYMMETRIC);
    }
  } else if (!strcmp(mode, "pgroup")) {
    group_fn start = (group_fn)dlsym(RTLD_DEFAULT, "pncclGroupStart"), end = (group_fn)dlsym(RTLD_DEFAULT, "pncclGroupEnd");
    void* buf = vmm_buf(2 << 20);
    if (!start || !end) {
      ng_say("RESULT rank=%d mode=%s pnccl=absent", rank, mode);
      return 0;
    }
    start();
    r1 = ncclCommWindowRegister(a, buf, 2 << 20, &w1, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t e = end();
    if (r1 == ncclSuccess) r1 = e;
    n += snprintf(line + n, sizeof line - n, " devcomm=%s", devcomm(a));
  } else if (!strcmp(mode, "zero")) {
    void* buf = vmm_buf(2 << 20);
    r1 = ncclCommWindowRegister(a, buf, 0, &w1, NCCL_WIN_COLL_SYMMETRIC);
    n += snprintf(line + n, sizeof line - n, " devcomm=%s", devcomm(a));
  } else if (!strcmp(mode, "reuse-pair")) {
    void *x = vmm_buf(4 << 20), *own = vmm_buf(4 << 20);
    ncclWindow_t w0 = NULL;
    ncclResult_t r0 = ncclCommWindowRegister(a, rank == 0 ? x : own, 4 << 20, &w0, NCCL_WIN_COLL_SYMMETRIC);
    n += snprintf(line + n, sizeof line - n, " reg0=%s", ng_rc_name(r0));
    has2 = 1;
    ncclGroupStart();
    r1 = ncclCommWindowRegister(a, x, 2 << 20, &w1, NCCL_WIN_COLL_SYMMETRIC);
    r2 = ncclCommWindowRegister(a, (char*)x + (2 << 20), 2 << 20, &w2, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t e = ncclGroupEnd();
    if (r1 == ncclSuccess) r1 = e;
    if (r2 == ncclSuccess) r2 = e;
  } else if (!strcmp(mode, "spec")) {
    run_spec(rank, a, b, line, &n, sizeof line);
  } else {
    ng_say("orders: unknown mode %s", mode);
    return 2;
  }
  n += snprintf(line + n, sizeof line - n, " reg=%s win=%s", ng_rc_name(r1), winword(w1));
  if (has2) n += snprintf(line + n, sizeof line - n, " reg2=%s win2=%s", ng_rc_name(r2), winword(w2));
  const char* ar = ng_app_allreduce(a, d, COUNT, rank, nranks, wait_s * 1000);
  n += snprintf(line + n, sizeof line - n, " ar=%s", ar);
  if (two) n += snprintf(line + n, sizeof line - n, " ar2=%s", ng_app_allreduce(b, d, COUNT, rank, nranks, wait_s * 1000));
  ng_say("%s", line);
  if (strstr(line, "wrong")) sh->wrong = 1;
  snprintf(sh->line[rank], sizeof sh->line[rank], "%s", line);
  __sync_synchronize();
  sh->done[rank] = 1;
  fflush(stdout);
  _exit(0); /* (no teardown: a rank whose peer hangs would wait in it) */
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--wait") && i + 1 < argc) wait_s = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout_s = atoi(argv[++i]);
    else if (!strcmp(argv[i], "spec") && i + 1 < argc) mode = argv[i], spec = argv[++i];
    else mode = argv[i];
  }
  if (!mode || nranks < 2 || nranks > 8) {
    fprintf(stderr, "usage: orders [-n RANKS] [--wait S] [--timeout S] reg-ar|group|group-two|pgroup|zero|reuse-pair|spec PROGS\n");
    return 2;
  }
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 2;
  memset((void*)sh, 0, sizeof *sh);
  pid_t pids[8];
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(run(r));
  }
  ncclGetUniqueId(&sh->a);
  ncclGetUniqueId(&sh->b);
  __sync_synchronize();
  sh->ready = 1;
  int late = 0;
  double until = ng_now_us() + timeout_s * 1e6;
  for (int r = 0; r < nranks; r++) {
    int st;
    while (waitpid(pids[r], &st, WNOHANG) == 0) {
      if (ng_now_us() > until) {
        late = 1;
        for (int k = 0; k < nranks; k++) kill(pids[k], SIGKILL);
      }
      usleep(5000);
    }
  }
  /* one verdict line (tests/gpu/run reads it): ok when every rank registered (or none did, alike), every
   * collective was right and no rank stopped early */
  int bad = -1;
  for (int r = 0; r < nranks && bad < 0; r++)
    if (!sh->done[r] || strstr(sh->line[r], "=hang") || strstr(sh->line[r], "=error") || strstr(sh->line[r], "=wrong") ||
        strstr(sh->line[r], "init=failed") || (strstr(sh->line[r], " reg=") && !strstr(sh->line[r], " reg=ncclSuccess")) ||
        (strstr(sh->line[r], " devcomm=") && !strstr(sh->line[r], " devcomm=ncclSuccess")))
      bad = r;
  for (int r = 1; r < nranks && bad < 0; r++) /* the windows alike on every rank */
    if ((strstr(sh->line[r], " win=set") != NULL) != (strstr(sh->line[0], " win=set") != NULL) ||
        (strstr(sh->line[r], " win2=set") != NULL) != (strstr(sh->line[0], " win2=set") != NULL))
      bad = r;
  if (bad < 0) ng_say("RESULT ok reg=ncclSuccess");
  else ng_say("RESULT fail rank %d: %s", bad, sh->done[bad] ? sh->line[bad] + 7 : "did not finish");
  return sh->wrong ? 1 : late ? 124 : bad >= 0 ? 3 : 0;
}
