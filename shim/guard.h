/* ncclguard: the internal interface shared by the files of shim/ (see docs/DESIGN.md). */
#ifndef NCCLGUARD_GUARD_H
#define NCCLGUARD_GUARD_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_abi.h" /* NCCL's ABI in our own words: no nccl.h needed */

#define NG_API __attribute__((visibility("default")))
/* A wrapper of a function some NCCL versions lack: defined as ng_w_<name> and exported as an
 * indirect function by exports.c; linked into a test program (NG_NO_IFUNC), exported as itself. */
#ifndef NG_NO_IFUNC
#define NG_OPT(name) ng_w_##name
#define NG_OPT_API
#else
#define NG_OPT(name) name
#define NG_OPT_API NG_API
#endif

/* The wrapped NCCL functions: exactly the names of ncclguard.map (tests/t_core.sh checks the
 * exports, tests/t_dlsym.sh these lists). Those every NCCL from 2.19 on has: */
#define NG_PLAIN_FUNCS(X)                                                                               \
  X(ncclCommInitRank) X(ncclCommInitRankConfig) X(ncclCommInitAll) X(ncclCommSplit) X(ncclCommFinalize) \
  X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommRegister) X(ncclCommDeregister) X(ncclGroupStart)       \
  X(ncclGroupEnd) X(ncclMemAlloc)
/* ... and those some lack (the first version that has each): exported as indirect functions (exports.c). */
#define NG_OPTIONAL_FUNCS(X)                                                                            \
  X(ncclCommInitRankScalable) /* 2.23.4 */ X(ncclGroupSimulateEnd) /* 2.22.3 */                       \
  X(ncclCommShrink) /* 2.27.3 */ X(ncclCommWindowRegister) /* 2.27.3 */                                \
  X(ncclCommWindowDeregister) /* 2.27.3 */ X(ncclDevCommCreate) /* 2.28.3 */                           \
  X(ncclDevCommDestroy) /* 2.28.3 */ X(ncclCommRevoke) /* 2.28.7 */ X(ncclCommGrow) /* 2.29.2 */    \
  X(ncclCommSuspend) /* 2.29.7 */ X(ncclCommResume) /* 2.29.7 */
/* A hidden alias of a plain wrapper, written after its definition: ncclguard's own function, whatever
 * the global scope binds the exported name to (dlsym.c hands it out). */
#define NG_SELF(name) extern __typeof__(name) ng_self_##name __attribute__((alias(#name)));

/* ---- failpoints (failpoint.c) ---------------------------------------------------------------
 * Every fallible step ncclguard takes (a host allocation, a thread, a CUDA driver call, a call into
 * NCCL) goes through one named failpoint. In a build with NG_FAILPOINTS (`make FAILPOINTS=1`, the test
 * build of tests/t_failpoints.sh) a test arms one from the environment (NG_FAILPOINT=NAME:K fails the
 * K-th hit of NAME, `*` any failpoint, counted together); everywhere else NG_FP is the constant 0 and
 * the compiler removes it. tests/t_failpoints.sh fails when a fallible call in shim/ does not go
 * through one. */
#ifdef NG_FAILPOINTS
int ng_fp_hit(const char* name);
#define NG_FP(name) __builtin_expect(ng_fp_hit(name), 0)
#else
#define NG_FP(name) 0
#endif
/* Host memory: each site names its failpoint. */
#include <stdlib.h>
static inline void* ng_calloc(const char* fp, size_t n, size_t size) {
  (void)fp;
  return NG_FP(fp) ? NULL : calloc(n, size);
}
static inline void* ng_realloc(const char* fp, void* p, size_t size) {
  (void)fp;
  return NG_FP(fp) ? NULL : realloc(p, size);
}

/* ---- fork (each module that holds a lock) ---------------------------------------------------
 * A module with a lock registers its own pthread_atfork handlers with NG_ON_FORK: prepare takes the lock,
 * parent releases it, child releases it (or makes it anew) and starts the module's state afresh (the
 * parent's threads, communicators and CUDA context are not the child's). The registration is a constructor
 * of the module's priority below: the constructors of one shared object run in the order of their
 * priorities (the linker sorts them), so the handlers are registered in this order whichever module a
 * process uses first, and fork() runs the prepare handlers in the reverse order: the locks are taken bottom-up (driver
 * calls, resolution, routing, registry, watchdog, log file), the order in which a thread may nest them, and
 * released top-down in both processes. A child handler runs with the locks above its own line released and
 * those below still held: none calls into another module. The CUDA driver's lock (cudrv.c) comes first: its
 * handlers are registered when the driver is first loaded, after every constructor. docs/DESIGN.md, "Fork". */
#define NG_FORK_LOG 201      /* log.c: the log file, the statistics */
#define NG_FORK_WATCH 202    /* agree.c: the watchdog */
#define NG_FORK_REGISTRY 203 /* registry.c: the tables */
#define NG_FORK_ROUTE 204    /* route.c: other copies of libnccl, the callers' cache */
#define NG_FORK_REAL 205     /* real.c: the resolution of the real NCCL */
#define NG_ON_FORK(order, prepare, parent, child)                                          \
  __attribute__((constructor(order))) static void ng_on_fork_##order(void) {                \
    pthread_atfork(prepare, parent, child);                                                 \
  }

/* ---- configuration (config.c) ---------------------------------------------------------- */
/* struct ng_config and the enums of its values: generated from the table of variables (vars.def). */
#include "vars.h"
extern struct ng_config ng_cfg;

/* Parse the configuration once (pthread_once); every wrapper calls it first. */
void ng_init(void);
/* Read the LIB variables of vars.def into *cfg (secure_getenv); a bad value warns and keeps *cfg's. */
void ng_parse_env(struct ng_config* cfg);
void ng_dump_config(void);

/* ---- per-thread state ------------------------------------------------------------------- */
#define NG_NLIBS 4 /* copies of libnccl ncclguard tells apart: the primary and up to three others (route.c) */
struct ng_regreq;
/* One thread's group on one libnccl: each copy of NCCL keeps its own group state, and so does ncclguard. */
struct ng_group {
  int depth;                 /* ncclGroupStart nesting seen from the application */
  struct ng_regreq* pending; /* window registrations queued inside the group */
  int npending, cappending;
  /* communicators whose registration could not be queued (out of memory): broken at once, given up
   * (revoked) at the group's end, outside NCCL's open group */
  ncclComm_t lost[4];
  int nlost;
  /* blocking communicators created inside the group: warmed up at its end (ng_warmup), when they are ready
   * and nothing of the application's is on them yet */
  ncclComm_t* warm;
  int nwarm, capwarm;
  /* child communicators (split, shrink, grow) made inside the group: NCCL writes the caller's pointer at the
   * group's end ("*newcomm should be NCCL_COMM_NULL until comm split fully complete", init.cc), where they are
   * recorded (ng_group_child_later) */
  struct ng_child* child;
  int nchild, capchild;
};
/* Queue a communicator created inside this thread's group for the warm-up at the group's end. */
void ng_group_warm_later(ncclComm_t comm);
/* A child communicator whose creation returned inside a group with the caller's pointer still NULL: what to
 * record of it once NCCL writes it (at the group's end). */
struct ng_child {
  const char* fn;
  ncclComm_t* slot; /* the caller's newcomm: NCCL writes it by the group's end (its contract with the caller) */
  double t0;
  uint64_t cid, parent;
  int nranks, blocking;
};
void ng_group_child_later(const struct ng_child* c);
/* Record a child communicator NCCL wrote at the end of the group it was made in (wrap_comm.c), its warm-up
 * queued with the group's (ng_group_warm_later). */
void ng_comm_created(const char* fn, ncclComm_t comm, ncclResult_t res, double t0, uint64_t cid, uint64_t parent,
                     int rank, int nranks, int blocking_hint);
struct ng_tls {
  int in_nccl;              /* >0 while this thread is inside the real NCCL: calls are NCCL's own */
  int lib;                  /* the libnccl this call runs with: 0 the primary (real.c), k > 0 another copy (route.c) */
  struct ng_group grp[NG_NLIBS];
};
extern __thread struct ng_tls ng_tls;

/* ---- real NCCL (real.c) -------------------------------------------------------------------- */
/* Every NCCL function ncclguard wraps or calls: the lists of nccl_abi.h. */
enum ng_real_id {
#define NG_ENUM(ret, f, params) NG_ID_##f,
  NG_NCCL_PROTOS(NG_ENUM) NG_NCCL_DEVPROTOS(NG_ENUM)
#undef NG_ENUM
  NG_NREAL
};

/* The name of each function, by id ("ncclX"). */
extern const char* const ng_real_names[NG_NREAL];
/* The real function, or NULL (logged once) when no loaded NCCL has it. */
void* ng_real(enum ng_real_id id);
/* Result for a call whose real function is missing: logs and returns ncclInvalidUsage. */
ncclResult_t ng_missing(enum ng_real_id id);
/* "ncclguard X.Y.Z (revision)" */
const char* ng_version(void);
/* Version code of the loaded NCCL (ncclGetVersion), 0 if unknown. */
int ng_nccl_version(void);
/* Log (once, at info) where the real NCCL was found; called once the rank is known. */
void ng_log_source(void);

/* The libnccl the real functions come from (resolving them first if need be): its load address
 * (dladdr's dli_fbase) and path; NULL and "" when no libnccl was found. */
/* The base of the libnccl the wrappers call once it is known (pinned by the first resolved function), else
 * NULL; no lock, no lookup (the export resolvers read it). */
const void* ng_real_pinned(void);
/* 1: addr is in a copy of NCCL; 0: in another object (a library that forwards NCCL's functions); -1: none */
int ng_addr_in_nccl(const void* addr);
const void* ng_real_lib_base(void);
const char* ng_real_lib_path(void);

/* ---- symbols found without ncclguard's own dlsym (elfsym.c) ---------------------------------- */
/* The dlsym ncclguard's own code calls: glibc's, never ncclguard's own (dlsym.c). */
void* ng_dl_sym(void* handle, const char* name);
/* glibc's own function `name` (dlsym, dlvsym), read from the ELF tables of libc.so.6 or libdl.so.2. */
void* ng_glibc_fn(const char* name);
/* The address of `name` defined by the loaded object at `base` whose dynamic section is `dynamic`
 * (link_map's l_addr and l_ld), read from its ELF tables; NULL if it does not define it. */
void* ng_elf_sym(uintptr_t base, const void* dynamic, const char* name);
/* 1 when `name` is one of the exports some NCCL versions lack (exports.c) and its indirect function answers
 * NULL now (the loaded NCCL lacks it, or no NCCL is loaded): dlsym.c then answers such a lookup itself */
int ng_export_absent(const char* name);
/* String helpers for the code that runs while a sanitizer runtime starts (dlsym.c, elfsym.c): libc's
 * str* functions are intercepted there, and their interceptors are not ready yet. */
static inline int ng_streq(const char* a, const char* b) {
  while (*a && *a == *b) a++, b++;
  return *a == *b;
}
static inline int ng_startswith(const char* s, const char* prefix) {
  while (*prefix && *s == *prefix) s++, prefix++;
  return !*prefix;
}
static inline const char* ng_basename(const char* path) {
  const char* b = path;
  for (const char* p = path; p && *p; p++)
    if (*p == '/') b = p + 1;
  return b;
}

/* ---- other copies of libnccl (route.c) ------------------------------------------------------ */
/* How many other copies have an index (0 in the usual process): read before ng_tls.lib, so that a process
 * with one libnccl never pays for the thread-local lookup on its calls into NCCL. */
extern int ng_route_others;
static inline int ng_cur_lib(void) {
  return __builtin_expect(__atomic_load_n(&ng_route_others, __ATOMIC_RELAXED) != 0, 0) ? ng_tls.lib : 0;
}
/* This thread's group state on the libnccl the current call runs with. */
static inline struct ng_group* ng_grp(void) { return &ng_tls.grp[ng_cur_lib()]; }
/* The primary's function (real.c's choice), whatever library the current call runs with. */
void* ng_real_primary(enum ng_real_id id);
/* Copy k's own function, its NCCL version (0 unknown), its path (k = 0: the primary's). */
void* ng_lib_fn(int k, enum ng_real_id id);
int ng_lib_version(int k);
const char* ng_lib_path(int k);
/* ncclguard's entry point for `name` of the other copy that holds `found` (glibc's answer to a lookup
 * on that copy's handle), or NULL (not another copy, no free index, not a wrapped name). */
void* ng_lib_entry(const void* found, const char* name);
/* For a wrapper called from `ra` (its return address): NULL when the caller is not inside a libnccl
 * other than the one ncclguard forwards to (the common case: a few compares, no lock); else that
 * library's own function `id`, or NG_FOREIGN_MISSING when it has none. */
void* ng_foreign(const void* ra, enum ng_real_id id);
#define NG_FOREIGN_MISSING ((void*)1)
/* route.c's cache of callers: the address range of each object seen calling a wrapper, with its answer.
 * Entries are written once, before ng_route_n (or the hint) publishes them. */
struct ng_route_range {
  uintptr_t lo, hi;
  int lib;   /* the object itself: a library index, or -1: not a libnccl */
  int scope; /* not a libnccl: the library its calls of NCCL bind to (-1: none) */
};
extern struct ng_route_range ng_route_ranges[];
/* The entry last answered "nothing to do, whatever the thread" (a caller that is not a libnccl and binds
 * to the primary or to none), -1 before any: the one compare on the path of almost every call. */
extern int ng_route_hint;
static inline int ng_route_quiet(uintptr_t a) {
  int i = __atomic_load_n(&ng_route_hint, __ATOMIC_ACQUIRE);
  return i >= 0 && a - ng_route_ranges[i].lo < ng_route_ranges[i].hi - ng_route_ranges[i].lo;
}
/* First statement of every wrapper: a call that belongs to another libnccl goes to it (route.c). */
#define NG_FOREIGN(fn, ...)                                                                            \
  do {                                                                                                 \
    const void* ng_ra_ = __builtin_return_address(0);                                                  \
    if (!ng_route_quiet((uintptr_t)ng_ra_)) {                                                          \
      void* ng_ff_ = ng_foreign(ng_ra_, NG_ID_##fn);                                                   \
      if (__builtin_expect(ng_ff_ != NULL, 0))                                                         \
        return ng_ff_ == NG_FOREIGN_MISSING ? ncclInvalidUsage : ((__typeof__(&fn))ng_ff_)(__VA_ARGS__); \
    }                                                                                                  \
  } while (0)

/* Call the real function `fn` with the in-NCCL guard held; `res` receives its result. */
/* Its failpoint is "nccl.<fn>": the call is skipped and fails with ncclSystemError, except a group's end,
 * which is made (NCCL's group ends) and then reports ncclSystemError, as a deferred error of NCCL's group
 * end does. */
#define NG_CALL(res, fn, ...)                                                   \
  do {                                                                          \
    __typeof__(&fn) ng_f_ = (__typeof__(&fn))ng_real(NG_ID_##fn);               \
    int ng_grp_ = NG_ID_##fn == NG_ID_ncclGroupEnd;                             \
    int ng_fail_ = NG_FP("nccl." #fn);                                          \
    if (!ng_f_) {                                                               \
      (res) = ng_missing(NG_ID_##fn);                                           \
    } else if (ng_fail_ && !ng_grp_) {                                          \
      (res) = ncclSystemError;                                                  \
    } else {                                                                    \
      ng_tls.in_nccl++;                                                         \
      (res) = ng_f_(__VA_ARGS__);                                               \
      ng_tls.in_nccl--;                                                         \
      if (ng_fail_) (res) = ncclSystemError;                                    \
    }                                                                           \
  } while (0)

const char* ng_result_name(ncclResult_t r);
/* NCCL's last error string for comm (may be ""), never NULL. */
const char* ng_last_error(ncclComm_t comm);

/* ---- logging (log.c) ----------------------------------------------------------------------- */
struct ng_line {
  char buf[3072];
  int len;
  int level;
  int json;
  int dropped; /* something did not fit: the line ends at `safe`, marked truncated */
  int safe;    /* length after the last complete key=value pair */
};
int ng_log_on(int level);
/* Begin a line for the CUDA device `dev` (-1: unknown). */
void ng_line_begin(struct ng_line* l, int level, int dev);
void ng_kv_str(struct ng_line* l, const char* key, const char* val);
void ng_kv_int(struct ng_line* l, const char* key, long long val);
void ng_kv_uint(struct ng_line* l, const char* key, unsigned long long val); /* an int key, unsigned (a size) */
void ng_kv_u64hex(struct ng_line* l, const char* key, uint64_t val);
void ng_kv_ptr(struct ng_line* l, const char* key, const void* p);
void ng_kv_dbl(struct ng_line* l, const char* key, double v);
/* Finish with msg="..." (printf format, may be NULL) and write the line with one write(2). */
void ng_line_end(struct ng_line* l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* A free-text line: fn=<fn> msg="..." */
void ng_log_msg(int level, int dev, const char* fn, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Expand %h (host), %p (pid), %r (rank), %% in a log path; 0 on success, -1 if it does not fit. */
int ng_expand_path(const char* pat, char* out, size_t cap);
void ng_log_set_rank(int rank);

/* Counters for the exit summary. */
enum ng_stat { NG_ST_CALLS, NG_ST_REGISTERED, NG_ST_DEGRADED, NG_ST_RETRIED, NG_ST_ERRORS, NG_ST_NOOPS,
               NG_ST_COMMS, NG_ST_AGREE, NG_ST_WINDOWS_LIVE /* registry.c: windows it knows */, NG_ST_WINDOW_BYTES,
               NG_ST_WINDOW_BYTES_PEAK, NG_NSTATS };
void ng_stat_add(enum ng_stat s, long n);
/* The bytes of live windows change by delta (the registry, under its lock); the peak follows. */
void ng_stat_window_bytes(long delta);

/* Monotonic microseconds. */
double ng_now_us(void);

/* ---- CUDA driver (cudrv.c) ---------------------------------------------------------------- */
typedef int ng_cures;                 /* CUresult */
typedef unsigned long long ng_devptr; /* CUdeviceptr */
typedef struct ng_custream* ng_stream;
typedef struct ng_cuctx* ng_ctx;
int ng_cuda_ok(void); /* 1 if the driver API is usable */
/* Push the primary context of `dev` (or keep the current one when dev < 0); 0 on success. */
int ng_cuda_push(int dev, ng_ctx* saved);
void ng_cuda_pop(ng_ctx saved);
/* Device scratch and a private non-blocking stream on the current context. */
int ng_cuda_stream_create(ng_stream* s);
int ng_cuda_stream_destroy(ng_stream s);
int ng_cuda_alloc(ng_devptr* p, size_t bytes);
int ng_cuda_free(ng_devptr p);
/* Pinned host memory: copies to and from it are asynchronous (pageable memory makes a
 * device-to-host copy wait on the host). */
int ng_cuda_host_alloc(void** p, size_t bytes);
int ng_cuda_host_free(void* p);
int ng_cuda_h2d(ng_devptr dst, const void* src, size_t n, ng_stream s);
int ng_cuda_d2h(void* dst, ng_devptr src, size_t n, ng_stream s);
/* 1 done, 0 still running, <0 error */
int ng_cuda_stream_done(ng_stream s);
/* Pointer facts for preflight; each returns 0 on success. */
int ng_cuda_ptr_device(const void* p, int* is_device, int* ordinal);
int ng_cuda_addr_range(const void* p, uintptr_t* base, size_t* size);
/* Is p inside a CUDA allocation, looked up with device dev's context current (cuMemGetAddressRange)?
 * 1 yes, 0 no (not found), -1 cannot tell (no CUDA, no context, another error). */
int ng_cuda_is_allocation(const void* p, int dev);
int ng_cuda_is_vmm(const void* p);
int ng_cuda_capturing(void); /* 1 if a capture makes registration unsafe on this thread */
int ng_cuda_relaxed_capture(int* saved_mode); /* switch this thread to relaxed capture mode */
void ng_cuda_restore_capture(int saved_mode);

int ng_cuda_driver_version(void);   /* cuDriverGetVersion, or -1 */
int ng_cuda_vmm_supported(int dev); /* 1/0, or -1 if it cannot be read */

/* ---- what the loaded NCCL does with a registration (rules.c) ------------------------------- */
enum { NG_SYM_UNKNOWN = 0, NG_SYM_YES = 1, NG_SYM_NO = 2 };
struct ng_rules {
  int version;
  int sym;      /* does this communicator take NCCL's symmetric path (NG_SYM_*) */
  int one_node; /* NG_SYM_YES holds only if every rank is on one host (2.27, 2.28.3) */
  int all_paths; /* 2.27, NCCL_LOCAL_REGISTER and cuMem on: NCCL looks the buffer's allocation up on every
                    path, symmetric or local, and an address that is no CUDA allocation fails there */
  int no_reuse;  /* NCCL reserves symmetric address space of the whole allocation for every window, even a
                    repeat of a live one (NVIDIA/nccl#2331): ncclguard serves exact repeats itself */
  char why[128];
};
void ng_rules_for(ncclComm_t comm, int dev, int nranks, struct ng_rules* r);
/* 1 if NCCL `version` reserves new symmetric address space for a repeat registration (no reuse). */
int ng_nccl_no_reuse(int version);

/* ---- registry (registry.c) ---------------------------------------------------------------- */
enum ng_comm_state { NG_COMM_INITIALIZING, NG_COMM_READY, NG_COMM_FINALIZED, NG_COMM_DESTROYED,
                     NG_COMM_REVOKED, NG_COMM_ABORTED };
const char* ng_state_name(int s);

/* A snapshot of what the registry knows about one communicator. */
struct ng_commview {
  int known;
  ncclComm_t comm;
  uint64_t cid;
  uint64_t parent_cid;
  int rank, nranks, dev;
  int blocking;
  int state;
  int warmed;
  int has_devcomm; /* live device communicators (ncclDevCommCreate minus ncclDevCommDestroy) */
  int ndegraded;   /* live NULL windows (degraded, or NCCL's own) */
  int nwindows;
  size_t wbytes;   /* bytes of its live windows (sizes as registered) */
  int over_budget; /* past NCCLGUARD_WINDOW_BUDGET since the last WARN (one WARN per crossing) */
  int broken;      /* an ng_reason: an agreement failed, the ranks are no longer in step */
  int aborting;    /* ncclCommAbort/Destroy in progress: ncclguard makes no more NCCL calls on it */
  int suspended;   /* ncclCommSuspend'ed (2.29+): unusable until ncclCommResume, so no rounds on it */
  int stuck;       /* ncclguard calls into NCCL on it that never returned (a first round whose peers left) */
  int guard_revoked; /* ncclguard revoked it (NCCL accepted): the application's own revoke is answered here */
  uint64_t gen;    /* the entry's generation: another communicator at the same address has another */
};
/* A destroyed or aborted communicator (a tombstone): NCCL must not see it again. */
static inline int ng_comm_gone(const struct ng_commview* v) {
  return v->known && (v->state == NG_COMM_DESTROYED || v->state == NG_COMM_ABORTED);
}
/* Record a communicator created by NCCL (replaces a tombstone with the same address; the replaced
 * entry's resources are released). 0, or -1 when it could not be recorded (out of memory). */
int ng_reg_comm_add(ncclComm_t comm, uint64_t cid, uint64_t parent_cid, int rank, int nranks, int dev,
                     int blocking, int state);
int ng_reg_comm_get(ncclComm_t comm, struct ng_commview* v);
/* The communicator's agreement channel (channel.c; generation gen, 0: whichever is at comm): NULL when it
 * has none. set: 0 when recorded (-1: the entry went, is being ended, or has one). take: the channel,
 * removed from the entry (its end of life; *lib: the libnccl that made it). */
ncclComm_t ng_reg_chan(ncclComm_t comm, uint64_t gen);
int ng_reg_chan_set(ncclComm_t comm, uint64_t gen, ncclComm_t chan);
ncclComm_t ng_reg_chan_take(ncclComm_t comm, uint64_t gen, int* lib);
/* whether a channel was ever made for it (1 also after ng_reg_chan_take took it: an abandoned launch's) */
int ng_reg_chan_made(ncclComm_t comm, uint64_t gen);
void ng_reg_comm_set_state(ncclComm_t comm, int state);
void ng_reg_comm_set_info(ncclComm_t comm, int rank, int nranks, int dev);
/* n-th split / shrink / grow / window registration of a communicator (0-based), then increments. */
int ng_reg_comm_next(ncclComm_t comm, int which);
enum { NG_NEXT_SPLIT, NG_NEXT_SHRINK, NG_NEXT_GROW, NG_NEXT_WINSEQ, NG_NEXT_ROUND, NG_NNEXT };
/* warmed: set the flag; the deltas add to has_devcomm and ndegraded (never below 0). */
void ng_reg_comm_mark(ncclComm_t comm, int warmed, int devcomm_delta, int degraded_delta);
/* The calls below that take a generation act only on that entry (0: whichever lives at comm now): a
 * round, the watchdog or a launch that outlived its communicator never touches a new one at its address. */
/* The first reason an agreement on this communicator failed; later registrations are refused. 1 when
 * this call set it. */
int ng_reg_comm_set_broken(ncclComm_t comm, uint64_t gen, int reason);
void ng_reg_comm_guard_revoked(ncclComm_t comm, uint64_t gen);
void ng_reg_comm_set_aborting(ncclComm_t comm, int on);
void ng_reg_comm_set_suspended(ncclComm_t comm, int on);
void ng_reg_comm_stuck(ncclComm_t comm, uint64_t gen, int delta);
void ng_reg_comm_set_cid(ncclComm_t comm, uint64_t cid);
/* 1 unless the communicator is being aborted/destroyed or is gone: ncclguard may call NCCL on it. */
int ng_reg_comm_usable(ncclComm_t comm, uint64_t gen); /* gen != 0: and still that entry */
/* A call of ncclguard's own on a known communicator from a thread that is not the application's (the
 * watchdog's revoke): enter returns 1 and counts it when the communicator is usable, atomically with
 * that check; leave uncounts it. The end of life waits (bounded) until none is in flight, so NCCL never
 * frees a communicator under such a call. */
int ng_reg_comm_enter(ncclComm_t comm, uint64_t gen);
void ng_reg_comm_leave(ncclComm_t comm, uint64_t gen);
int ng_reg_comm_inflight(ncclComm_t comm);
/* Agreement resources of a communicator, created by agree.c: a private stream, device scratch and
 * the host side of its copies (never on a caller's stack: a timed-out round may still use them). */
struct ng_agree_res {
  ng_stream s;
  ng_devptr buf;
  int32_t* host;
  size_t cap; /* int32 elements of buf and host; 0: none */
  int pinned; /* host is pinned (cuMemAllocHost): the whole round is enqueued at once */
};
/* Take the communicator's resources for one round: 1 with *res filled, 0 when it has none yet
 * (*res zeroed: the caller creates them), -1 when another round holds them or the comm is unknown.
 * Release stores them back, or hands them to the pool when the communicator is gone meanwhile. */
int ng_reg_res_acquire(ncclComm_t comm, struct ng_agree_res* res, uint64_t* gen);
void ng_reg_res_release(ncclComm_t comm, uint64_t gen, int dev, const struct ng_agree_res* res);
/* Destroyed/aborted: the entry becomes a tombstone and its windows are forgotten. */
void ng_reg_comm_tombstone(ncclComm_t comm, int state);
/* Agreement resources left by a destroyed communicator on `dev`, for reuse; 1 if one was taken. */
int ng_reg_pool_take(int dev, struct ng_agree_res* res);
/* Give back resources that are still busy (their stream has queued work). */
void ng_reg_pool_put(int dev, const struct ng_agree_res* res);
/* Free the resources that did not fit into the pool (called without the lock; release and tombstone
 * call it). */
void ng_reg_pool_drain(void);

int ng_reg_win_add(ncclWindow_t win, ncclComm_t comm, void* buff, size_t size, int flags, int seq);
/* A live window of comm registered with exactly these arguments: 1 with *win set. */
int ng_reg_win_find(ncclComm_t comm, const void* buff, size_t size, int flags, ncclWindow_t* win);
/* 1 when comm has a live window whose buffer lies in [lo, lo + n) (an allocation NCCL already placed). */
int ng_reg_win_in_range(ncclComm_t comm, uintptr_t lo, size_t n);
/* Registrations a window serves: +1 for a repeat served from it; -1 only while more than one is left.
 * Returns the new count, 0 when the window is unknown or (delta -1) it served only one: NCCL's turn. */
int ng_reg_win_ref(ncclWindow_t win, int delta);
/* Removes; returns 1 and fills seq/buff/size if known. */
int ng_reg_win_del(ncclWindow_t win, int* seq, void** buff, size_t* size);
int ng_reg_buf_add(void* handle, ncclComm_t comm, void* buff, size_t size);
int ng_reg_buf_del(void* handle);
/* What ncclguard saw a handle made by: NG_HANDLE_WINDOW (a live window), NG_HANDLE_BUFFER (a live
 * ncclCommRegister handle), 0 (neither). */
enum { NG_HANDLE_WINDOW = 1, NG_HANDLE_BUFFER = 2 };
int ng_reg_handle_kind(const void* h);
/* After a window of comm was added: 1 when its windows' bytes just went past `budget` (>0), once per
 * crossing (re-armed when they fall back to it or below); *n and *bytes: its live windows and their bytes. */
int ng_reg_budget_crossed(ncclComm_t comm, double budget, int* n, size_t* bytes);

uint64_t ng_fnv(uint64_t h, const void* data, size_t n);
#define NG_FNV_INIT 0xcbf29ce484222325ULL

/* ---- preflight (preflight.c) --------------------------------------------------------------- */
/* The reasons, from their one table (shim/reasons.def: name, level, advice). */
enum ng_reason {
#define NG_REASON(id, name, level, advice) NG_R_##id,
#include "reasons.def"
#undef NG_REASON
  NG_NREASONS
};
const char* ng_reason_name(int r);
/* The level (NG_LOG_WARN or NG_LOG_INFO) of a line that ends with this reason. */
int ng_reason_level(int r);
/* What to tell the user about a reason, one sentence with the fix. */
const char* ng_reason_advice(int r);
/* The local checks NCCL `version`'s symmetric path makes of buff[0..size): *facts gets one bit per
 * reason it would refuse the buffer for; returns the lowest such reason, or NG_R_OK. */
int ng_preflight(const void* buff, size_t size, int dev, int version, unsigned* facts, size_t* alloc, uintptr_t* base);
/* 1 if a graph capture makes NCCL `version`'s registration fail on this thread (before 2.30.7). */
int ng_capture_hazard(int version);

/* ---- agreement (agree.c) ------------------------------------------------------------------- */
/* Deadline (monotonic us) NCCLGUARD_TIMEOUT from now. */
double ng_deadline(void);
/* Wait until a communicator is ready (nonblocking init or call done). ncclSuccess, its error,
 * ncclSystemError past the deadline, ncclInvalidUsage if it is being aborted meanwhile. */
ncclResult_t ng_wait_ready_until(ncclComm_t comm, int dev, double deadline);
ncclResult_t ng_wait_ready(ncclComm_t comm, int dev);
/* One agreement round: every entry's votes are max-reduced across the ranks of its communicator
 * (entries on one communicator travel as one all-reduce, all communicators in one NCCL group) and
 * come back in place. Returns ncclSuccess when every communicator's round completed in step;
 * otherwise the entries' status says why and each failed communicator is left broken. */
#define NG_NVOTE 57 /* int32 per registration: a flag per reason, then the slots below (the wire format) */
enum ng_agree_status { NG_AGREE_OK, NG_AGREE_TIMEOUT, NG_AGREE_STEP, NG_AGREE_ABORTED, NG_AGREE_FAILED,
                       NG_AGREE_SETTINGS /* completed in step, but the ranks' settings differ: every rank refuses */ };
struct ng_vote {
  ncclComm_t comm;
  int dev;
  int status;   /* out: enum ng_agree_status */
  int one_host; /* out: every rank of the communicator runs on this rank's host (1), not (0), unknown (-1) */
  int32_t v[NG_NVOTE];
};
ncclResult_t ng_agree(struct ng_vote* votes, int n, const char* what);
/* A round that follows an earlier round of the same batch (go, outcome): its peers met this rank in that
 * round, but one may still be held up to NCCLGUARD_TIMEOUT by a round of another communicator it shares its
 * batch with, so it waits NCCLGUARD_TIMEOUT plus ng_late_grace_us(). */
ncclResult_t ng_agree_after(struct ng_vote* votes, int n, const char* what);
/* The grace of a wait on peers that already met this rank in a round of this batch: T/4, 1-10 s. */
double ng_late_grace_us(void);
/* 1 if the loaded NCCL can revoke a communicator (2.28.7+). */
int ng_can_revoke(void);
/* THE one exit: every path that leaves a registration without running the round its peers run goes
 * through here. The communicator (generation gen, 0: whichever is at comm) becomes broken for ncclguard
 * and is revoked where the loaded NCCL can, also when the registry could not record it; without revoke
 * one WARN says to abort it on every rank. `cause` names the step that failed, for the log. */
void ng_give_up(ncclComm_t comm, uint64_t gen, int dev, int reason, const char* cause);
/* Stop the application's communicator itself (broken, revoked where NCCL can; a WARN to abort it on every
 * rank where it cannot): only where its ranks' own collectives are known to be out of step, alike on every
 * rank (an application group that failed on some ranks only, learnt from the vote). */
void ng_stop_comm(ncclComm_t comm, uint64_t gen, int dev, int reason, const char* why);
/* The watchdog of a call into NCCL that can wait on the host for a peer: past the deadline the
 * communicator is revoked (NCCL 2.28.7+). disarm returns 1 if that happened. */
struct watch {
  ncclComm_t comm;
  uint64_t gen; /* the communicator's generation when the watch was armed */
  int dev;
  int lib; /* the libnccl of the armed call (ng_tls.lib): the revoke is that library's */
  double deadline;
  double armed;     /* when the call began (ng_now_us) */
  const char* what; /* the call, for the WARN: "ncclCommWindowRegister", "the agreement all-reduce" */
  int seq;          /* its step on the communicator (-1: none) */
  int reached;      /* every rank reached the call (a vote round before it completed) */
  int fired;
  struct watch* next;
};
void ng_watch_arm(struct watch* w, ncclComm_t comm, int dev, double deadline, const char* what, int seq,
                  int reached);
/* Start fn(arg) on a detached thread: 0 when it runs. */
int ng_spawn_detached(void* (*fn)(void*), void* arg);
void ng_thread_name(const char* name);
/* pthread_cond_init on CLOCK_MONOTONIC: every condition variable ncclguard waits on with a timeout. */
int ng_cond_init(pthread_cond_t* cv);
struct timespec ng_mono_after(double us);
/* With mu held (cv made by ng_cond_init): wait on cv until *done is set or the clock passes until_us (re-checked at least every
 * 100 ms); returns *done. */
int ng_wait_done(pthread_mutex_t* mu, pthread_cond_t* cv, const int* done, double until_us);
int ng_watch_disarm(struct watch* w);
/* ---- the agreement channel and ncclguard's own threads (channel.c) ---------------------------- */
/* A call made on a thread of ncclguard's (no NCCL group of the application's open there), with device dev
 * current (-1: none) and, if relaxed, relaxed capture mode. ng_offload waits until until_us: 1 when run
 * returned (the caller then frees the job, ng_job_free), 0 when the caller gave up (the thread keeps the
 * job, calls orphan when run returns, and frees it). The job is the first member of the caller's struct,
 * allocated with ng_calloc. */
struct ng_job {
  void (*run)(struct ng_job*);
  void (*orphan)(struct ng_job*); /* may be NULL */
  /* may be NULL: called by ng_offload when the caller gives up, before the thread can see it (so that what it
   * marks, orphan can undo) */
  void (*abandon)(struct ng_job*);
  int dev, relaxed, lib;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, abandoned;
};
int ng_offload(struct ng_job* J, double until_us);
void ng_job_free(struct ng_job* J);
/* The channels of n communicators, made where missing (ncclCommSplit, one NCCL group) and waited for until
 * the deadline. In: comm, gen, rank, dev; out: chan (NULL where none) and status (enum ng_agree_status).
 * Returns 0 when every one has its channel. */
struct ng_chanreq {
  ncclComm_t comm;
  uint64_t gen;
  int rank, dev;
  ncclComm_t chan;
  int status;
  ncclResult_t result; /* NCCL's answer where the channel could not be made */
};
int ng_channel_open(struct ng_chanreq* c, int n, double deadline);
/* Poll a channel until its last operation is done (ncclSuccess), failed (NCCL's error), the deadline passed
 * (ncclSystemError) or its parent went (ncclInvalidUsage). */
ncclResult_t ng_channel_wait(ncclComm_t chan, ncclComm_t parent, uint64_t gen, double deadline);
/* Abort a channel that nothing else holds, on this thread. */
void ng_channel_abort_now(ncclComm_t chan);
/* After a failed round: revoke the channel where NCCL can (its pending all-reduce stops). */
void ng_channel_stop(ncclComm_t comm, uint64_t gen, int dev);
/* The communicator's end of life: its channel ended first (destroyed, aborted where broken; bounded). */
void ng_channel_end(ncclComm_t comm, uint64_t gen, int dev, int broken);
/* 1 when NCCL_COMM_SPLIT_SHARE_RESOURCES makes NCCL share a parent's resources with every split child. */
int ng_split_shares(void);
/* The warm-up: one 1-element all-reduce on each communicator, enqueued on ncclguard's stream, not waited
 * for (agree.c); called where every rank is at the same place of the communicators' device sequence (they
 * became ready, nothing of the application's can be on them yet). */
void ng_warmup(const ncclComm_t* comms, int n, const char* what);

/* vote layout: [0, NG_NREASONS) one flag per reason NCCL refuses the buffer for on any path */
enum {
  NG_VOTE_FIRST_BAD = NG_NREASONS, /* nranks - lowest rank with such a reason */
  NG_VOTE_FAILED,                  /* outcome round: NCCL failed on some rank */
  NG_VOTE_SYM_YES,                 /* some rank's rules: NCCL takes the symmetric path */
  NG_VOTE_SYM_NO,                  /* ... it does not */
  NG_VOTE_SYM_UNKNOWN,             /* ... cannot tell */
  NG_VOTE_ONE_NODE,                /* some rank's rules: symmetric only if all ranks are on one host */
  NG_VOTE_FACTS,                   /* bit mask of reasons NCCL refuses on its symmetric path only */
  NG_VOTE_FACTS_FIRST_BAD,         /* nranks - lowest rank with such a fact */
  NG_VOTE_NO_REPEAT,               /* some rank has no live window registered with exactly these arguments
                                      (or its NCCL reuses allocations itself): 0 after the max = every rank
                                      serves this registration from its live window */
  /* the window's layout, each as (x, -x): max and -min, so that after the max every rank knows whether all
   * ranks agree (x == -(-x)) and the range. The size travels exact as three 22-bit pieces, and in 4 KiB
   * units (rounded up, at most 2^31 - 1) for the range the log names; the flags (any int) as (x, ~x): ~x
   * reverses the order as -x does (max(~x) = ~min(x)) and, unlike -INT_MIN, is defined for every value */
  NG_VOTE_SIZE_P0, NG_VOTE_SIZE_P1, NG_VOTE_SIZE_P2,
  NG_VOTE_NSIZE_P0, NG_VOTE_NSIZE_P1, NG_VOTE_NSIZE_P2,
  NG_VOTE_SIZE_4K, NG_VOTE_NSIZE_4K,
  NG_VOTE_WFLAGS, NG_VOTE_NWFLAGS,
  NG_VOTE_SIZE_UNKNOWN, /* some rank could not read its allocation's size: sizes are not compared */
  /* where NCCL looks an allocation up among those it placed and reuses its place (before 2.30.7): on some
   * rank the window's allocation already holds a live window of the communicator (or an earlier one of
   * the batch), on some rank not; a rank that could not read its allocation sets neither */
  NG_VOTE_ALLOC_LIVE, NG_VOTE_ALLOC_NEW,
  NG_VOTE_NULL_WIN, /* outcome round: NCCL answered success with a NULL window on some rank */
  NG_VOTE_REAL_WIN, /* ... with a window on some rank */
  NG_VOTE_GROUP_FAILED, /* some rank's application group, holding this registration, failed (NCCL dropped it there) */
  NG_VOTE_GROUP_OK,     /* ... and on some rank it did not: the communicator's collectives are out of step */
  NG_VOTE_END
};
_Static_assert(NG_VOTE_END <= NG_NVOTE, "vote layout");
_Static_assert(NG_NREASONS <= 32, "a vote's facts are a 32-bit mask of reasons");

/* ---- policy (policy.c) ---------------------------------------------------------------------- */
struct ng_regreq {
  ncclComm_t comm;
  void* buff;
  size_t size;
  ncclWindow_t* win;
  int flags;
  /* filled by the policy */
  struct ng_commview cv;
  struct ng_rules rules;
  int seq;
  int arg_reason;   /* NULL win or buffer, size 0: found at the call */
  int local_reason; /* this rank's reason (arguments, or a fact that counts) */
  unsigned facts;   /* preflight: reasons NCCL's symmetric path refuses this buffer for */
  int agreed_reason;
  int first_bad_rank;
  int relaxed;      /* register with this thread in relaxed capture mode */
  int app_group_failed; /* queued in an application group whose ncclGroupEnd failed here (NCCL dropped it) */
  int group_failed_everywhere; /* the vote said: that group failed on every rank (nothing of it pending anywhere) */
  int sym_all;      /* the vote: every rank's rules say NCCL takes its symmetric path */
  ncclWindow_t repeat_of; /* NCCL without reuse: the live window registered with exactly these arguments */
  int space_full;   /* NCCL without reuse failed: its symmetric address space has no room (#2331) */
  size_t alloc_size; /* preflight: the size of the allocation behind buff (what NCCL 2.28+ places), 0: unknown */
  uintptr_t alloc_base; /* preflight: where that allocation begins (with alloc_size; 0: unknown, or a window
                           over several allocations) */
  int alloc_live;    /* 1: NCCL (before 2.30.7) reuses that allocation's place (a live window, or an earlier one
                        of the batch, in it); 0: it places it anew; -1: not known */
  int null_peer;
  int in_go;        /* in this batch's go round (its communicator registers something in the batch) */
  int acct;         /* registered here: comm_windows and comm_bytes (after it) go to the log */
  int comm_windows;
  size_t comm_bytes;    /* NCCL gave this rank a window and another rank a NULL one: dropped again here */
  int decision;
  ncclResult_t result;
  double t0;
  double agree_us;  /* time in the agreement rounds of its batch (warm-up, vote, go, outcome) */
  double nccl_us;   /* time in NCCL's registration calls of its batch */
};
enum ng_decision {
#define NG_DECISION(id, name, meaning) NG_D_##id,
#include "decisions.def"
#undef NG_DECISION
  NG_NDECISIONS
};
const char* ng_decision_name(int d);
/* Handle n window registrations (n == 1 outside a group; the queue of a group at its end): cut into steps
 * of one registration per communicator, in the order of the calls (docs/DESIGN.md, the agreement channel). */
ncclResult_t ng_policy_register(struct ng_regreq* reqs, int n);
/* Checks at the call: a reason that must be answered at once without NCCL (NULL, destroyed or
 * broken communicator), else NG_R_OK; problems of the other arguments go to r->arg_reason. */
int ng_check_reg_args(struct ng_regreq* r);
/* Log one registration request with its outcome. */
void ng_log_reg(const struct ng_regreq* r, int level, const char* msg);

/* Log one lifecycle call (comm may be NULL). */
void ng_log_call(int level, const char* fn, ncclComm_t comm, ncclResult_t res, double t0, int decision, int reason,
                 const char* msg);
/* A call ncclguard passed to NCCL: logged with NCCL's result (decision pass, reason ok or nccl_error,
 * then NCCL's last error text when `why`), counted as an error when NCCL failed. */
void ng_log_passed(const char* fn, ncclComm_t comm, ncclResult_t res, double t0, int why);
/* A call on a communicator that is already destroyed or aborted: refused (NCCL would use freed memory). */
ncclResult_t ng_refuse_gone(const char* fn, ncclComm_t comm, double t0);
/* A call on a communicator with a call of ncclguard's still blocked inside NCCL (stuck): not passed to
 * NCCL (concurrent calls on one communicator are undefined there); logged; returns `res`. */
ncclResult_t ng_refuse_stuck(const char* fn, ncclComm_t comm, double t0, ncclResult_t res);

/* Every wrapper starts here: 1 when the call must go straight to NCCL (NCCLGUARD_DISABLE, or
 * NCCL calling its own public symbol from inside a call we made), else counts the call. */
static inline int ng_bypass(void) {
  ng_init();
  if (ng_cfg.disable || ng_tls.in_nccl) return 1;
  ng_stat_add(NG_ST_CALLS, 1);
  return 0;
}

#endif
