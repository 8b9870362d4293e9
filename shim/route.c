/* Two or more copies of libnccl in one process (issue 22).
 *
 * A process can hold two copies of libnccl: PyTorch's, and one that a binding loaded by path (vLLM's
 * VLLM_NCCL_SO_PATH, a C library with its own). real.c pins one of them, the primary. Each other copy
 * gets an index k > 0 here, its own table of functions (looked up on its own handle) and its own NCCL
 * version; ncclguard's entry points for copy k (ng_lib_entry) set ng_tls.lib = k for the length of the
 * call and run the same wrapper, whose calls into NCCL (ng_real, ng_nccl_version) then answer copy k's,
 * so copy k's communicators are guarded with copy k's own functions. ncclguard's own threads that call
 * NCCL for a communicator (the agreement launch, the watchdog, the bounded abort) carry the index along.
 *
 * Which library a call belongs to is decided by its caller (the wrapper's return address), in NG_FOREIGN,
 * the first statement of every wrapper (ng_foreign):
 * - a caller inside a libnccl other than the one the current call runs with: that library's own
 *   function, untouched. NCCL calls some of its own public functions through its PLT (docs/NCCL.md §6:
 *   ncclCommDestroy deregisters what is still registered, ncclCommInitAll opens a group); in a copy that
 *   is not first in the global scope they bind to ncclguard's wrappers. (Inside a guarded call of copy
 *   k, copy k's own calls are NCCL's own calls of the running call, handled as the primary's are.)
 * - any other caller that reached a wrapper through the global names (a library linked against libnccl,
 *   as libtorch_cuda.so is): the libnccl that caller binds its collectives to, as the dynamic linker
 *   binds them (the global scope first, then the caller's own dependencies): its communicators are that
 *   library's, so the call runs through that library's entry point (nothing changes when it is the
 *   primary, the usual case). A caller with no libnccl in reach (ctypes, nccl4py, which hold pointers
 *   that dlsym.c gave them) keeps the primary.
 * - the entry points and the rest of ncclguard itself: nothing changes.
 *
 * The question is asked on every wrapped call, ncclGroupStart/End included, so the answer is cached: the
 * address ranges of the objects seen as callers (each object's PT_LOAD span) with their answer. A hit is a
 * short scan of a few ranges, without a lock; a miss (the first call from an object) walks the loaded
 * objects (dl_iterate_phdr) and looks one symbol up, outside any lock of ncclguard's, then records the
 * answer under a mutex that is never held across a call into the dynamic linker. An object that is
 * unloaded and whose addresses are reused by another keeps its first answer (a libnccl is not unloaded
 * while its communicators live). At most NG_NLIBS - 1 other copies get an index; any further copy is not
 * guarded: its calls that reach ncclguard go to its own functions untouched, as without ncclguard, never to
 * another copy (one WARN names it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "guard.h"


/* Library indices: 0 the primary (real.c), k > 0 libs[k], and: */
#define NG_NOT_NCCL (-1) /* not a libnccl; for a caller's scope: no libnccl in reach */
#define NG_LIB_FULL (-2) /* a libnccl that found no free index */

/* guard.h's struct ng_route_range: lib is the object's own index or NG_NOT_NCCL; scope, for an object that
 * is not a libnccl, the library its calls of NCCL bind to (NG_NOT_NCCL: none) */
#define NG_NRANGES 256
struct ng_route_range ng_route_ranges[NG_NRANGES];
static int nranges; /* entries below it are complete (release/acquire) */
int ng_route_hint = -1;
_Static_assert(NG_NOT_NCCL == -1, "guard.h's ng_route_range says -1");

/* An answer that holds whatever the thread runs with: not a libnccl, bound to the primary or to none. */
static int quiet(const struct ng_route_range* r) { return r->lib == NG_NOT_NCCL && (r->scope == NG_NOT_NCCL || r->scope == 0); }

struct flib {
  uintptr_t lo, hi;
  char path[PATH_MAX];
  void* handle;
  void* fn[NG_NREAL];
  int version; /* its ncclGetVersion, 0 until known */
};
static struct flib libs[NG_NLIBS]; /* libs[0] unused: the primary is real.c's */
static int nlibs = 1;
int ng_route_others; /* nlibs - 1, for ng_cur_lib() */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* ranges and libs: never held across a dl* call */

struct find {
  uintptr_t addr;
  int found;
  uintptr_t lo, hi;
  int is_nccl;
  int needs_nccl; /* links against a libnccl (a DT_NEEDED entry naming one) */
  char path[PATH_MAX];
};

static int is_libnccl_name(const char* base) { return ng_startswith(base, "libnccl") && !ng_startswith(base, "libncclguard"); }

/* 1 when the object's dynamic section has a DT_NEEDED entry naming a libnccl: it calls NCCL through its own
 * imports (libtorch_cuda.so, nccl-tests), not through pointers it was given (ctypes' libffi, nccl4py) */
static int needs_libnccl(uintptr_t base, const ElfW(Dyn)* dyn) {
  const char* strtab = NULL;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_STRTAB) strtab = (const char*)(d->d_un.d_ptr < base ? d->d_un.d_ptr + base : d->d_un.d_ptr);
  if (!strtab) return 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_NEEDED && is_libnccl_name(ng_basename(strtab + d->d_un.d_val))) return 1;
  return 0;
}

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
  /* A copy of NCCL is named libnccl* and defines pncclGetVersion (every release, and the fakes): the name
   * alone is not enough (libnccluser.so links against NCCL), nor the symbols (a library that stands between
   * ncclguard and NCCL, defining NCCL's functions to forward them: tests/progs/notready.c, a tracer) */
  f->is_nccl = is_libnccl_name(base) && dyn && ng_elf_sym(info->dlpi_addr, dyn, "pncclGetVersion");
  f->needs_nccl = !f->is_nccl && dyn && needs_libnccl(info->dlpi_addr, dyn);
  snprintf(f->path, sizeof f->path, "%s", path);
  return 1;
}

/* The object holding addr. 0 when none does (generated code). */
static int find_object(uintptr_t addr, struct find* f) {
  memset(f, 0, sizeof *f);
  f->addr = addr;
  dl_iterate_phdr(find_cb, f);
  return f->found;
}

static int cached(uintptr_t a, struct ng_route_range* out) {
  int n = __atomic_load_n(&nranges, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (a - ng_route_ranges[i].lo < ng_route_ranges[i].hi - ng_route_ranges[i].lo) {
      *out = ng_route_ranges[i];
      if (quiet(out) && __atomic_load_n(&ng_route_hint, __ATOMIC_RELAXED) != i)
        __atomic_store_n(&ng_route_hint, i, __ATOMIC_RELEASE); /* the next call's fast path */
      return 1;
    }
  return 0;
}

/* Called with `mu` held: record an answer (a full cache just is not extended). */
static void remember(const struct ng_route_range* r) {
  int n = nranges;
  for (int i = 0; i < n; i++)
    if (ng_route_ranges[i].lo == r->lo) return; /* another thread was first */
  if (n < NG_NRANGES) {
    ng_route_ranges[n] = *r;
    __atomic_store_n(&nranges, n + 1, __ATOMIC_RELEASE);
  }
}

/* Called with `mu` held: the index of the libnccl object f (0: it holds the primary), registered if new
 * (*fresh = its index, or NG_LIB_FULL when none is left). */
static int index_of(const struct find* f, uintptr_t pinned, int* fresh) {
  if (pinned >= f->lo && pinned < f->hi) return 0; /* (the primary object: a copy, primary_ok()) */
  for (int k = 1; k < nlibs; k++)
    if (libs[k].lo == f->lo) return k;
  if (nlibs >= NG_NLIBS) {
    *fresh = NG_LIB_FULL;
    return NG_LIB_FULL;
  }
  struct flib* l = &libs[nlibs];
  l->lo = f->lo;
  l->hi = f->hi;
  snprintf(l->path, sizeof l->path, "%s", f->path);
  *fresh = nlibs;
  __atomic_store_n(&nlibs, nlibs + 1, __ATOMIC_RELEASE);
  __atomic_store_n(&ng_route_others, nlibs - 1, __ATOMIC_RELEASE);
  return *fresh;
}

static void log_fresh(int fresh, const char* path) {
  if (ng_cfg.disable) return; /* nothing logged */
  if (fresh > 0)
    ng_log_msg(NG_LOG_INFO, -1, "route",
               "%s is a second libnccl in this process (NCCL %d; ncclguard's first is %s): its communicators are "
               "guarded with its own functions (the calls of its callers, and its functions found on its handle), "
               "and its own internal calls go back to it",
               path, ng_lib_version(fresh), ng_real_lib_path());
  else if (fresh == NG_LIB_FULL)
    ng_log_msg(NG_LOG_WARN, -1, "route",
               "%s is one libnccl too many in this process (ncclguard handles %d): it is not guarded; its calls "
               "that reach ncclguard go to its own functions untouched, never to another libnccl",
               path, NG_NLIBS);
}

/* 1 when addr lies in a copy of NCCL (named libnccl*, defining pncclGetVersion), 0 in another object (a
 * tracer or other library that defines NCCL's functions to forward them), -1 in none (generated code). */
int ng_addr_in_nccl(const void* addr) {
  struct find f;
  if (!find_object((uintptr_t)addr, &f)) return -1;
  return f.is_nccl;
}

/* The index of the libnccl that holds addr (a function found by a lookup), registering it; NG_NOT_NCCL
 * when addr is not in a libnccl. No lock held on entry. */
static int nccl_index_at(uintptr_t addr, uintptr_t pinned) {
  struct ng_route_range r;
  if (cached(addr, &r)) return r.lib;
  struct find f;
  if (!find_object(addr, &f) || !f.is_nccl) return NG_NOT_NCCL;
  int fresh = 0;
  pthread_mutex_lock(&mu);
  int k = index_of(&f, pinned, &fresh);
  struct ng_route_range nr = {f.lo, f.hi, k, NG_NOT_NCCL};
  remember(&nr);
  pthread_mutex_unlock(&mu);
  log_fresh(fresh, f.path);
  return k;
}

/* The library that an object which is not a libnccl binds its calls of NCCL to, as the dynamic linker does:
 * the global scope first, then the object's own dependencies (a library loaded RTLD_LOCAL that needs
 * libnccl). ncclAllReduce: never defined by ncclguard, always by NCCL. Only for an object that links
 * against a libnccl: one that calls through pointers (ctypes' libffi, nccl4py) holds what dlsym.c gave it,
 * which already names its library. No lock held. */
static void* scope_sym(const struct find* f) {
  void* s = ng_dl_sym(RTLD_DEFAULT, "ncclAllReduce");
  if (!s && f->path[0]) {
    void* h = dlopen(f->path, RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      s = ng_dl_sym(h, "ncclAllReduce");
      dlclose(h);
    }
  }
  return s;
}
static int scope_of(const struct find* f, uintptr_t pinned) {
  if (!f->needs_nccl) return NG_NOT_NCCL;
  void* s = scope_sym(f);
  return s ? nccl_index_at((uintptr_t)s, pinned) : NG_NOT_NCCL;
}

static __thread int busy;

/* 1 when the object ncclguard forwards to (real.c's pin) is itself a copy of NCCL; -1 when it is something
 * else, a library standing between ncclguard and NCCL (it defines NCCL's functions and forwards them): then
 * the copy behind it cannot be told from another, and nothing is routed (every caller runs with the
 * primary, as without this file); 0 until known. */
static int primary_state;
static int primary_ok(uintptr_t pinned) {
  int s = __atomic_load_n(&primary_state, __ATOMIC_ACQUIRE);
  if (s || !pinned) return s > 0;
  struct find f;
  s = find_object(pinned, &f) && f.is_nccl ? 1 : -1;
  __atomic_store_n(&primary_state, s, __ATOMIC_RELEASE);
  if (s < 0 && !ng_cfg.disable)
    ng_log_msg(NG_LOG_INFO, -1, "route", "the NCCL functions ncclguard forwards to come from %s, which is not a copy "
               "of NCCL (a library that forwards them): every call goes there, and no second copy of libnccl is told "
               "apart", ng_real_lib_path());
  return s > 0;
}

/* The cached answer for the object holding a (a caller), computing it on a miss. 0 when there is none. */
static int answer_for(uintptr_t a, struct ng_route_range* r) {
  if (cached(a, r)) return 1;
  /* a miss: the first call from this object. Resolution (the pin) may call back into ncclguard's own
   * wrappers through NCCL's internal calls: those get no answer (nothing changes) meanwhile. */
  if (busy) return 0;
  busy = 1;
  ng_init(); /* the configuration first: NCCLGUARD_NCCL_LIB chooses the primary */
  uintptr_t pinned = (uintptr_t)ng_real_lib_base();
  int ok = 0;
  struct find f;
  if (pinned) { /* (no primary yet: decide again later) */
    ok = 1;
    if (!find_object(a, &f) || !primary_ok(pinned)) {
      /* quiet: code outside any object (generated: its page), or nothing is routed at all */
      uintptr_t page = a & ~(uintptr_t)4095;
      *r = f.found ? (struct ng_route_range){f.lo, f.hi, NG_NOT_NCCL, NG_NOT_NCCL}
                   : (struct ng_route_range){page, page + 4096, NG_NOT_NCCL, NG_NOT_NCCL};
    } else if (f.is_nccl) {
      *r = (struct ng_route_range){f.lo, f.hi, nccl_index_at(a, pinned), NG_NOT_NCCL}; /* (remembered there) */
      ok = r->lib != NG_NOT_NCCL;
    } else {
      int sc = scope_of(&f, pinned);
      *r = (struct ng_route_range){f.lo, f.hi, NG_NOT_NCCL, sc};
      if (sc > 0 && !ng_cfg.disable)
        ng_log_msg(NG_LOG_INFO, -1, "route", "%s binds its calls of NCCL to %s: its communicators are that "
                   "library's, and its calls to ncclguard run with that library's functions",
                   *f.path ? f.path : "the program", ng_lib_path(sc));
    }
    if (ok && r->lib == NG_NOT_NCCL) {
      pthread_mutex_lock(&mu);
      remember(r);
      pthread_mutex_unlock(&mu);
    }
  }
  busy = 0;
  return ok;
}

/* Copy k's own function: pnccl<X> first (never a wrapper), then ncclX, each looked up on its own handle
 * and kept only if it lies inside it. No lock: racing threads store the same answer. */
static void* lib_fn(struct flib* l, enum ng_real_id id) {
  void* f = __atomic_load_n(&l->fn[id], __ATOMIC_ACQUIRE);
  if (f) return f;
  void* h = __atomic_load_n(&l->handle, __ATOMIC_ACQUIRE);
  if (!h) {
    h = dlopen(l->path, RTLD_LAZY | RTLD_NOLOAD);
    void* none = NULL;
    if (h && !__atomic_compare_exchange_n(&l->handle, &none, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      dlclose(h);
      h = none;
    }
  }
  char pname[128];
  snprintf(pname, sizeof pname, "p%s", ng_real_names[id]);
  for (int i = 0; i < 2 && !f && h; i++) {
    void* s = ng_dl_sym(h, i ? ng_real_names[id] : pname);
    if (s && (uintptr_t)s >= l->lo && (uintptr_t)s < l->hi) f = s;
  }
  if (f) __atomic_store_n(&l->fn[id], f, __ATOMIC_RELEASE);
  return f;
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

static void* entry_of(int k, enum ng_real_id id);

static void* missing(enum ng_real_id id, int lib) {
  static int logged[NG_NREAL];
  if (!__atomic_exchange_n(&logged[id], 1, __ATOMIC_RELAXED))
    ng_log_msg(NG_LOG_WARN, -1, ng_real_names[id],
               "a call of %s that belongs to %s cannot be given to that library's own %s, and never to another "
               "libnccl's: returning ncclInvalidUsage",
               ng_real_names[id], lib == NG_LIB_FULL ? "a libnccl beyond ncclguard's limit" : ng_lib_path(lib), ng_real_names[id]);
  return NG_FOREIGN_MISSING;
}

/* A libnccl beyond the limit has no index and no table of functions: its own function `id` (pnccl<X> first,
 * then ncclX, kept only if it lies inside it) is looked up on its handle at each call, outside any lock.
 * Rare: that copy's internal calls of its public functions, and the calls of a library linked against it.
 * `in` is an address inside the copy (a caller's, or the collective its caller binds to). */
static void* full_fn(uintptr_t in, enum ng_real_id id) {
  struct find f;
  if (!find_object(in, &f) || !f.is_nccl || !f.path[0]) return NULL;
  void* h = dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return NULL;
  char pname[128];
  snprintf(pname, sizeof pname, "p%s", ng_real_names[id]);
  void* fn = NULL;
  for (int i = 0; i < 2 && !fn; i++) {
    void* s = ng_dl_sym(h, i ? ng_real_names[id] : pname);
    if (s && (uintptr_t)s >= f.lo && (uintptr_t)s < f.hi) fn = s;
  }
  dlclose(h);
  return fn;
}
/* The same for a caller that binds its calls of NCCL to a libnccl beyond the limit. */
static void* full_scope_fn(uintptr_t caller, enum ng_real_id id) {
  struct find f;
  void* s = find_object(caller, &f) ? scope_sym(&f) : NULL;
  return s ? full_fn((uintptr_t)s, id) : NULL;
}

void* ng_foreign(const void* ra, enum ng_real_id id) {
  struct ng_route_range r;
  if (!answer_for((uintptr_t)ra, &r)) return NULL;
  if (ng_cfg.disable) { /* pure pass-through: each call to the copy it belongs to, as without ncclguard */
    int k = r.lib != NG_NOT_NCCL ? r.lib : r.scope;
    if (k == NG_LIB_FULL) {
      void* f = r.lib == NG_LIB_FULL ? full_fn((uintptr_t)ra, id) : full_scope_fn((uintptr_t)ra, id);
      return f ? f : missing(id, k);
    }
    return k > 0 ? ng_lib_fn(k, id) : NULL;
  }
  if (r.lib != NG_NOT_NCCL) { /* called from inside a libnccl: its own call */
    if (r.lib == ng_cur_lib()) return NULL; /* of the library this call runs with */
    void* f = r.lib == NG_LIB_FULL ? full_fn((uintptr_t)ra, id) : r.lib == 0 ? ng_real_primary(id) : ng_lib_fn(r.lib, id);
    return f ? f : missing(id, r.lib);
  }
  /* a caller that binds its NCCL calls to another copy than the primary, through the global names */
  if (r.scope == NG_NOT_NCCL || r.scope == 0 || ng_cur_lib() != 0) return NULL;
  if (r.scope == NG_LIB_FULL) { /* not guarded: that copy's own function, untouched */
    void* f = full_scope_fn((uintptr_t)ra, id);
    return f ? f : missing(id, r.scope);
  }
  void* e = entry_of(r.scope, id);
  return e ? e : missing(id, r.scope);
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
  X(SELF, ncclMemAlloc, (void** a, size_t b), (a, b))                                                     \
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
  uintptr_t pinned = (uintptr_t)ng_real_lib_base();
  int k = pinned && primary_ok(pinned) ? nccl_index_at((uintptr_t)found, pinned) : NG_NOT_NCCL;
  if (k <= 0) return NULL;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (ng_streq(entries[i].name, name)) return entries[i].fn[k];
  return NULL;
}

/* Copy k's entry point for the wrapped function id (NULL: not a wrapped function). */
static void* entry_of(int k, enum ng_real_id id) {
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (ng_streq(entries[i].name, ng_real_names[id])) return entries[i].fn[k];
  return NULL;
}
#else
static void* entry_of(int k, enum ng_real_id id) {
  (void)k, (void)id;
  return NULL;
}
#endif

/* fork(): the lock of the ranges and libraries is taken before and released after, in both processes; the
 * child keeps what it knows (the same objects are mapped there). */
static void fork_prepare(void) { pthread_mutex_lock(&mu); }
static void fork_release(void) { pthread_mutex_unlock(&mu); }
NG_ON_FORK(NG_FORK_ROUTE, fork_prepare, fork_release, fork_release)
