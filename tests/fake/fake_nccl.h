/* Internal interface of the fake NCCL (libnccl.so.2). See README.md for what is modelled and
 * which section of docs/NCCL.md or docs/PYTORCH.md each behaviour comes from. */
#ifndef FAKE_NCCL_H
#define FAKE_NCCL_H
#include <cuda.h>
#include <nccl.h>
/* an nccl.h older than 2.28.7 (a GPU host's system NCCL 2.28.3, say) lacks the revoke flag */
#ifndef NCCL_REVOKE_DEFAULT
#define NCCL_REVOKE_DEFAULT 0
#endif
#include <pthread.h>
#include <stdint.h>
#include <uthash.h>

/* Not in 2.28.9's nccl.h: declared here with the real signatures (ncclCommGrow 2.29.2+,
 * nccl.h; ncclDevCommCreate/Destroy 2.28.3+, nccl_device/core.h, with opaque types here). */
typedef struct fake_devcomm_reqs ncclDevCommRequirements_t;
typedef struct fake_devcomm ncclDevComm_t;
#ifndef FAKE_LEGACY
ncclResult_t  ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                           ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                           ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t  ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs, ncclDevComm_t *outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs, ncclDevComm_t *outDevComm);
ncclResult_t  ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm);
#endif

#define FN_MAXRANKS 64
#define FN_XSLOTS 16              /* exchanges that may be outstanding on one communicator */
#define FN_XREC 192               /* bytes each rank contributes to one exchange */
#define FN_COLL_CAP (256 * 1024)  /* staging bytes per rank for collectives (chunked) */
#define FN_MB_CAP (64 * 1024)     /* bytes per (src,dst) mailbox for send/recv */
#define FN_IDMAGIC "FAKENCCL"

/* API entry/exit: alias, trace, "called from inside NCCL" depth */
#define FN_ALIAS(name) extern __typeof__(p##name) name __attribute__((weak, alias("p" #name)))
extern __thread int fn_depth;
int fn_version(void);
int fn_env_int(const char *name, int dflt);
/* An NCCL_* parameter as NCCL reads it: strtoll base 0, once per process, default if unparsable. */
long long fn_param(const char *name, long long dflt);
/* Symmetric support of a communicator (docs/NCCL.md §1): per version from NCCL_WIN_ENABLE,
 * NCCL_CUMEM_ENABLE, NCCL_P2P_DISABLE (before 2.28.7), the rank count and NVML's P2P status. */
int fn_symmetric(struct ncclComm *c);
void fn_trace(const char *fn, ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fn_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fn_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define ENTER() (fn_depth++)
/* ENTER() of a collective's public entry: the outermost fake entry (fn_depth 0) records who called
 * it (fn_caller); a nested entry (one fake function reaching another's public symbol) keeps it. */
extern __thread int fn_caller;
/* While fn_run_now runs a list: how many communicators have a window registration in it (NCCL's group
 * end gives each its own job, and several jobs run in threads of their own: nccl_reg.c, capture) */
extern __thread int fn_reg_jobs;
int fn_caller_of(const void *ret);
#define ENTER_COLL() (fn_depth++ == 0 ? (void)(fn_caller = fn_caller_of(__builtin_return_address(0))) : (void)0)
#define LEAVE(fname, r, ...) (fn_depth--, fn_trace(fname, (r), __VA_ARGS__), (r))

/* ---- shared memory: one segment per communicator ---- */
/* The collective-matching checker: each rank's descriptor of the collective it is running (the k-th
 * of the communicator, k = its sequence number), posted in the segment at the collective's rendezvous. */
enum { FN_CALLER_APP, FN_CALLER_GUARD };
struct fn_cdesc {
  uint64_t k1;          /* k + 1 (0: nothing posted yet) */
  int kind, dt, op, root, caller;
  uint64_t count;
  long long symoff;     /* the receive buffer's offset in the symmetric space (-1: not in a window) */
};
struct fn_xslot {
  uint64_t gen;
  int arrived, departed;
  unsigned char rec[FN_MAXRANKS][FN_XREC];
};
struct fn_mbox {
  uint64_t head, tail; /* bytes written / read, ever */
  unsigned char data[FN_MB_CAP];
};
struct fn_shm {
  uint64_t magic;
  int nranks;
  int attached;
  int ready;
  pthread_mutex_t mu; /* process-shared, robust */
  pthread_cond_t cv;  /* (unused: a rank that dies waiting on a process-shared condvar blocks every later
                       * broadcast in glibc; waits use the futex below instead) */
  uint32_t wake_seq;  /* bumped (under mu) by fn_shm_wake; fn_shm_wait sleeps on it with FUTEX_WAIT */
  struct fn_xslot x[FN_XSLOTS];
  uint64_t cseq;      /* collective now running */
  uint64_t bar_gen;
  int bar_arrived;
  int conn_arrived;   /* ranks in (or through) the connection setup of the first collective */
  int conn_left;      /* a rank gave that setup up (revoked or aborted while waiting in it) */
  size_t coll_off, mbox_off, total;
  struct fn_cdesc cdesc[FN_MAXRANKS]; /* each rank's latest collective (checker) */
  uint64_t mm_k1;     /* k + 1 of the last collective a mismatch was recorded for */
};

enum fn_state { ST_INIT, ST_READY, ST_FINALIZED, ST_REVOKED, ST_DESTROYED, ST_ABORTED, ST_FAILED };

struct fn_reg { /* ncclCommRegister handle */
  uint32_t magic;
  void *buff;
  size_t size;
  int live;
  struct fn_reg *next;
};

/* One allocation's place in a communicator's symmetric address space (NCCL's ncclDevrMemory,
 * src/dev_runtime.cc; nccl_reg.c "symmetric address space"). */
struct fn_symmem {
  CUdeviceptr base;     /* the allocation (first segment) */
  size_t size;          /* the allocation's size: what the space gives it */
  int nseg;             /* segments (allocations) the window's range covers */
  CUmemGenericAllocationHandle *h; /* their handles, retained while it exists */
  size_t off;           /* offset in the space */
  int refs;             /* windows using it */
  struct fn_symmem *next; /* the communicator's list, sorted by off */
};

struct ncclWindow_vidmem {
  uint32_t magic;
  void *self;           /* hash key */
  struct ncclComm *comm;
  void *buff;
  size_t size;
  int flags;
  int local_only;       /* 2.28 "local registration" handle (no symmetric support) */
  CUdeviceptr va;       /* peer-mapping reservation, freed at deregistration */
  size_t va_size;
  struct fn_symmem *mem; /* its place in the symmetric address space (symmetric windows, 2.28+) */
  int live;
  struct ncclWindow_vidmem *next;
  UT_hash_handle hh;    /* every window ever created (tombstones stay) */
};

struct ncclComm {
  uint32_t magic;
  void *self;           /* hash key */
  int state;            /* enum fn_state */
  int rank, nranks, dev, blocking;
  int init_delay_ms;     /* FAKE_NCCL_INIT_DELAY_MS, read in the creating thread (never in the init thread:
                         * getenv there races with the application's setenv) */
  char name[80];        /* shm segment name */
  struct fn_shm *shm;
  uint64_t xgen;        /* next exchange generation (host calls, in order) */
  uint64_t coll_seq;    /* next collective sequence number (enqueue order) */
  int nsplit, nshrink, ngrow;
  int damaged;          /* a failed registration left it unusable: ncclInternalError */
  ncclResult_t async;   /* what ncclCommGetAsyncError reports */
  volatile int aborted, revoked; /* read and written with FN_LOAD / FN_STORE: an abort flag, as NCCL's */
  volatile int suspended; /* ncclCommSuspend(NCCL_SUSPEND_MEM): its memory is released until ncclCommResume */
  int connected, conn_posted, conn_late, conn_e0; /* the connection setup of its first collective */
  volatile int teardown_hangs; /* revoked while that setup waited for a peer: its abort/destroy never returns */
  volatile int revoke_epoch; /* bumped by ncclCommRevoke: host waits begun before it end (abort flag) */
  int sym;              /* symmetric support (fn_symmetric), -1 until computed */
  uint64_t host;        /* this process's host hash (fn_host_hash), posted at the init rendezvous */
  int nnodes;           /* the distinct hosts among the ranks (NCCL's nNodes), from the init rendezvous */
  int inflight;         /* collectives enqueued and not finished */
  int ops;              /* its operations (fn_op) made and not yet freed */
  int freed;            /* destroyed or aborted, quiet: its memory may go to the next communicator
                         * (FAKE_NCCL_REUSE_COMM_ADDR, fn_comm_new) */
  int ndevcomm;
  struct ncclWindow_vidmem *wins;
  struct fn_reg *regs;
  size_t big_size, big_align; /* symmetric address space (NCCL's bigSize, granularity); 0 until used */
  struct fn_symmem *mems;    /* its allocations, sorted by offset (under lk) */
  /* Resource sharing with split children (NCCL_COMM_SPLIT_SHARE_RESOURCES, config.splitShare): NCCL takes it
   * from the PARENT's config when a child is split (src/init.cc at v2.30.7-1, line 3109: comm->config.splitShare;
   * v2.27.7-1, line 2281), and the variable, when set, overrides any config (init.cc 2131-2137). A child that
   * shares uses its parent's device stream (sharedRes->deviceStream, init.cc 462-477), so the kernels of the
   * parent and of its sharing children run one after another in the order they were enqueued. Modelled with
   * tickets: each collective takes the next ticket of its share root when it is enqueued and runs only after
   * every earlier ticket's collective ended (run_coll). A communicator that shares with nobody is its own root:
   * its collectives run in enqueue order, as they did. */
  int split_share;            /* this communicator's resolved splitShare: children split from it share */
  struct ncclComm *share_root; /* whose device stream its kernels run on (itself when not shared) */
  uint64_t tk_next, tk_done;   /* on a root: the next ticket to hand out, the tickets ended (under lk) */
  int nshare;                  /* on a root: children that share its stream (from then on every kernel waits its turn) */
  pthread_mutex_t lk;
  pthread_cond_t cv;
  UT_hash_handle hh;    /* every communicator ever created (tombstones stay) */
};
/* NCCL's splitShare for a communicator made with `config` (see split_share above) */
int fn_split_share_of(const ncclConfig_t *config);

/* registry (process-wide) */
void fn_lock(void);
void fn_unlock(void);
struct ncclComm *fn_comm_new(void);
/* NCCL's getHostHash: a hash of NCCL_HOSTID when set (empty too), else of the host name (NCCL adds the boot
 * id: one machine either way), computed once per process like NCCL's (std::call_once; a forked child keeps it) */
uint64_t fn_host_hash(void);
void fn_comm_free(struct ncclComm *c); /* destroyed or aborted: reusable where FAKE_NCCL_REUSE_COMM_ADDR=1 */

int fn_comm_known(struct ncclComm *c);
void fn_win_add(struct ncclWindow_vidmem *w);
long long fn_win_symoff(struct ncclComm *c, const void *p);
int fn_win_known(struct ncclWindow_vidmem *w);
/* argument/state check of a communicator at call time */
/* NCCL's abort flags are atomics: read and written from other threads than the one waiting on them */
#define FN_LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define FN_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
ncclResult_t fn_check_comm(struct ncclComm *c, int allow_revoked);

/* shm */
ncclResult_t fn_shm_attach(struct ncclComm *c, const char *name, int nranks);
void fn_shm_lock(struct fn_shm *s);
void fn_shm_unlock(struct fn_shm *s);
void fn_shm_wait(struct fn_shm *s);
void fn_shm_wake(struct fn_shm *s);
ncclResult_t fn_xpost(struct ncclComm *c, uint64_t gen, const void *rec, size_t len);
ncclResult_t fn_xcomplete(struct ncclComm *c, uint64_t gen, unsigned char (*out)[FN_XREC]);
void fn_name_from_id(const ncclUniqueId *id, char *name, size_t len);
void fn_derive_name(char *out, size_t len, const char *parent, const char *what, uint64_t a, uint64_t b);

/* groups: two-phase operations */
struct fn_op;
typedef ncclResult_t (*fn_stage_t)(struct fn_op *op, int stage, int complete);
typedef void (*fn_finish_t)(struct fn_op *op, ncclResult_t r);
struct fn_op {
  struct fn_op *next;
  struct ncclComm *comm;
  int nstages;
  fn_stage_t stage;
  fn_finish_t finish;
  int nonblocking;
  int failed;
  ncclResult_t res;
  uint64_t gen;         /* exchange generation taken at post */
  int on_simulate;      /* still performed by ncclGroupSimulateEnd (registrations; NCCL source) */
  int posted;           /* fn_run_now bookkeeping for the current stage */
  void *arg;            /* kind-specific */
};
struct fn_op *fn_op_new(struct ncclComm *c, int nstages, fn_stage_t stage, fn_finish_t finish, void *arg);
void fn_op_free(struct fn_op *op);
ncclResult_t fn_submit(struct fn_op *op);         /* queue in a group, or run now */
ncclResult_t fn_run_now(struct fn_op *list);      /* post all, complete all, in this thread */
int fn_in_group(void);
void fn_group_error(ncclResult_t r);
struct fn_op *fn_group_find(int (*match)(struct fn_op *, void *), void *key);

/* comm helpers */
ncclResult_t fn_comm_init_rendezvous(struct fn_op *op, struct ncclComm *c, int complete);
void fn_switch_dev(int dev, CUcontext *saved);
void fn_restore_dev(CUcontext saved);
#endif
