/* twocomm: two communicators that share a rank, as tensor- and data-parallel groups do. Three processes
 * (fork), P0, P1 and P2, each on GPU p % ndev: communicator A = {P0 (rank 0), P1 (rank 1)}, communicator
 * B = {P0 (rank 0), P2 (rank 1)}. Each communicator is warm (one application all-reduce) before the
 * registrations; P0 registers on both in ONE group, P1 on A alone, P2 on B alone. Then each process runs the
 * application's all-reduce on each communicator it is in, and prints what it saw:
 *   RESULT proc=P comm=A|B reg=<result> win=<null|set|untouched> ar=<ok|wrong|error|hang|skipped> [...]
 * ("skipped": that rank's registration returned an error and the communicator was aborted, as the WARN
 * says, instead of used; an aborted peer makes the other rank's all-reduce an error or "hang").
 *
 *   twocomm go        P0's buffer on A is cudaMalloc memory (refused on NCCL's symmetric path: A degrades on
 *                     both of its ranks), its buffer on B and every other one ncclMemAlloc (registered): P0's
 *                     batch registers on B, P1's on A does not. A round on A run by P0 alone (the "go" round
 *                     of NCCL without revoke, decided for the whole batch) would pair with P1's next
 *                     all-reduce on A: wrong data on P1, P0's own all-reduce without a partner
 *   twocomm rollback  NCCLGUARD_ON_FAILURE=error (set by the test): P0's buffer on B is cudaMalloc memory (B
 *                     refused with an error on P0 and P2), A registers everywhere; the group's ncclGroupEnd
 *                     returns B's error on P0. Then P0 and P1 register a second window on A and all-reduce
 *                     IN it ("reg2=", "ar2="): a rank that rolled A's first window back while its peer kept
 *                     it places the second one elsewhere in the symmetric space (the fake's offset check:
 *                     garbage). P0 deregisters A's first window before the end if it kept it.
 *   twocomm late      P2 reaches its registration on B TWOCOMM_LATE_MS (default 4000) late, past
 *                     NCCLGUARD_TIMEOUT (set by the test): B's round fails on P0 and P2; A's round, in the
 *                     same NCCL group on P0, completed: A must go on on both of its ranks (registered, its
 *                     all-reduce correct)
 *   twocomm devcomm   NCCLGUARD_NULL_WINDOW=error (set by the test): P0 and P1 register on A in one group a
 *                     cudaMalloc buffer (degraded on NCCL's symmetric path) and a VMM buffer with a NULL `win`
 *                     pointer (an error on every rank), so the group fails; the application deregisters what
 *                     it was handed and asks for a device communicator ("devcomm=": NCCL's answer, no NULL
 *                     window being left); then one window alone ("reg2=") and a device communicator again
 *                     ("devcomm2="); with the fake's FAKE_NCCL_NO_SYMMETRIC=1 on 2.29+ NCCL answers the
 *                     registrations with NULL windows, errors here
 *   twocomm appgroup  P0 and P1 run the group {application all-reduce on A; registration on A}; P0's all-reduce
 *                     has an invalid operation, so NCCL drops P0's group only and P1's all-reduce waits for a
 *                     partner. Then both run the application's all-reduce on A again, whatever they got (an
 *                     application that goes on after a group error): never success with wrong data
 *   twocomm appcoll   the same group without the registration ({application all-reduce on A}, invalid on P0),
 *                     then both register on A after it, then the application's all-reduce on A
 *   twocomm appmixed  P0 and P1 also share a third communicator C. The group {application all-reduce X on C,
 *                     invalid on P0; registration on A} fails on P0 only; then both register on C. A round on C
 *                     would pair with P1's X (wrong data): "regC=", "x=" (P1's X), then the application's
 *                     all-reduce on C ("arC=")
 *   twocomm apptwice  the group {X on C} alone fails on P0; both register on A, then on C: the registration
 *                     on A must not use up what keeps C's round from pairing with X
 *   twocomm strayend  P0 and P1 call ncclGroupEnd with no group open (NCCL refuses it, nothing is dropped),
 *                     then register on A and run the application's all-reduce on A: registered as without it
 * P2 takes no part in A; in the appgroup, appmixed, apptwice, strayend and devcomm modes B is created and left
 * alone.
 * Options: --wait SEC (each application all-reduce, default 6), --timeout SEC (the whole run, default 60).
 * Exit: 1 if a process saw wrong data, 124 if a process did not end in time, 0 otherwise. */
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
#define NPROC 3
struct shared {
  volatile int ready;
  ncclUniqueId a, b, c;
};
static struct shared* sh;
static const char* mode;
static int wait_s = 6, timeout_s = 60;
static const ncclWindow_t sentinel = (ncclWindow_t)(uintptr_t)0x5a5a5a5a; /* a caller's uninitialised variable */

static const char* winword(ncclWindow_t w) { return w == NULL ? "null" : w == sentinel ? "untouched" : "set"; }

static ncclComm_t join(const ncclUniqueId* id, int rank) {
  ncclComm_t c = NULL;
  return ncclCommInitRank(&c, 2, *id, rank) == ncclSuccess ? c : NULL;
}

static void* vmm_buf(void) {
  void* p = NULL;
  return ncclMemAlloc(&p, 2 << 20) == ncclSuccess ? p : NULL;
}

static void* cuda_buf(void) {
  void* p = NULL;
  return cudaMalloc(&p, 2 << 20) == cudaSuccess ? p : NULL;
}

/* The application's all-reduce X of the failed-group modes: its own buffer (rank + 1 everywhere) and stream */
struct xop {
  float *d, *h;
  cudaStream_t s;
};
static void x_make(struct xop* x, int rank) {
  cudaMalloc((void**)&x->d, COUNT * sizeof(float));
  cudaStreamCreate(&x->s);
  x->h = malloc(COUNT * sizeof *x->h);
  for (int i = 0; i < COUNT; i++) x->h[i] = (float)(rank + 1);
  cudaMemcpy(x->d, x->h, COUNT * sizeof *x->h, cudaMemcpyHostToDevice);
}
/* What became of X on P1 (P0 dropped its own): "ok" (3 everywhere), "unchanged" (stopped by a revoke before it
 * reduced: its communicator stopped, as the application's next all-reduce says), "pending" (never completed,
 * the hang of NCCL alone), "dropped" (P0), or "wrong" (it completed with other data: paired with a collective
 * that was not the peer's X) */
static const char* x_state(const struct xop* x, int p, int rank) {
  if (p != 1) return "dropped";
  double until = ng_now_us() + wait_s * 1e6;
  cudaError_t q;
  while ((q = cudaStreamQuery(x->s)) == cudaErrorNotReady && ng_now_us() < until) usleep(500);
  if (q != cudaSuccess) return q == cudaErrorNotReady ? "pending" : "ok";
  cudaMemcpy(x->h, x->d, COUNT * sizeof *x->h, cudaMemcpyDeviceToHost);
  int same = 1, right = 1;
  for (int i = 0; i < COUNT; i++) same &= x->h[i] == (float)(rank + 1), right &= x->h[i] == 3.0f;
  return right ? "ok" : same ? "unchanged" : "wrong";
}

/* The application's all-reduce on c, unless the registration failed in a mode where the application then
 * aborts the communicator (the WARN's advice) */
static const char* after(ncclComm_t c, ncclResult_t reg, float* d, int rank, int abort_on_error) {
  if (reg != ncclSuccess && abort_on_error) {
    ncclCommAbort(c);
    return "skipped";
  }
  return ng_app_allreduce(c, d, COUNT, rank, 2, wait_s * 1000);
}

/* ncclDevCommCreate then ncclDevCommDestroy on c ("missing" where the loaded NCCL lacks them). The requirements
 * are zero, NCCL 2.28's "no extra resources" (the layout is C++-only: tests/progs/scenario.c says more); on 2.29+
 * they begin as NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER's do (size, magic, version: a caller built against that
 * NCCL), which NCCL 2.29+ require (a 2.28 struct there is refused: tests/fake/nccl_reg.c). */
static const char* devcomm(ncclComm_t c) {
  typedef ncclResult_t (*create_t)(ncclComm_t, const void*, void*);
  typedef ncclResult_t (*destroy_t)(ncclComm_t, const void*);
  create_t create = (create_t)dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
  destroy_t destroy = (destroy_t)dlsym(RTLD_DEFAULT, "ncclDevCommDestroy");
  static unsigned char reqs[256], dev[1024];
  if (!create || !destroy) return "missing";
  memset(reqs, 0, sizeof reqs);
  memset(dev, 0, sizeof dev);
  int v = 0;
  ncclGetVersion(&v);
  if (v >= 22900) {
    size_t size = sizeof reqs;
    unsigned magic = 0xcafebeefu, version = (unsigned)v; /* NCCL_API_MAGIC, NCCL_VERSION_CODE */
    memcpy(reqs, &size, sizeof size);
    memcpy(reqs + sizeof size, &magic, sizeof magic);
    memcpy(reqs + sizeof size + sizeof magic, &version, sizeof version);
  }
  ncclResult_t r = create(c, reqs, dev);
  if (r == ncclSuccess) destroy(c, dev);
  return ng_rc_name(r);
}

static int run(int p) {
  int ndev = 1;
  cudaGetDeviceCount(&ndev);
  cudaSetDevice(p % (ndev > 0 ? ndev : 1));
  if (p == 0) {
    ncclGetUniqueId(&sh->a);
    ncclGetUniqueId(&sh->b);
    ncclGetUniqueId(&sh->c);
    __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
  } else {
    while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) usleep(200);
  }
  /* P0 joins A, then B; P1 joins A; P2 joins B (the fake's init waits for both ranks of each) */
  ncclComm_t a = p == 0 || p == 1 ? join(&sh->a, p == 0 ? 0 : 1) : NULL;
  ncclComm_t b = p == 0 || p == 2 ? join(&sh->b, p == 0 ? 0 : 1) : NULL;
  if ((p != 2 && !a) || (p != 1 && !b)) {
    ng_say("RESULT proc=%d init=failed", p);
    return 0;
  }
  float* d = NULL;
  cudaMalloc((void**)&d, COUNT * sizeof(float));
  int ra = p == 0 ? 0 : 1, rb = p == 0 ? 0 : 1; /* this process's rank in A, in B */
  const char* warm_a = a ? ng_app_allreduce(a, d, COUNT, ra, 2, wait_s * 1000) : "-";
  const char* warm_b = b ? ng_app_allreduce(b, d, COUNT, rb, 2, wait_s * 1000) : "-";
  int bad = 0;
  ncclWindow_t wa = sentinel, wb = sentinel;
  ncclResult_t reg_a = ncclSuccess, reg_b = ncclSuccess, e;

  if (!strcmp(mode, "strayend")) {
    if (p == 2) {
      ng_say("RESULT proc=2 comm=B idle");
      return 0;
    }
    void* buf = vmm_buf();
    e = ncclGroupEnd(); /* no group open */
    reg_a = ncclCommWindowRegister(a, buf, 2 << 20, &wa, NCCL_WIN_COLL_SYMMETRIC);
    const char* ar = after(a, reg_a, d, ra, 1);
    bad |= !strcmp(ar, "wrong");
    ng_say("RESULT proc=%d comm=A warm=%s stray=%s reg=%s win=%s ar=%s", p, warm_a, ng_rc_name(e), ng_rc_name(reg_a),
           winword(wa), ar);
    if (wa && wa != sentinel) ncclCommWindowDeregister(a, wa);
    return bad;
  }

  if (!strcmp(mode, "appmixed") || !strcmp(mode, "apptwice")) {
    if (p == 2) {
      ng_say("RESULT proc=2 comm=B idle");
      return 0;
    }
    ncclComm_t c = join(&sh->c, ra);
    if (!c) {
      ng_say("RESULT proc=%d init=failed", p);
      return 0;
    }
    const char* warm_c = ng_app_allreduce(c, d, COUNT, ra, 2, wait_s * 1000);
    void* bufa = vmm_buf();
    void* bufc = vmm_buf();
    int mixed = !strcmp(mode, "appmixed");
    struct xop X;
    x_make(&X, ra);
    ncclWindow_t wc = sentinel;
    ncclGroupStart();
    ncclAllReduce(X.d, X.d, COUNT, ncclFloat, p == 0 ? (ncclRedOp_t)99 : ncclSum, c, X.s); /* X, invalid on P0 */
    if (mixed) reg_a = ncclCommWindowRegister(a, bufa, 2 << 20, &wa, NCCL_WIN_COLL_SYMMETRIC);
    e = ncclGroupEnd();
    if (!mixed) reg_a = ncclCommWindowRegister(a, bufa, 2 << 20, &wa, NCCL_WIN_COLL_SYMMETRIC);
    else if (reg_a == ncclSuccess) reg_a = e;
    ncclResult_t reg_c = ncclCommWindowRegister(c, bufc, 2 << 20, &wc, NCCL_WIN_COLL_SYMMETRIC);
    const char* x = x_state(&X, p, ra);
    bad |= !strcmp(x, "wrong");
    const char* arc = after(c, wc && wc != sentinel ? ncclSuccess : reg_c, d, ra, 1);
    bad |= !strcmp(arc, "wrong");
    ng_say("RESULT proc=%d warm=%s/%s group=%s regA=%s regC=%s winC=%s x=%s arC=%s", p, warm_a, warm_c,
           ng_rc_name(e), ng_rc_name(reg_a), ng_rc_name(reg_c), winword(wc), x, arc);
    return bad;
  }

  if (!strcmp(mode, "appgroup") || !strcmp(mode, "appcoll")) {
    if (p == 2) {
      ng_say("RESULT proc=2 comm=B idle");
      return 0;
    }
    void* buf = vmm_buf();
    int coll = !strcmp(mode, "appcoll");
    struct xop X; /* the group's own all-reduce, looked at after the rest */
    x_make(&X, ra);
    ncclGroupStart();
    ncclAllReduce(X.d, X.d, COUNT, ncclFloat, p == 0 ? (ncclRedOp_t)99 : ncclSum, a, X.s); /* invalid on P0 */
    if (!coll) reg_a = ncclCommWindowRegister(a, buf, 2 << 20, &wa, NCCL_WIN_COLL_SYMMETRIC);
    e = ncclGroupEnd();
    if (coll) reg_a = ncclCommWindowRegister(a, buf, 2 << 20, &wa, NCCL_WIN_COLL_SYMMETRIC); /* after the group */
    else if (reg_a == ncclSuccess) reg_a = e;
    const char* ar = ng_app_allreduce(a, d, COUNT, ra, 2, wait_s * 1000);
    bad |= !strcmp(ar, "wrong");
    const char* x = x_state(&X, p, ra);
    bad |= !strcmp(x, "wrong");
    ng_say("RESULT proc=%d comm=A warm=%s group=%s reg=%s win=%s ar=%s x=%s", p, warm_a, ng_rc_name(e),
           ng_rc_name(reg_a), winword(wa), ar, x);
    return bad;
  }

  if (!strcmp(mode, "devcomm")) {
    if (p == 2) {
      ng_say("RESULT proc=2 comm=B idle");
      return 0;
    }
    void* cbuf = cuda_buf();
    void* good = vmm_buf();
    ncclWindow_t w1 = sentinel;
    ncclGroupStart();
    reg_a = ncclCommWindowRegister(a, cbuf, 2 << 20, &wa, NCCL_WIN_COLL_SYMMETRIC);
    ncclResult_t r1 = ncclCommWindowRegister(a, good, 2 << 20, NULL, NCCL_WIN_COLL_SYMMETRIC); /* no win pointer */
    e = ncclGroupEnd();
    if (reg_a == ncclSuccess) reg_a = e;
    if (r1 == ncclSuccess) r1 = e;
    /* the application's cleanup after a failed group: only the windows it was handed */
    if (wa && wa != sentinel) ncclCommWindowDeregister(a, wa);
    if (w1 && w1 != sentinel) ncclCommWindowDeregister(a, w1);
    const char* dc1 = devcomm(a);
    /* then one window alone: NCCL's own answer (a NULL window without symmetric support is an error here) */
    void* second = vmm_buf();
    ncclWindow_t w2 = sentinel;
    ncclResult_t r2 = ncclCommWindowRegister(a, second, 2 << 20, &w2, NCCL_WIN_COLL_SYMMETRIC);
    if (w2 && w2 != sentinel) ncclCommWindowDeregister(a, w2);
    const char* dc2 = devcomm(a);
    const char* ar = ng_app_allreduce(a, d, COUNT, ra, 2, wait_s * 1000);
    bad |= !strcmp(ar, "wrong");
    ng_say("RESULT proc=%d comm=A group=%s reg=%s win=%s devcomm=%s reg2=%s win2=%s devcomm2=%s ar=%s", p,
           ng_rc_name(e), ng_rc_name(reg_a), winword(wa), dc1, ng_rc_name(r2), winword(w2), dc2, ar);
    return bad;
  }

  int go = !strcmp(mode, "go"), rollback = !strcmp(mode, "rollback"), late = !strcmp(mode, "late");
  if (!go && !rollback && !late) {
    ng_say("RESULT proc=%d unknown mode %s", p, mode);
    return 2;
  }
  if (p == 0) {
    void* ba = go ? cuda_buf() : vmm_buf();
    void* bb = rollback ? cuda_buf() : vmm_buf();
    ncclGroupStart();
    reg_a = ncclCommWindowRegister(a, ba, 2 << 20, &wa, NCCL_WIN_COLL_SYMMETRIC);
    reg_b = ncclCommWindowRegister(b, bb, 2 << 20, &wb, NCCL_WIN_COLL_SYMMETRIC);
    e = ncclGroupEnd();
    if (reg_a == ncclSuccess) reg_a = e;
    if (reg_b == ncclSuccess) reg_b = e;
  } else if (p == 1) {
    reg_a = ncclCommWindowRegister(a, vmm_buf(), 2 << 20, &wa, NCCL_WIN_COLL_SYMMETRIC);
  } else {
    if (late) {
      const char* ms = getenv("TWOCOMM_LATE_MS");
      usleep((useconds_t)(ms ? atoi(ms) : 4000) * 1000);
    }
    reg_b = ncclCommWindowRegister(b, vmm_buf(), 2 << 20, &wb, NCCL_WIN_COLL_SYMMETRIC);
  }
  if (a) {
    char more[200] = "";
    const char* ar;
    if (rollback) {
      /* a second window on A, and the application's all-reduce in it (the offsets of the symmetric space) */
      void* second = vmm_buf();
      ncclWindow_t w2 = sentinel;
      ncclResult_t r2 = ncclCommWindowRegister(a, second, 2 << 20, &w2, NCCL_WIN_COLL_SYMMETRIC);
      const char* ar2 = r2 == ncclSuccess ? ng_app_allreduce(a, (float*)second, COUNT, ra, 2, wait_s * 1000) : "skipped";
      bad |= !strcmp(ar2, "wrong");
      snprintf(more, sizeof more, " reg2=%s win2=%s ar2=%s", ng_rc_name(r2), winword(w2), ar2);
      if (r2 == ncclSuccess && w2) ncclCommWindowDeregister(a, w2);
      ar = ng_app_allreduce(a, d, COUNT, ra, 2, wait_s * 1000);
    } else {
      /* after a failed group a window handed out says its communicator went on (NULL: it did not, or degraded) */
      ar = after(a, wa && wa != sentinel ? ncclSuccess : reg_a, d, ra, 1);
    }
    if (wa && wa != sentinel) ncclCommWindowDeregister(a, wa); /* the application owns every window it was handed */
    bad |= !strcmp(ar, "wrong");
    ng_say("RESULT proc=%d comm=A warm=%s reg=%s win=%s ar=%s%s", p, warm_a, ng_rc_name(reg_a), winword(wa), ar, more);
  }
  if (b) {
    const char* ar = after(b, wb && wb != sentinel ? ncclSuccess : reg_b, d, rb, 1);
    bad |= !strcmp(ar, "wrong");
    ng_say("RESULT proc=%d comm=B warm=%s reg=%s win=%s ar=%s", p, warm_b, ng_rc_name(reg_b), winword(wb), ar);
  }
  return bad;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: twocomm go|rollback|late|devcomm|appgroup|appcoll|appmixed|apptwice|strayend [--wait SEC] [--timeout SEC]\n");
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
  pid_t pid[NPROC];
  for (int p = 0; p < NPROC; p++) {
    pid[p] = fork();
    if (pid[p] == 0) {
      int rc = run(p);
      fflush(stdout);
      _exit(rc); /* a process whose peer may hang leaves without tearing down */
    }
  }
  int bad = 0, left = NPROC, done[NPROC] = {0};
  double until = ng_now_us() + timeout_s * 1e6;
  while (left && ng_now_us() < until) {
    for (int p = 0; p < NPROC; p++) {
      int st;
      if (!done[p] && waitpid(pid[p], &st, WNOHANG) == pid[p]) {
        done[p] = 1, left--;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 1;
      }
    }
    usleep(10000);
  }
  for (int p = 0; p < NPROC; p++)
    if (!done[p]) {
      ng_say("RESULT proc=%d did not end within %d s", p, timeout_s);
      kill(pid[p], SIGKILL), waitpid(pid[p], NULL, 0);
    }
  return left ? 124 : bad;
}
