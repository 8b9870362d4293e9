/* libFuzzer harness: random sequences of NCCL API calls through ncclguard against the fake NCCL.
 *
 * The shim's objects are linked into this program and exported (-rdynamic), so the program's
 * calls, and the fake NCCL's own calls through its public symbols, reach the wrappers exactly as
 * with LD_PRELOAD; the shim finds the fake (linked after it) through dlsym(RTLD_NEXT).
 * Every input is a program: one opcode byte, then the bytes its operation consumes. Operations:
 * create (1 rank, several ranks of one thread, nonblocking), split, allocate/free buffers
 * (ncclMemAlloc, cudaMalloc, malloc, stale freed), register/deregister windows and buffers with
 * odd offsets and sizes, NULL/destroyed/foreign/duplicated/stale handles, group start/end (nested,
 * unbalanced), finalize, destroy, abort, revoke, device communicator. Communicators of several
 * ranks are only used whole, inside a group (one thread cannot be two ranks at once otherwise).
 * After each input everything is torn down, so inputs are independent.
 * Oracles: no crash or sanitizer report (ASan, UBSan) in the shim; every call returns; a
 * registration that succeeds with a non-NULL window returns a window NCCL made; a deregistration
 * of something ncclguard answered itself never fails for live/destroyed comms; results are valid
 * ncclResult_t values. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#define CHECK(c)                                                                  \
  do {                                                                            \
    if (!(c)) {                                                                   \
      fprintf(stderr, "fuzz_api: invariant failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                    \
    }                                                                             \
  } while (0)

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* out);

#define NCOMM 8
#define NBUF 6
#define NWIN 12
#define NDEAD 8
#define MAXSET 3

struct comm {
  ncclComm_t c;
  int set;  /* -1: alone; else index of its set (several ranks driven by this thread) */
  int spent; /* finalized or revoked: a collective with the others of its set would wait forever */
};
struct buf {
  void* p;
  size_t size;
  int kind; /* 0 ncclMemAlloc 1 cudaMalloc 2 malloc */
  int freed;
};
struct win {
  ncclWindow_t w;
  ncclComm_t comm;
  int live;
};

static struct comm comms[NCOMM];
static int ncomm;
/* Communicators made by this input (created or split), at most NCOMM: each can cost at most one
 * timed-out round (NCCLGUARD_TIMEOUT plus its 1 s grace) and one bounded abort of a communicator
 * ncclguard revoked (5 s: the fake's abort then hangs, as NCCL 2.28.9's did), so an input ends
 * within about a minute, under run.sh's -report_slow_units for this harness. */
static int nmade;
static ncclComm_t dead[NDEAD];
static int ndead;
static struct buf bufs[NBUF];
static struct win wins[NWIN];
static void* handles[NWIN];
static ncclComm_t handle_comm[NWIN];
static int depth;
static int nsets;
static int set_n[256]; /* ranks a set was created with */
static char foreign_obj[256]; /* a pointer that is neither a comm nor a window */

static const uint8_t* in;
static size_t left;
static unsigned byte(void) {
  if (!left) return 0;
  left--;
  return *in++;
}

static int valid_res(ncclResult_t r) { return (unsigned)r <= (unsigned)ncclInProgress; }

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc, (void)argv;
  /* Small timeout: a wait that cannot finish is reported quickly. Log everything, to /dev/null
   * (FUZZ_API_LOG overrides, e.g. to look at a crash's log). */
  setenv("NCCLGUARD_TIMEOUT", "0.2", 0);
  setenv("NCCLGUARD_LOG", "trace", 0);
  setenv("NCCLGUARD_LOG_FILE", getenv("FUZZ_API_LOG") ? getenv("FUZZ_API_LOG") : "/dev/null", 1);
  setenv("FAKE_NCCL_INIT_DELAY_MS", "3", 0);
  setenv("FAKE_CUDA_DEVICES", "4", 0);
  return 0;
}

static void add_dead(ncclComm_t c) {
  dead[ndead % NDEAD] = c;
  ndead++;
}

static void remove_comm(int i) {
  add_dead(comms[i].c);
  comms[i] = comms[--ncomm];
}

/* A communicator argument: live (any), NULL, destroyed, foreign. Returns its index or -1. */
static ncclComm_t pick_comm(int* idx) {
  unsigned b = byte();
  *idx = -1;
  switch (b % 8) {
    case 0: return NULL;
    case 1: return ndead ? dead[(b / 8) % (ndead < NDEAD ? ndead : NDEAD)] : NULL;
    case 2: return (ncclComm_t)(void*)foreign_obj;
    default:
      if (!ncomm) return NULL;
      *idx = (int)((b / 8) % (unsigned)ncomm);
      return comms[*idx].c;
  }
}

/* Members of the set of comms[i] (or just i). */
static int members(int i, int* out) {
  if (comms[i].set < 0) { out[0] = i; return 1; }
  int n = 0;
  for (int k = 0; k < ncomm; k++)
    if (comms[k].set == comms[i].set) out[n++] = k;
  return n;
}

/* 1 when every rank of comms[i]'s set is still alive (a collective on a partial set would wait
 * for the missing rank until NCCLGUARD_TIMEOUT) */
static int whole(int i, int n) {
  if (comms[i].set < 0) return 1;
  for (int k = 0; k < ncomm; k++)
    if (comms[k].set == comms[i].set && comms[k].spent) return 0;
  return set_n[comms[i].set] == n;
}

static int new_set(int n) {
  if (n < 2 || nsets >= 256) return -1;
  set_n[nsets] = n;
  return nsets++;
}

/* The outermost ncclGroupEnd fills the windows registered inside the group. */
static void group_end(void) {
  CHECK(valid_res(ncclGroupEnd()));
  if (depth > 0) depth--;
  if (depth == 0)
    for (int k = 0; k < NWIN; k++)
      if (wins[k].live == 2) wins[k].live = wins[k].w != NULL && wins[k].w != (ncclWindow_t)(void*)foreign_obj;
}

static void op_init(unsigned kind) {
  if (ncomm >= NCOMM || (depth > 0 && kind != 0)) return;
  int n = kind == 1 ? 2 + (int)(byte() % (MAXSET - 1)) : 1;
  if (ncomm + n > NCOMM || nmade + n > NCOMM) return;
  nmade += n;
  ncclComm_t c[MAXSET] = {0};
  int devs[MAXSET];
  for (int i = 0; i < n; i++) devs[i] = (int)(byte() % 4);
  ncclResult_t r;
  if (kind == 2) {
    ncclUniqueId id;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    if (ncclGetUniqueId(&id) != ncclSuccess) return;
    cudaSetDevice(devs[0]);
    r = ncclCommInitRankConfig(&c[0], 1, id, 0, &cfg);
  } else {
    r = ncclCommInitAll(c, n, devs);
  }
  CHECK(valid_res(r));
  if (r != ncclSuccess && r != ncclInProgress) return;
  int set = new_set(n);
  for (int i = 0; i < n; i++)
    if (c[i]) comms[ncomm++] = (struct comm){c[i], set, 0};
}

static void op_split(void) {
  int i;
  ncclComm_t c = pick_comm(&i);
  int color = (int)(byte() % 4) - 1; /* -1 = NCCL_SPLIT_NOCOLOR */
  int key = (int)(byte() % 4);
  if (i < 0) { /* NULL, destroyed, foreign: ncclguard answers */
    ncclComm_t out = NULL;
    ncclResult_t r = ncclCommSplit(c, color, key, &out, NULL);
    CHECK(r == ncclInvalidArgument || c == (ncclComm_t)(void*)foreign_obj);
    CHECK(out == NULL || c == (ncclComm_t)(void*)foreign_obj);
    return;
  }
  int m[NCOMM], n = members(i, m);
  /* inside the caller's group NCCL fills newcomm at group end: not modelled here */
  if (!whole(i, n) || ncomm + n > NCOMM || nmade + n > NCOMM || depth > 0) return;
  nmade += n;
  ncclComm_t out[NCOMM] = {0};
  if (n > 1) ncclGroupStart();
  for (int k = 0; k < n; k++) {
    int col = k == 0 ? color : (int)(byte() % 3) - 1;
    ncclResult_t r = ncclCommSplit(comms[m[k]].c, col, key, &out[k], NULL);
    CHECK(valid_res(r));
  }
  if (n > 1) CHECK(valid_res(ncclGroupEnd()));
  int nout = 0;
  for (int k = 0; k < n; k++) nout += out[k] != NULL;
  int set = new_set(nout);
  for (int k = 0; k < n && ncomm < NCOMM; k++)
    if (out[k]) comms[ncomm++] = (struct comm){out[k], nout > 1 ? set : -1, 0};
}

static void op_alloc(void) {
  unsigned s = byte() % NBUF, kind = byte() % 3, sz = byte();
  struct buf* b = &bufs[s];
  if (b->p && !b->freed) return;
  static const size_t sizes[] = {1, 4, 4096, 4097, 65536, 2u << 20, (2u << 20) + 12, 3u << 20};
  size_t size = sizes[sz % 8];
  void* p = NULL;
  if (kind == 0 && ncclMemAlloc(&p, size) != ncclSuccess) p = NULL;
  if (kind == 1 && cudaMalloc(&p, size) != cudaSuccess) p = NULL;
  if (kind == 2) p = malloc(size);
  if (!p) return;
  *b = (struct buf){p, size, (int)kind, 0};
}

static void free_buf(struct buf* b) {
  if (!b->p || b->freed) return;
  if (b->kind == 0) ncclMemFree(b->p);
  else if (b->kind == 1) cudaFree(b->p);
  else free(b->p);
  b->freed = 1; /* the pointer stays: a stale buffer */
}

static void* pick_buf(size_t* size) {
  unsigned b = byte();
  static char host_static[8192];
  if (b % 8 == 0) { *size = 0; return NULL; }
  if (b % 8 == 1) { *size = sizeof host_static; return host_static; }
  struct buf* x = &bufs[(b / 8) % NBUF];
  *size = x->size;
  return x->p; /* may be NULL (never allocated) or stale (freed) */
}

static void reg_one(ncclComm_t c, int oneshot) {
  size_t bsize;
  char* p = pick_buf(&bsize);
  unsigned o = byte(), z = byte(), w = byte(), f = byte();
  static const size_t offs[] = {0, 0, 0, 4, 1000, 4096, 8192, 1};
  size_t off = p ? offs[o % 8] : 0;
  if (off > bsize) off = 0;
  size_t size;
  switch (z % 6) {
    case 0: size = bsize - off; break;
    case 1: size = 0; break;
    case 2: size = 1; break;
    case 3: size = bsize; break; /* past the end when off > 0 */
    case 4: size = (bsize - off) / 2 + 3; break;
    default: size = (size_t)1 << 40; break;
  }
  ncclWindow_t* winp = NULL;
  int slot = (int)(w % NWIN);
  if (w % 5 != 0) {
    if (wins[slot].live) { /* keep the live window reachable: deregister it first */
      ncclCommWindowDeregister(wins[slot].comm, wins[slot].w);
      wins[slot].live = 0;
    }
    wins[slot].w = (ncclWindow_t)(void*)foreign_obj; /* must be overwritten (or NULL) on success */
    winp = &wins[slot].w;
  }
  ncclResult_t r = ncclCommWindowRegister(c, p ? p + off : NULL, size, winp, (int)(f % 4 == 3 ? f : f % 2));
  CHECK(valid_res(r));
  /* (inside a group a NULL win is found at group end, like NCCL 2.28's deferred errors) */
  if (!c || (!winp && depth == 0)) CHECK(r != ncclSuccess);
  /* NULL buffer or size 0: agreed across ranks; NCCL 2.28 answers success without registering, so
   * ncclguard degrades (success, *win = NULL); 2.29+ an error (docs/NCCL.md) */
  if (c && winp && (!p || !size) && r == ncclSuccess && depth == 0) CHECK(wins[slot].w == NULL);
  if (winp) {
    wins[slot].comm = c;
    wins[slot].live = r == ncclSuccess;
    if (oneshot && r == ncclSuccess) CHECK(wins[slot].w != (ncclWindow_t)(void*)foreign_obj);
    if (r != ncclSuccess && depth == 0) wins[slot].live = 0;
    if (depth > 0 && r == ncclSuccess) wins[slot].live = 2; /* filled at group end */
  }
}

static void op_reg(void) {
  int i;
  ncclComm_t c = pick_comm(&i);
  if (i < 0 || comms[i].set < 0) { reg_one(c, depth == 0); return; }
  /* several ranks of one thread: all of them, in a group */
  int m[NCOMM], n = members(i, m);
  if (!whole(i, n)) return;
  if (ncclGroupStart() != ncclSuccess) return;
  depth++;
  for (int k = 0; k < n; k++) reg_one(comms[m[k]].c, 0);
  group_end();
}

static void op_dereg(void) {
  unsigned b = byte();
  int slot = (int)((b / 4) % NWIN);
  ncclResult_t r;
  switch (b % 4) {
    case 0: { /* NULL window on some comm */
      int i;
      ncclComm_t c = pick_comm(&i);
      r = ncclCommWindowDeregister(c, NULL);
      if (i >= 0 || (c && c != (ncclComm_t)(void*)foreign_obj)) CHECK(r == ncclSuccess);
      if (!c) CHECK(r == ncclInvalidArgument);
      break;
    }
    case 1: /* the window's own comm (live, stale or a duplicate deregistration) */
      if (!wins[slot].comm) return;
      r = ncclCommWindowDeregister(wins[slot].comm, wins[slot].w);
      if (depth == 0 && wins[slot].live) wins[slot].live = 0;
      break;
    case 2: { /* another comm: NCCL decides, ncclguard must not crash */
      int i;
      ncclComm_t c = pick_comm(&i);
      if (c == (ncclComm_t)(void*)foreign_obj) return;
      r = ncclCommWindowDeregister(c, wins[slot].w);
      break;
    }
    default: /* a foreign window pointer on a live comm */
      if (!ncomm) return;
      r = ncclCommWindowDeregister(comms[slot % ncomm].c, (ncclWindow_t)(void*)foreign_obj);
      break;
  }
  CHECK(valid_res(r));
}

static void op_bufreg(void) {
  int i;
  ncclComm_t c = pick_comm(&i);
  unsigned s = byte() % NWIN, what = byte();
  if (what % 2 == 0) {
    size_t bsize;
    void* p = pick_buf(&bsize);
    void** hp = what % 4 == 2 ? NULL : &handles[s];
    ncclResult_t r = ncclCommRegister(c, p, bsize, hp);
    CHECK(valid_res(r));
    if (r == ncclSuccess && hp) handle_comm[s] = c;
  } else {
    ncclComm_t dc = what % 4 == 1 ? handle_comm[s] : c;
    if (dc == (ncclComm_t)(void*)foreign_obj) return;
    ncclResult_t r = ncclCommDeregister(dc, handles[s]);
    CHECK(valid_res(r));
  }
}

static void op_end(unsigned which) {
  int i;
  ncclComm_t c = pick_comm(&i);
  if (c == (ncclComm_t)(void*)foreign_obj && which != 0) return; /* NCCL would touch it: not ours */
  /* A rank of a set whose agreement timed out still has the agreement all-reduce queued; a blocking
   * ncclCommFinalize flushes it and waits forever, in NCCL as in the fake (tests/fuzz/open/). */
  if (which == 2 && i >= 0 && comms[i].set >= 0) return;
  ncclResult_t r;
  switch (which) {
    case 0: r = ncclCommDestroy(c); break;
    case 1: r = ncclCommAbort(c); break;
    case 2: r = ncclCommFinalize(c); break;
    default: r = ncclCommRevoke(c, 0); break;
  }
  CHECK(valid_res(r));
  if (i < 0 && c && c != (ncclComm_t)(void*)foreign_obj && which < 2) CHECK(r == ncclInvalidArgument); /* twice */
  if (i >= 0 && which >= 2 && (r == ncclSuccess || r == ncclInProgress)) comms[i].spent = 1;
  if (i >= 0 && which < 2 && (r == ncclSuccess || r == ncclInProgress)) {
    for (int k = 0; k < NWIN; k++) if (wins[k].comm == c) wins[k].live = 0;
    remove_comm(i);
  }
}

static void op_devcomm(void) {
  int i;
  ncclComm_t c = pick_comm(&i);
  if (i < 0 && c) return;
  static char reqs[256], out[4096];
  memset(reqs, 0, sizeof reqs);
  CHECK(valid_res(ncclDevCommCreate(c, reqs, out)));
}

static void teardown(void) {
  while (depth > 0) group_end();
  for (int k = 0; k < NWIN; k++) {
    if (wins[k].live) ncclCommWindowDeregister(wins[k].comm, wins[k].w);
    wins[k] = (struct win){0};
    handles[k] = NULL, handle_comm[k] = NULL;
  }
  /* Sets are aborted (a rank of a set may be mid-way), single comms destroyed */
  while (ncomm) {
    ncclResult_t r = comms[0].set >= 0 ? ncclCommAbort(comms[0].c) : ncclCommDestroy(comms[0].c);
    CHECK(valid_res(r));
    remove_comm(0);
  }
  for (int k = 0; k < NBUF; k++) {
    free_buf(&bufs[k]);
    bufs[k] = (struct buf){0};
  }
  ndead = 0;
  nsets = 0;
  nmade = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 512) return 0;
  in = data;
  left = size;
  int ops = 0;
  while (left && ops++ < 64) {
    unsigned op = byte() % 16;
    switch (op) {
      case 0: op_init(0); break;
      case 1: op_init(1); break;
      case 2: op_init(2); break;
      case 3: op_split(); break;
      case 4: op_alloc(); break;
      case 5: free_buf(&bufs[byte() % NBUF]); break;
      case 6: case 7: op_reg(); break;
      case 8: op_dereg(); break;
      case 9:
        if (depth < 4 && ncclGroupStart() == ncclSuccess) depth++;
        break;
      case 10:
        if (byte() % 8 == 0 || depth > 0) group_end(); /* sometimes unbalanced */
        break;
      case 11: op_end(0); break;
      case 12: op_end(byte() % 4); break;
      case 13: op_bufreg(); break;
      case 14: op_devcomm(); break;
      default: op_dereg(); break;
    }
  }
  teardown();
  return 0;
}
