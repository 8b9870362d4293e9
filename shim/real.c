/* Finding the real NCCL. Each function is looked up once, as `pncclX` first (NCCL's strong
 * symbol, so NCCL's own calls through its public `ncclX` never loop back), then `ncclX`, in (a library
 * found first that is no copy of NCCL and defines `ncclX` or `pncclX` to forward it, a tracer, is called:
 * same_library):
 *   1. NCCLGUARD_NCCL_LIB, when set (loaded RTLD_LOCAL if not loaded yet);
 *   2. dlsym(RTLD_NEXT): the global scope after us (programs linked against libnccl);
 *   3. a libnccl already loaded RTLD_LOCAL (PyTorch, docs/PYTORCH.md §2): dlopen("libnccl.so.2", RTLD_NOLOAD),
 *      then every loaded object whose name starts with "libnccl" (dl_iterate_phdr).
 * A symbol that resolves into this library itself is refused. Lookups use the real dlsym (ng_dl_sym),
 * never ncclguard's own (dlsym.c). Nothing here ever exits. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "guard.h"

const char* const ng_real_names[NG_NREAL] = {
#define NG_NAME(ret, f, params) #f,
    NG_NCCL_PROTOS(NG_NAME) NG_NCCL_DEVPROTOS(NG_NAME)
#undef NG_NAME
};

static void* cache[NG_NREAL];
static int missing_logged[NG_NREAL];
static void* lib_handle;      /* the libnccl found by steps 1 or 3 */
static char lib_path[PATH_MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int is_ours(void* sym) {
  Dl_info a, b;
  if (!dladdr(sym, &a) || !dladdr((void*)&ng_real, &b)) return 0;
  return a.dli_fbase == b.dli_fbase;
}

static char source_msg[2 * PATH_MAX + 160];
static int source_logged;

/* Remembered here, logged by ng_log_source() once the rank is known (a first line written
 * before would name a per-rank log file %r without the rank). */
static void* pin_base; /* the base of the libnccl every function comes from (same_library) */
static void note_path(void* sym, const char* how) {
  Dl_info info, p;
  if (lib_path[0] || !dladdr(sym, &info) || !info.dli_fname) return;
  if (pin_base && info.dli_fbase != pin_base && dladdr(pin_base, &p) && p.dli_fname) {
    /* a forwarding library's function (a tracer found first): NCCL is the library pinned */
    snprintf(lib_path, sizeof lib_path, "%s", p.dli_fname);
    snprintf(source_msg, sizeof source_msg, "real NCCL functions come from %s; %s, found first (via %s), defines "
             "some of them to forward them and is called for those", lib_path, info.dli_fname, how);
    return;
  }
  snprintf(lib_path, sizeof lib_path, "%s", info.dli_fname);
  snprintf(source_msg, sizeof source_msg, "real NCCL functions come from %s (found via %s)", lib_path, how);
}

void ng_log_source(void) {
  if (ng_cfg.disable || !source_msg[0] || __atomic_exchange_n(&source_logged, 1, __ATOMIC_RELAXED)) return;
  int v = ng_nccl_version();
  ng_log_msg(NG_LOG_INFO, -1, "resolve", "%s: %s: NCCL %d (%d.%d.%d)", ng_version(), source_msg, v, v / 10000,
             v / 100 % 100, v % 100);
}

static void* lookup(void* handle, const char* name) {
  char pname[128];
  snprintf(pname, sizeof pname, "p%s", name);
  void* s = ng_dl_sym(handle, pname);
  if (s && !is_ours(s)) return s;
  s = ng_dl_sym(handle, name);
  if (s && !is_ours(s)) return s;
  return NULL;
}

/* Loaded objects named libnccl*.so*: paths collected first, dlopen'ed after the walk (never
 * inside dl_iterate_phdr, which holds the loader's lock). */
struct walk { char paths[8][PATH_MAX]; int n; };
static int walk_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct walk* w = data;
  const char* path = info->dlpi_name;
  if (!path || !*path || w->n >= 8) return 0;
  const char* base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, "libnccl", 7) != 0 || !strstr(base, ".so")) return 0;
  snprintf(w->paths[w->n++], PATH_MAX, "%s", path);
  return 0;
}

static void* walk_loaded(void) {
  static struct walk w; /* large: not on the caller's stack; used under `lock` */
  w.n = 0;
  dl_iterate_phdr(walk_cb, &w);
  for (int i = 0; i < w.n; i++) {
    void* h = dlopen(w.paths[i], RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    if (ng_dl_sym(h, "pncclGetVersion") || ng_dl_sym(h, "ncclGetVersion")) return h;
    dlclose(h);
  }
  return NULL;
}

/* Steps 1 and 3: a handle on a libnccl, remembered once found. Called with `lock` held. */
static void* find_lib(const char** how) {
  if (lib_handle) { *how = "loaded libnccl"; return lib_handle; }
  static int tried_explicit;
  if (ng_cfg.nccl_lib[0] && !tried_explicit) {
    tried_explicit = 1;
    lib_handle = dlopen(ng_cfg.nccl_lib, RTLD_NOW | RTLD_LOCAL);
    if (!lib_handle) {
      ng_log_msg(NG_LOG_WARN, -1, "resolve", "NCCLGUARD_NCCL_LIB=%s cannot be loaded (%s); looking for the "
                 "libnccl of the process instead", ng_cfg.nccl_lib, dlerror());
    } else {
      *how = "NCCLGUARD_NCCL_LIB";
      return lib_handle;
    }
  }
  static const char* sonames[] = {"libnccl.so.2", "libnccl.so"};
  for (int i = 0; i < 2 && !lib_handle; i++) lib_handle = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
  if (!lib_handle) lib_handle = walk_loaded();
  *how = "loaded libnccl (RTLD_NOLOAD)";
  return lib_handle;
}

/* Every function comes from one library: the one the first resolved function came from. With two
 * copies of libnccl in a process (say an old one first in the global scope and a newer one after
 * it), a function the first lacks must not be taken from the second: it would be called with the
 * first one's communicators. Called with `lock` held. */
static void* pin_handle;
static void pin(void* base, const char* fname) {
  __atomic_store_n(&pin_base, base, __ATOMIC_RELEASE); /* read without the lock: ng_real_pinned */
  pin_handle = fname ? dlopen(fname, RTLD_LAZY | RTLD_NOLOAD) : NULL;
}
static void* same_library(void* f, const char* name) {
  Dl_info di;
  if (!dladdr(f, &di)) return f;
  if (ng_addr_in_nccl(f) == 0 && !ng_cfg.nccl_lib[0]) {
    /* A library that defines this function to forward it, found before NCCL (a tracer or profiler preloaded
     * after ncclguard): its function is called, as the application's call would reach it without ncclguard,
     * and it pins nothing: NCCL is the libnccl the process loaded, pinned when found, and a function the
     * tracer does not define comes from there */
    if (!pin_base) {
      const char* how;
      void* h = find_lib(&how);
      void* g = h ? lookup(h, name) : NULL;
      Dl_info dn;
      if (g && dladdr(g, &dn) && ng_addr_in_nccl(g) == 1) pin(dn.dli_fbase, dn.dli_fname);
    }
    return f;
  }
  if (!pin_base) {
    pin(di.dli_fbase, di.dli_fname);
    return f;
  }
  if (di.dli_fbase == pin_base) return f;
  void* g = pin_handle ? lookup(pin_handle, name) : NULL;
  return g && dladdr(g, &di) && di.dli_fbase == pin_base ? g : NULL;
}

void* ng_real(enum ng_real_id id) {
  int k = ng_cur_lib();
  if (k > 0) return ng_lib_fn(k, id); /* a call through another copy's entry points */
  return ng_real_primary(id);
}

void* ng_real_primary(enum ng_real_id id) {
  void* f = __atomic_load_n(&cache[id], __ATOMIC_ACQUIRE);
  if (f) return f;
  pthread_mutex_lock(&lock);
  const char* how = "RTLD_NEXT";
  if (!cache[id]) {
    /* An explicit NCCLGUARD_NCCL_LIB first; if it cannot be loaded (warned), the usual order. */
    void* h = ng_cfg.nccl_lib[0] ? find_lib(&how) : NULL;
    f = h ? lookup(h, ng_real_names[id]) : NULL;
    if (!f) {
      how = "RTLD_NEXT";
      /* A library after ncclguard that defines the public name to forward it (a tracer or profiler preloaded
       * after ncclguard; most define ncclX alone) is called, as the application's call reaches it without
       * ncclguard; NCCL's own pncclX is taken only from a copy of NCCL */
      void* t = ng_dl_sym(RTLD_NEXT, ng_real_names[id]);
      f = t && !is_ours(t) && ng_addr_in_nccl(t) == 0 ? t : lookup(RTLD_NEXT, ng_real_names[id]);
    }
    if (!f) {
      h = find_lib(&how);
      f = h ? lookup(h, ng_real_names[id]) : NULL;
    }
    /* ncclMemAlloc takes no communicator: whichever library answers it first (a tracer preloaded after
     * ncclguard that defines other functions and not this one leaves it to libnccl, as without ncclguard);
     * it neither pins the library nor names it */
    int any_lib = id == NG_ID_ncclMemAlloc;
    f = f && !any_lib ? same_library(f, ng_real_names[id]) : f;
    if (f) {
      if (!any_lib) note_path(f, how);
      __atomic_store_n(&cache[id], f, __ATOMIC_RELEASE);
    }
  }
  f = cache[id];
  pthread_mutex_unlock(&lock);
  return f;
}

const void* ng_real_pinned(void) { return __atomic_load_n(&pin_base, __ATOMIC_ACQUIRE); }

const void* ng_real_lib_base(void) {
  (void)ng_real_primary(NG_ID_ncclGetVersion); /* every NCCL has it: pins the library */
  pthread_mutex_lock(&lock);
  const void* b = pin_base;
  pthread_mutex_unlock(&lock);
  return b;
}

const char* ng_real_lib_path(void) {
  (void)ng_real_lib_base();
  return lib_path; /* written once, under the lock, with pin_base */
}

ncclResult_t ng_missing(enum ng_real_id id) {
  if (!__atomic_exchange_n(&missing_logged[id], 1, __ATOMIC_RELAXED))
    ng_log_msg(NG_LOG_WARN, -1, ng_real_names[id],
               "cannot find the real %s in this process (libnccl not loaded, or a NCCL version without it); "
               "returning ncclInvalidUsage. Fix: load libnccl before calling it, or set "
               "NCCLGUARD_NCCL_LIB=/path/to/libnccl.so.2",
               ng_real_names[id]);
  ng_stat_add(NG_ST_ERRORS, 1);
  return ncclInvalidUsage;
}

int ng_nccl_version(void) {
  int k = ng_cur_lib();
  if (k > 0) return ng_lib_version(k);
  static int version = -1;
  int v = __atomic_load_n(&version, __ATOMIC_RELAXED);
  if (v >= 0) return v;
  int got = 0;
  ncclResult_t r;
  NG_CALL(r, ncclGetVersion, &got);
  v = r == ncclSuccess ? got : 0;
  if (r == ncclSuccess) __atomic_store_n(&version, v, __ATOMIC_RELAXED);
  return v;
}

const char* ng_result_name(ncclResult_t r) {
  static const char* n[] = {"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
                            "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
                            "ncclTimeout" /* 2.30.3+ */};
  return (unsigned)r < sizeof n / sizeof n[0] ? n[r] : "ncclUnknownResult";
}

const char* ng_last_error(ncclComm_t comm) {
  __typeof__(&ncclGetLastError) f = (__typeof__(&ncclGetLastError))ng_real(NG_ID_ncclGetLastError);
  if (!f) return "";
  ng_tls.in_nccl++;
  const char* s = f(comm);
  ng_tls.in_nccl--;
  return s ? s : "";
}

/* fork(): the resolution lock is taken before and released after, in both processes; the child keeps what
 * was resolved (the same libraries are mapped there). */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_release(void) { pthread_mutex_unlock(&lock); }
NG_ON_FORK(NG_FORK_REAL, fork_prepare, fork_release, fork_release)
