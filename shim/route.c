/* Calls that belong to another libnccl (issue 22).
 *
 * A process can hold two copies of libnccl: PyTorch's, and one that a binding loaded by path (vLLM's
 * VLLM_NCCL_SO_PATH, a C program's dlopen). ncclguard forwards to one of them (real.c: the pinned
 * one). NCCL calls some of its own public functions through its PLT (docs/NCCL.md §6: ncclCommDestroy
 * calls ncclCommWindowDeregister and ncclCommDeregister for what is still registered; ncclCommInitAll
 * calls ncclGroupStart): in the other copy those calls bind to the first definition of the global
 * scope, which under LD_PRELOAD is ncclguard's wrapper. Forwarding them to the pinned copy would run
 * one library's code on the other's communicator (NCCL alone binds them to the other copy itself
 * when no libnccl is in the global scope: both RTLD_LOCAL, as PyTorch and ctypes load them).
 *
 * So every wrapper first asks ng_foreign() about its caller (its return address): a caller inside a
 * libnccl other than the pinned one gets that library's own pnccl function, called with the same
 * arguments, untouched and not counted (NG_FOREIGN, guard.h). One INFO line names each such library.
 *
 * The question is asked on every wrapped call, ncclGroupStart/End included, so the answer is cached:
 * the address ranges of the objects seen as callers (each object's PT_LOAD span), each marked "a
 * foreign libnccl" or not. A hit is a short scan of a few ranges, without a lock; a miss (the first
 * call from an object) walks the loaded objects once (dl_iterate_phdr) under a mutex. An object that
 * is unloaded and whose addresses are reused by another keeps its first answer (a libnccl is not
 * unloaded while its communicators live). */
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
  int lib; /* 0: not a foreign libnccl; k > 0: libs[k - 1] */
};
#define NG_NRANGES 64
static struct range ranges[NG_NRANGES];
static int nranges; /* entries below it are complete (release/acquire) */

struct flib {
  uintptr_t lo, hi;
  char path[PATH_MAX];
  void* handle;
  void* fn[NG_NREAL];
  int missing_logged[NG_NREAL];
};
#define NG_NLIBS 8
static struct flib libs[NG_NLIBS];
static int nlibs;
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

/* Called with `mu` held. The lib index (0: not foreign) of the object holding addr; cached. */
static int classify(uintptr_t addr, uintptr_t pinned, int* fresh) {
  int n = __atomic_load_n(&nranges, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (addr - ranges[i].lo < ranges[i].hi - ranges[i].lo) return ranges[i].lib;
  struct find f;
  memset(&f, 0, sizeof f);
  f.addr = addr;
  dl_iterate_phdr(find_cb, &f);
  if (!f.found) return 0; /* not in any object (generated code): not a libnccl */
  int lib = 0;
  if (f.is_nccl) {
    if (!pinned) return 0; /* no libnccl pinned yet: decide again later, uncached */
    if (pinned < f.lo || pinned >= f.hi) {
      for (int k = 0; k < nlibs; k++)
        if (libs[k].lo == f.lo) lib = k + 1;
      if (!lib && nlibs < NG_NLIBS) {
        struct flib* l = &libs[nlibs];
        l->lo = f.lo;
        l->hi = f.hi;
        snprintf(l->path, sizeof l->path, "%s", f.path);
        lib = ++nlibs;
        *fresh = lib;
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

void* ng_foreign(const void* ra, enum ng_real_id id) {
  uintptr_t a = (uintptr_t)ra;
  int lib = -1;
  int n = __atomic_load_n(&nranges, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (a - ranges[i].lo < ranges[i].hi - ranges[i].lo) {
      lib = ranges[i].lib;
      break;
    }
  if (lib < 0) {
    /* a miss: the first call from this object. Resolution (the pin) may call back into ncclguard's own
     * wrappers through NCCL's internal calls: those are answered "not foreign" meanwhile. */
    if (busy) return NULL;
    busy = 1;
    ng_init(); /* the configuration first: NCCLGUARD_NCCL_LIB chooses the pinned library */
    uintptr_t pinned = (uintptr_t)ng_real_lib_base();
    int fresh = 0;
    pthread_mutex_lock(&mu);
    lib = classify(a, pinned, &fresh);
    pthread_mutex_unlock(&mu);
    busy = 0;
    if (fresh)
      ng_log_msg(NG_LOG_INFO, -1, "route",
                 "%s is a second libnccl in this process (ncclguard forwards to %s): its calls that reach "
                 "ncclguard (its own internal calls of its public functions) go to its own functions, "
                 "untouched; its communicators are not guarded",
                 libs[fresh - 1].path, ng_real_lib_path());
  }
  if (lib <= 0) return NULL;
  struct flib* l = &libs[lib - 1];
  void* f = lib_fn(l, id);
  if (f) return f;
  if (!__atomic_exchange_n(&l->missing_logged[id], 1, __ATOMIC_RELAXED))
    ng_log_msg(NG_LOG_WARN, -1, names[id],
               "a call of %s made by %s (a second libnccl) cannot be given to that library's own %s (not found "
               "in it), and never to another libnccl's: returning ncclInvalidUsage",
               names[id], l->path, names[id]);
  return NG_FOREIGN_MISSING;
}

void ng_route_fork_lock(int on) {
  if (on) pthread_mutex_lock(&mu);
  else pthread_mutex_unlock(&mu);
}
