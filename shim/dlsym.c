/* dlsym and dlvsym: a lookup on a libnccl's handle of a name ncclguard wraps answers ncclguard's function.
 *
 * Bindings that dlopen libnccl themselves (RTLD_LOCAL: Python's ctypes.CDLL in vLLM's legacy
 * pynccl_wrapper.py, SGLang's pynccl; C programs) and look NCCL's functions up with dlsym(handle, name)
 * would get NCCL's own functions and never reach ncclguard (issue 22). ncclguard defines dlsym and
 * dlvsym; each is a few instructions of assembly (x86_64 only) that ask ng_dlsym_pick() and then either
 * return ncclguard's function or JUMP to the next dlsym/dlvsym (glibc's, or another interposer's
 * preloaded after ncclguard). A jump, not a call: glibc resolves RTLD_NEXT and RTLD_DEFAULT relative to
 * its caller, found from its return address, and that is still the original caller's. So every lookup
 * that is not redirected is answered by glibc exactly as without ncclguard: same pointer, same dlerror
 * state, same caller (RTLD_NEXT of another library, LD_AUDIT's la_symbind).
 *
 * Redirected, all of: a real handle (not RTLD_DEFAULT / RTLD_NEXT); a name of ncclguard.map (the
 * NG_*_FUNCS lists: collectives and everything else go straight to NCCL; the pnccl* twins too: they
 * are NCCL's profiling names, which tools call to reach NCCL itself); NCCLGUARD_DLSYM and not
 * NCCLGUARD_DISABLE; the handle's object is a libnccl (defines pncclCommInitRank, or is named
 * libnccl*, but not libncclguard*: dlinfo RTLD_DI_LINKMAP); glibc finds the name there. What it finds
 * lies in the libnccl ncclguard forwards to (real.c's choice, made now if not yet): ncclguard's
 * function; or in another copy of libnccl: ncclguard's entry point for that copy (route.c), which runs
 * the same wrapper with that copy's own functions; a copy beyond route.c's limit is answered as glibc
 * does, with one INFO line per library. The answer then is the result of glibc's own lookup on that
 * handle, replaced: the last dl* call is that lookup, so dlerror() reads as it would.
 *
 * The next dlsym and dlvsym are found without calling ncclguard's own: glibc's dlsym and dlvsym, read from
 * the ELF tables of libc.so.6 (2.34+) or libdl.so.2 in _r_debug's list of objects (elfsym.c; no
 * dl_iterate_phdr, which TSan intercepts), are asked for dlsym(RTLD_NEXT, "dlsym" / "dlvsym"): the next
 * definition after ncclguard whatever its version (another interposer's, else glibc's), else, by version,
 * dlvsym(RTLD_NEXT, ..., "GLIBC_2.34" or "GLIBC_2.2.5"),
 * for ncclguard. ncclguard's own lookups (real.c, route.c, rules.c, cudrv.c) call glibc's dlsym directly
 * (ng_dl_sym, elfsym.c), not this one. Sanitizer runtimes call dlsym(RTLD_NEXT, ...) while they start, before ncclguard's
 * constructors and before their own interceptors are ready: this file (and elfsym.c) is never
 * instrumented (Makefile), and the path of such a lookup touches no thread-local storage and calls no
 * libc function (str* are intercepted: ng_streq and co., guard.h) and nothing of ncclguard but this. A thread-local guard makes lookups made while ncclguard decides one (its
 * configuration, resolution, log) plain glibc lookups.
 *
 * Not done: other architectures (no interposer: dlsym(handle) reaches NCCL, as before); a handle of a
 * library that depends on libnccl (e.g. libtorch_cuda.so's handle: not a libnccl's); ncclguard loaded
 * after the caller's dlsym was bound (dlopen RTLD_GLOBAL from Python: libc's dlsym comes first in the
 * global scope). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>

#include "guard.h"

/* The interposer's entry points: x86_64 assembly (NG_NO_DLSYM_ASM builds a library without them, as on
 * another architecture: tests/t_dlsym.sh checks the ctypes hook there) */
#if defined(__x86_64__) && !defined(NG_NO_IFUNC) && !defined(NG_NO_DLSYM_ASM)
#define NG_DLSYM_ASM 1
#endif

#ifdef NG_DLSYM_ASM

/* The next dlsym and dlvsym, set once (idempotent: racing threads store the same values). Read by the
 * assembly below: not static. */
void* ng_next_dlsym;
void* ng_next_dlvsym;
extern char ng_dlsym_self[], ng_dlvsym_self[]; /* the entry points below */

static void* not_found(void* handle, const char* name) {
  (void)handle, (void)name;
  return NULL;
}

static void init(void) {
  void* (*gv)(void*, const char*, const char*) = (void* (*)(void*, const char*, const char*))ng_glibc_fn("dlvsym");
  void* (*gs)(void*, const char*) = (void* (*)(void*, const char*))ng_glibc_fn("dlsym");
  /* The next definition in the global scope after ncclguard, whatever its version: another interposer
   * preloaded after ncclguard (a profiler's unversioned dlsym) keeps seeing the lookups it sees without
   * ncclguard. A versioned lookup would skip it (dlvsym takes only the named version), so that is the
   * fallback. */
  void* s = gs ? gs(RTLD_NEXT, "dlsym") : NULL;
  void* v = gs ? gs(RTLD_NEXT, "dlvsym") : NULL;
  static const char* const vers[] = {"GLIBC_2.34", "GLIBC_2.2.5"};
  for (int i = 0; gv && i < 2; i++) {
    if (!s) s = gv(RTLD_NEXT, "dlsym", vers[i]);
    if (!v) v = gv(RTLD_NEXT, "dlvsym", vers[i]);
  }
  if (!s || s == (void*)ng_dlsym_self) s = (void*)gs;
  if (!v || v == (void*)ng_dlvsym_self) v = (void*)gv;
  /* never NULL: the assembly jumps to it. glibc always has dlsym; a process without one gets NULL. */
  __atomic_store_n(&ng_next_dlvsym, v ? v : (void*)not_found, __ATOMIC_RELEASE);
  __atomic_store_n(&ng_next_dlsym, s ? s : (void*)not_found, __ATOMIC_RELEASE);
}

static inline void ensure_init(void) {
  if (!__atomic_load_n(&ng_next_dlsym, __ATOMIC_ACQUIRE)) init();
}

static void* next_sym(void* handle, const char* name) {
  return ((void* (*)(void*, const char*))ng_next_dlsym)(handle, name);
}
static void* next_vsym(void* handle, const char* name, const char* version) {
  return ((void* (*)(void*, const char*, const char*))ng_next_dlvsym)(handle, name, version);
}
#elif !defined(NG_NO_IFUNC) /* another architecture: no interposer; glibc's own dlsym is the next one */
static inline void ensure_init(void) {}
static void* next_sym(void* handle, const char* name) { return dlsym(handle, name); }
static void* next_vsym(void* handle, const char* name, const char* version) { return dlvsym(handle, name, version); }
#endif

#ifndef NG_NO_IFUNC
/* ---- the decision ---------------------------------------------------------------------------- */
struct wrapped { const char* name; void* self; };
#define NG_PLAIN_ENTRY(f) {#f, (void*)&ng_self_##f},
#define NG_OPT_ENTRY(f) {#f, (void*)&ng_w_##f},
#define NG_DECL_SELF(f) extern __typeof__(f) ng_self_##f;
#define NG_DECL_OPT(f) extern __typeof__(f) ng_w_##f;
NG_PLAIN_FUNCS(NG_DECL_SELF)
NG_OPTIONAL_FUNCS(NG_DECL_OPT)
static const struct wrapped table[] = {NG_PLAIN_FUNCS(NG_PLAIN_ENTRY) NG_OPTIONAL_FUNCS(NG_OPT_ENTRY)};

static void* wrapper_of(const char* name) {
  if (!ng_startswith(name, "nccl")) return NULL; /* the common case: one comparison */
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (ng_streq(table[i].name, name)) return table[i].self;
  return NULL;
}

/* A libnccl, not ncclguard: defines pncclCommInitRank (every NCCL does), or is named libnccl*. */
static int is_libnccl(const struct link_map* m) {
  const char* base = m->l_name ? ng_basename(m->l_name) : "";
  if (ng_startswith(base, "libncclguard")) return 0;
  if (ng_startswith(base, "libnccl")) return 1;
  return ng_elf_sym(m->l_addr, m->l_ld, "pncclCommInitRank") != NULL;
}

/* One INFO line per library whose lookups are not redirected (a second libnccl in the process). */
static void note_other(const struct link_map* m, const char* name) {
  static const void* seen[16];
  static int nseen;
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  int fresh = 1;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nseen; i++)
    if (seen[i] == m) fresh = 0;
  if (fresh && nseen < 16) seen[nseen++] = m;
  else fresh = 0;
  pthread_mutex_unlock(&mu);
  if (!fresh) return;
  const char* fwd = ng_real_lib_path();
  ng_log_msg(NG_LOG_INFO, -1, "dlsym",
             "dlsym on the handle of %s (%s): not the libnccl ncclguard forwards to (%s): its lookups are "
             "answered by the dynamic linker, and calls through them do not reach ncclguard",
             m->l_name && *m->l_name ? m->l_name : "(unnamed)", name, *fwd ? fwd : "none found");
}

/* One INFO line at the first redirected lookup. */
static void note_first(const struct link_map* m, const char* name) {
  static int done;
  if (__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED)) return;
  ng_log_msg(NG_LOG_INFO, -1, "dlsym",
             "dlsym on the handle of %s: %s and the other wrapped functions are ncclguard's (NCCLGUARD_DLSYM=0: "
             "NCCL's own)", m->l_name, name);
}

static __thread int busy;

/* The answer "not found" (NULL, with dlerror set by a lookup that failed): the entry points return NULL
 * without jumping. */
#define NG_DLSYM_NULL ((void*)1)

/* A lookup whose scope reaches ncclguard's own exports: RTLD_DEFAULT, the program's handle (dlopen(NULL):
 * Python's ctypes.CDLL(None)), RTLD_NEXT from an object before ncclguard (the program, an earlier preload).
 * For a name some NCCL versions lack, the indirect function (exports.c) answers NULL where the loaded NCCL
 * lacks it; glibc then returns that NULL as a symbol found, with no error for dlerror() (ctypes takes
 * dlerror()'s text for its AttributeError, and crashes on none). So such a lookup is answered here as
 * without ncclguard's export: the next definition after ncclguard (ng_dl_sym(RTLD_NEXT) from inside it), or
 * NULL with dlerror set by that failed lookup (its text names ncclguard as the object looked from). */
static int reaches_exports(void* handle, const void* ra) {
  if (handle == RTLD_DEFAULT || handle == (void*)_r_debug.r_map) return 1;
  if (handle != RTLD_NEXT) return 0;
  Dl_info di;
  struct link_map *caller = NULL, *self = NULL;
  if (!dladdr1(ra, &di, (void**)&caller, RTLD_DL_LINKMAP) || !caller) return 0;
  if (!dladdr1((void*)&reaches_exports, &di, (void**)&self, RTLD_DL_LINKMAP) || !self) return 0;
  for (struct link_map* m = caller->l_next; m; m = m->l_next)
    if (m == self) return 1;
  return 0;
}
static void* absent_export(void* handle, const char* name, const void* ra) {
  if (!reaches_exports(handle, ra) || !ng_export_absent(name)) return NULL; /* glibc's answer stands */
  void* r = ng_dl_sym(RTLD_NEXT, name); /* the last dl* call: dlerror() reads as it leaves it */
  return r ? r : NG_DLSYM_NULL;
}

/* Called by the entry points with their arguments (v: 1 for dlvsym) and the caller's return address.
 * Returns ncclguard's function, another answer, NG_DLSYM_NULL (return NULL), or NULL: the entry point then
 * jumps to the next dlsym/dlvsym with the caller's arguments. */
__attribute__((used)) void* ng_dlsym_pick(void* handle, const char* name, const char* version, int v, const void* ra) {
  ensure_init();
  if (!name) return NULL;
  void* self = wrapper_of(name);
  if (!self || busy) return NULL;
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT || handle == (void*)_r_debug.r_map) {
    /* dlvsym never finds ncclguard's exports (they carry no version): glibc's answer stands */
    if (v) return NULL;
    busy = 1;
    void* a = absent_export(handle, name, ra);
    busy = 0;
    return a;
  }
  busy = 1;
  void* answer = NULL;
  ng_init();
  struct link_map* m = NULL;
  if (ng_cfg.dlsym && !ng_cfg.disable && dlinfo(handle, RTLD_DI_LINKMAP, &m) == 0 && m && is_libnccl(m)) {
    const void* fwd = ng_real_lib_base(); /* may load nothing, but may call dlopen/dlsym: before the lookup */
    /* glibc's own lookup last: the dlerror state is the one it leaves */
    void* r = v ? next_vsym(handle, name, version) : next_sym(handle, name);
    Dl_info di; /* dladdr leaves dlerror alone */
    if (r && dladdr(r, &di) && fwd && di.dli_fbase == fwd) {
      answer = self;
      note_first(m, name);
    } else if (r && (answer = ng_lib_entry(r, name)) != NULL) {
      note_first(m, name); /* another copy of libnccl: ncclguard's entry point for it (route.c) */
    } else if (r) {
      note_other(m, name);
    }
  }
  busy = 0;
  return answer;
}

/* The lookup of the Python package's ctypes hook (python/ncclguard/_boot.py): with ncclguard loaded into a
 * running interpreter (NCCLGUARD=1, `import ncclguard`) rather than preloaded, glibc's dlsym comes first in
 * the global scope and the entry points below are never called; ctypes.CDLL's attribute lookup then asks
 * this function, which answers as they would: ncclguard's function for a wrapped name on the handle of the
 * libnccl ncclguard forwards to, 1 for a name the loaded NCCL lacks asked on a global-scope handle (not
 * found), else NULL (keep glibc's answer). Every architecture. */
NG_API void* ncclguard_handle_sym(void* handle, const char* name) {
  /* a global-scope handle (ctypes.CDLL(None)): glibc finds ncclguard's exports there itself; for a name the
   * loaded NCCL lacks it would answer their NULL without a dlerror() text, so the hook is told (1) and raises
   * AttributeError as ctypes does without ncclguard */
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT || handle == (void*)_r_debug.r_map)
    return name && wrapper_of(name) && ng_export_absent(name) ? NG_DLSYM_NULL : NULL;
  return ng_dlsym_pick(handle, name, NULL, 0, NULL);
}
#endif /* !NG_NO_IFUNC */

#ifdef NG_DLSYM_ASM
/* The entry points. On entry %rsp is 8 mod 16; the arguments are saved across the call to the decision
 * and restored for the jump, so that the next dlsym sees the caller's return address and arguments. */
#define NG_ENDBR ".byte 0xf3, 0x0f, 0x1e, 0xfa\n" /* endbr64: a no-op without CET */
__asm__(".text\n"
        ".globl dlsym\n.type dlsym, @function\n"
        ".globl ng_dlsym_self\n.hidden ng_dlsym_self\n"
        "dlsym:\nng_dlsym_self:\n"
        ".cfi_startproc\n" NG_ENDBR
        "movq (%rsp), %r8\n"
        "pushq %rdi\n.cfi_adjust_cfa_offset 8\n"
        "pushq %rsi\n.cfi_adjust_cfa_offset 8\n"
        "subq $8, %rsp\n.cfi_adjust_cfa_offset 8\n"
        "xorl %edx, %edx\n"
        "xorl %ecx, %ecx\n"
        "call ng_dlsym_pick\n"
        "addq $8, %rsp\n.cfi_adjust_cfa_offset -8\n"
        "popq %rsi\n.cfi_adjust_cfa_offset -8\n"
        "popq %rdi\n.cfi_adjust_cfa_offset -8\n"
        "testq %rax, %rax\n"
        "jz 1f\n"
        "cmpq $1, %rax\n" /* NG_DLSYM_NULL */
        "jne 2f\n"
        "xorl %eax, %eax\n"
        "2: ret\n"
        "1: jmp *ng_next_dlsym(%rip)\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n"

        ".globl dlvsym\n.type dlvsym, @function\n"
        ".globl ng_dlvsym_self\n.hidden ng_dlvsym_self\n"
        "dlvsym:\nng_dlvsym_self:\n"
        ".cfi_startproc\n" NG_ENDBR
        "movq (%rsp), %r8\n"
        "pushq %rdi\n.cfi_adjust_cfa_offset 8\n"
        "pushq %rsi\n.cfi_adjust_cfa_offset 8\n"
        "pushq %rdx\n.cfi_adjust_cfa_offset 8\n"
        "movl $1, %ecx\n"
        "call ng_dlsym_pick\n"
        "popq %rdx\n.cfi_adjust_cfa_offset -8\n"
        "popq %rsi\n.cfi_adjust_cfa_offset -8\n"
        "popq %rdi\n.cfi_adjust_cfa_offset -8\n"
        "testq %rax, %rax\n"
        "jz 1f\n"
        "cmpq $1, %rax\n" /* NG_DLSYM_NULL */
        "jne 2f\n"
        "xorl %eax, %eax\n"
        "2: ret\n"
        "1: jmp *ng_next_dlvsym(%rip)\n"
        ".cfi_endproc\n"
        ".size dlvsym, .-dlvsym\n");

#endif
