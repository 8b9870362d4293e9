/* Two or more copies of libnccl in one process (issue 22).
 *
 * A process can hold two copies of libnccl: PyTorch's, and one that a binding loaded by path (vLLM's
 * VLLM_NCCL_SO_PATH, a C program's dlopen). real.c pins one of them, the primary: the global names
 * and every call that comes through them go to it. Each other copy gets an index k > 0 here, its own
 * table of functions (looked up on its own handle) and its own NCCL version, and two things follow:
 *
 * 1. Its functions found through ncclguard (dlsym on its handle, the Python package's ctypes hook:
 *    dlsym.c) are entry points of ncclguard for that copy (ng_lib_entry): each sets ng_tls.lib = k for
 *    the length of the call and calls ncclguard's wrapper, whose calls into NCCL (ng_real,
 *    ng_nccl_version) then take the copy's own functions. Its communicators are guarded like the
 *    primary's, never with the primary's functions. ncclguard's own threads that call NCCL for a
 *    communicator (the agreement launch, the watchdog, the bounded abort) carry the index along.
 * 2. NCCL calls some of its own public functions through its PLT (docs/NCCL.md §6: ncclCommDestroy
 *    calls ncclCommWindowDeregister and ncclCommDeregister for what is still registered; ncclCommInitAll
 *    calls ncclGroupStart). In a copy that is not first in the global scope those calls bind to
 *    ncclguard's wrappers (preloaded). So every wrapper first asks ng_foreign() about its caller (its
 *    return address): a caller inside a libnccl other than the one the current call runs with (k, or
 *    the primary) gets that library's own function, untouched. Inside a guarded call of copy k, copy
 *    k's internal calls are NCCL's own calls of the running call, handled as the primary's are.
 *    (NCCL alone binds them to the copy itself when no libnccl is in the global scope, the usual case:
 *    PyTorch and ctypes both load RTLD_LOCAL.)
 *
 * The caller question is asked on every wrapped call, ncclGroupStart/End included, so the answer is
 * cached: the address ranges of the objects seen as callers (each object's PT_LOAD span), each marked
 * with its library index or "not a libnccl". A hit is a short scan of a few ranges, without a lock; a
 * miss (the first call from an object) walks the loaded objects once (dl_iterate_phdr) under a mutex.
 * An object that is unloaded and whose addresses are reused by another keeps its first answer (a
 * libnccl is not unloaded while its communicators live). At most NG_NLIBS - 1 other copies get an
 * index; the calls of any further copy are refused (ncclInvalidUsage, a WARN), never mixed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "guard.h"

static const char* const names[NG_NREAL] = {
#define NG_NAME(ret, f, params) #f,
    NG_NCCL_PROTOS(NG_NAME) NG_NCCL_DEVPROTOS(NG_NAME)
#undef NG_NAME
};

struct range {
  uintptr_t lo, hi;
  int lib; /* NG_NOT_NCCL, NG_LIB_FULL (a libnccl without an index), 0 (the primary) or k > 0: libs[k] */
};
#define NG_NOT_NCCL (-1)
#define NG_LIB_FULL (-2)
#define NG_NRANGES 64
static struct range ranges[NG_NRANGES];
static int nranges; /* entries below it are complete (release/acquire) */

struct flib {
  uintptr_t lo, hi;
  char path[PATH_MAX];
  void* handle;
  void* fn[NG_NREAL];
  int missing_logged[NG_NREAL];
  int version; /* its ncclGetVersion, 0 until known */
};
static struct flib libs[NG_NLIBS]; /* libs[0] unused: the primary is real.c's */
static int nlibs = 1;
static char full_path[PATH_MAX]; /* the last libnccl that found no free index */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

struct find {
  uintptr_t addr;
  int found;
  uintptr_t lo, hi;
  int is_nccl;
  char path[PATH_MAX];
};

static int find_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct find* f = data;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  const void* dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* p = &info->dlpi_phdr[i];
    if (p->p_type == PT_DYNAMIC) dyn = (const void*)(info->dlpi_addr + p->p_vaddr);
    if (p->p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + p->p_vaddr;
    if (a < lo) lo = a;
    if (a + p->p_memsz > hi) hi = a + p->p_memsz;
  }
  if (lo >= hi || f->addr < lo || f->addr >= hi) return 0;
  f->found = 1;
  f->lo = lo;
  f->hi = hi;
  const char* path = info->dlpi_name ? info->dlpi_name : "";
  const char* base = ng_basename(path);
  /* a NCCL defines pncclGetVersion (every release, and the fake); a name is not enough (libnccluser.so) */
  f->is_nccl = !ng_startswith(base, "libncclguard") && dyn && ng_elf_sym(info->dlpi_addr, dyn, "pncclGetVersion");
  snprintf(f->path, sizeof f->path, "%s", *path ? path : "(the program)");
  return 1;
}

/* Called with `mu` held. The library index of the object holding addr (see struct range); cached. A
 * fresh index goes to *fresh. */
static int classify(uintptr_t addr, uintptr_t pinned, int* fresh) {
  int n = __atomic_load_n(&nranges, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (addr - ranges[i].lo < ranges[i].hi - ranges[i].lo) return ranges[i].lib;
  struct find f;
  memset(&f, 0, sizeof f);
  f.addr = addr;
  dl_iterate_phdr(find_cb, &f);
  if (!f.found) return NG_NOT_NCCL; /* not in any object (generated code): not a libnccl */
  int lib = NG_NOT_NCCL;
  if (f.is_nccl) {
    if (!pinned) return NG_NOT_NCCL; /* no primary yet: decide again later, uncached */
    if (pinned >= f.lo && pinned < f.hi) {
      lib = 0;
    } else {
      lib = NG_LIB_FULL;
      for (int k = 1; k < nlibs; k++)
        if (libs[k].lo == f.lo) lib = k;
      if (lib == NG_LIB_FULL && nlibs < NG_NLIBS) {
        struct flib* l = &libs[nlibs];
        l->lo = f.lo;
        l->hi = f.hi;
        snprintf(l->path, sizeof l->path, "%s", f.path);
        lib = nlibs;
        __atomic_store_n(&nlibs, nlibs + 1, __ATOMIC_RELEASE);
        *fresh = lib;
      } else if (lib == NG_LIB_FULL) {
        *fresh = lib;
        snprintf(full_path, sizeof full_path, "%s", f.path);
      }
    }
  }
  if (n < NG_NRANGES) {
    ranges[n] = (struct range){f.lo, f.hi, lib};
    __atomic_store_n(&nranges, n + 1, __ATOMIC_RELEASE);
  }
  return lib;
}

/* The foreign library's own function: pnccl<X> first (never a wrapper), then ncclX, each looked up on
 * its own handle and kept only if it lies inside that library. */
static void* lib_fn(struct flib* l, enum ng_real_id id) {
  void* f = __atomic_load_n(&l->fn[id], __ATOMIC_ACQUIRE);
  if (f) return f;
  pthread_mutex_lock(&mu);
  if (!l->handle) /* the program itself (a NCCL linked in statically, its symbols exported): dlopen(NULL) */
    l->handle = dlopen(strcmp(l->path, "(the program)") ? l->path : NULL, RTLD_LAZY | RTLD_NOLOAD);
  char pname[128];
  snprintf(pname, sizeof pname, "p%s", names[id]);
  for (int i = 0; i < 2 && !f && l->handle; i++) {
    void* s = ng_dl_sym(l->handle, i ? names[id] : pname);
    if (s && (uintptr_t)s >= l->lo && (uintptr_t)s < l->hi) f = s;
  }
  if (f) __atomic_store_n(&l->fn[id], f, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&mu);
  return f;
}

static __thread int busy;

/* The library index of the object holding addr (NG_NOT_NCCL, NG_LIB_FULL, 0, k): the cache, else a walk. */
static int lib_of(uintptr_t a) {
  int n = __atomic_load_n(&nranges, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (a - ranges[i].lo < ranges[i].hi - ranges[i].lo) return ranges[i].lib;
  /* a miss: the first call from this object. Resolution (the pin) may call back into ncclguard's own
   * wrappers through NCCL's internal calls: those are answered "not a libnccl" meanwhile. */
  if (busy) return NG_NOT_NCCL;
  busy = 1;
  ng_init(); /* the configuration first: NCCLGUARD_NCCL_LIB chooses the primary */
  uintptr_t pinned = (uintptr_t)ng_real_lib_base();
  int fresh = 0;
  pthread_mutex_lock(&mu);
  int lib = classify(a, pinned, &fresh);
  pthread_mutex_unlock(&mu);
  if (fresh > 0) {
    int v = ng_lib_version(fresh);
    ng_log_msg(NG_LOG_INFO, -1, "route",
               "%s is a second libnccl in this process (NCCL %d; ncclguard's first is %s): its functions found "
               "through ncclguard (dlsym on its handle, ctypes) are guarded with its own functions, and its own "
               "internal calls go back to it",
               libs[fresh].path, v, ng_real_lib_path());
  } else if (fresh == NG_LIB_FULL) {
    ng_log_msg(NG_LOG_WARN, -1, "route",
               "%s is one libnccl too many in this process (ncclguard handles %d): its calls that reach "
               "ncclguard are refused with ncclInvalidUsage, never given to another libnccl",
               full_path, NG_NLIBS);
  }
  busy = 0;
  return lib;
}

void* ng_lib_fn(int k, enum ng_real_id id) {
  if (k <= 0 || k >= __atomic_load_n(&nlibs, __ATOMIC_ACQUIRE)) return NULL;
  return lib_fn(&libs[k], id);
}

int ng_lib_version(int k) {
  if (k <= 0 || k >= __atomic_load_n(&nlibs, __ATOMIC_ACQUIRE)) return 0;
  struct flib* l = &libs[k];
  int v = __atomic_load_n(&l->version, __ATOMIC_RELAXED);
  if (v) return v;
  ncclResult_t (*gv)(int*) = (ncclResult_t(*)(int*))lib_fn(l, NG_ID_ncclGetVersion);
  int got = 0;
  if (gv) {
    ng_tls.in_nccl++;
    ncclResult_t r = gv(&got);
    ng_tls.in_nccl--;
    if (r != ncclSuccess) got = 0;
  }
  if (got) __atomic_store_n(&l->version, got, __ATOMIC_RELAXED);
  return got;
}

const char* ng_lib_path(int k) {
  return k > 0 && k < __atomic_load_n(&nlibs, __ATOMIC_ACQUIRE) ? libs[k].path : ng_real_lib_path();
}

void* ng_foreign(const void* ra, enum ng_real_id id) {
  int lib = lib_of((uintptr_t)ra);
  if (lib == NG_NOT_NCCL || lib == ng_tls.lib) return NULL; /* not NCCL, or the library this call runs with */
  void* f = lib == NG_LIB_FULL ? NULL : lib == 0 ? ng_real_primary(id) : ng_lib_fn(lib, id);
  if (f) return f;
  const char* path = lib == NG_LIB_FULL ? "a libnccl beyond ncclguard's limit" : ng_lib_path(lib);
  static int logged[NG_NREAL];
  if (!__atomic_exchange_n(&logged[id], 1, __ATOMIC_RELAXED))
    ng_log_msg(NG_LOG_WARN, -1, names[id],
               "a call of %s made by %s cannot be given to that library's own %s, and never to another "
               "libnccl's: returning ncclInvalidUsage",
               names[id], path, names[id]);
  return NG_FOREIGN_MISSING;
}

/* ---- entry points for the other copies --------------------------------------------------------- */
#ifndef NG_NO_IFUNC
/* The wrapped functions with their parameters named, for the entry points (the same list as
 * NG_PLAIN_FUNCS and NG_OPTIONAL_FUNCS: SELF for the plain ones, W for those exported by exports.c). */
#define NG_ENTRY_SIGS(X)                                                                                  \
  X(SELF, ncclCommInitRank, (ncclComm_t * a, int b, ncclUniqueId c, int d), (a, b, c, d))                 \
  X(SELF, ncclCommInitRankConfig, (ncclComm_t * a, int b, ncclUniqueId c, int d, ncclConfig_t* e),        \
    (a, b, c, d, e))                                                                                      \
  X(SELF, ncclCommInitAll, (ncclComm_t * a, int b, const int* c), (a, b, c))                              \
  X(SELF, ncclCommSplit, (ncclComm_t a, int b, int c, ncclComm_t* d, ncclConfig_t* e), (a, b, c, d, e))   \
  X(SELF, ncclCommFinalize, (ncclComm_t a), (a))                                                          \
  X(SELF, ncclCommDestroy, (ncclComm_t a), (a))                                                           \
  X(SELF, ncclCommAbort, (ncclComm_t a), (a))                                                             \
  X(SELF, ncclCommRegister, (const ncclComm_t a, void* b, size_t c, void** d), (a, b, c, d))              \
  X(SELF, ncclCommDeregister, (const ncclComm_t a, void* b), (a, b))                                      \
  X(SELF, ncclGroupStart, (void), ())                                                                     \
  X(SELF, ncclGroupEnd, (void), ())                                                                       \
  X(W, ncclCommInitRankScalable, (ncclComm_t * a, int b, int c, int d, ncclUniqueId* e, ncclConfig_t* f), \
    (a, b, c, d, e, f))                                                                                   \
  X(W, ncclGroupSimulateEnd, (ncclSimInfo_t * a), (a))                                                    \
  X(W, ncclCommShrink, (ncclComm_t a, int* b, int c, ncclComm_t* d, ncclConfig_t* e, int f),              \
    (a, b, c, d, e, f))                                                                                   \
  X(W, ncclCommWindowRegister, (ncclComm_t a, void* b, size_t c, ncclWindow_t* d, int e), (a, b, c, d, e)) \
  X(W, ncclCommWindowDeregister, (ncclComm_t a, ncclWindow_t b), (a, b))                                  \
  X(W, ncclDevCommCreate, (ncclComm_t a, struct ncclDevCommRequirements const* b, struct ncclDevComm* c), \
    (a, b, c))                                                                                            \
  X(W, ncclDevCommDestroy, (ncclComm_t a, struct ncclDevComm const* b), (a, b))                           \
  X(W, ncclCommRevoke, (ncclComm_t a, int b), (a, b))                                                     \
  X(W, ncclCommGrow, (ncclComm_t a, int b, const ncclUniqueId* c, int d, ncclComm_t* e, ncclConfig_t* f), \
    (a, b, c, d, e, f))                                                                                   \
  X(W, ncclCommSuspend, (ncclComm_t a, int b), (a, b))                                                    \
  X(W, ncclCommResume, (ncclComm_t a), (a))

#define NG_TARGET_SELF(f) ng_self_##f
#define NG_TARGET_W(f) ng_w_##f
#define NG_DECL_TARGET(kind, f, params, args) extern __typeof__(f) NG_TARGET_##kind(f);
NG_ENTRY_SIGS(NG_DECL_TARGET)

/* Entry point of copy k for f: ncclguard's wrapper, run with copy k's functions. */
#define NG_ENTRY(k, kind, f, params, args)                                                          \
  static ncclResult_t ng_e##k##_##f params {                                                        \
    int saved_ = ng_tls.lib;                                                                        \
    ng_tls.lib = k;                                                                                 \
    ncclResult_t r_ = NG_TARGET_##kind(f) args;                                                     \
    ng_tls.lib = saved_;                                                                            \
    return r_;                                                                                      \
  }
#define NG_ENTRY1(kind, f, params, args) NG_ENTRY(1, kind, f, params, args)
#define NG_ENTRY2(kind, f, params, args) NG_ENTRY(2, kind, f, params, args)
#define NG_ENTRY3(kind, f, params, args) NG_ENTRY(3, kind, f, params, args)
NG_ENTRY_SIGS(NG_ENTRY1)
NG_ENTRY_SIGS(NG_ENTRY2)
NG_ENTRY_SIGS(NG_ENTRY3)
_Static_assert(NG_NLIBS == 4, "one NG_ENTRY_SIGS(NG_ENTRYk) per other copy");

static const struct { const char* name; void* fn[NG_NLIBS]; } entries[] = {
#define NG_ENTRY_ROW(kind, f, params, args) {#f, {NULL, (void*)&ng_e1_##f, (void*)&ng_e2_##f, (void*)&ng_e3_##f}},
    NG_ENTRY_SIGS(NG_ENTRY_ROW)
#undef NG_ENTRY_ROW
};

void* ng_lib_entry(const void* found, const char* name) {
  int k = lib_of((uintptr_t)found);
  if (k <= 0) return NULL;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (ng_streq(entries[i].name, name)) return entries[i].fn[k];
  return NULL;
}
#endif

void ng_route_fork_lock(int on) {
  if (on) pthread_mutex_lock(&mu);
  else pthread_mutex_unlock(&mu);
}
