/* The NCCL functions that not every NCCL version has, exported so that a program probing NCCL sees
 * exactly what the loaded NCCL has, whatever route it asks by: dlsym(RTLD_DEFAULT) or dlsym(RTLD_NEXT),
 * dlsym on the main program's handle (Python's ctypes.CDLL(None)), a weak reference of a program linked
 * against libnccl (bound when the program is relocated), a library's import (bound when it is loaded).
 * Lookups on a libnccl's own handle are dlsym.c's, and answer the same way.
 *
 * Each is a GNU indirect function: the dynamic linker asks its resolver for the address when a
 * program binds the name. The resolver looks the name up in the libnccl the process has loaded, by
 * reading that library's own ELF symbol table (no dlsym: a resolver runs inside the dynamic linker),
 * and answers ncclguard's wrapper when the library has the function, NULL when it does not, and NULL
 * when no libnccl is loaded at all: what the same lookup answers without ncclguard (no object defines
 * the name). A name bound before NCCL is loaded therefore stays NULL, as it does without ncclguard.
 *
 * When the resolver runs:
 * - after this library's constructors (`ready`): the loaded objects are walked with dl_iterate_phdr (its
 *   lock keeps a concurrent dlclose out);
 * - before them, while the process starts (the program's weak references, the libraries loaded with it;
 *   one thread): this library's own relocations may not be applied yet, and nothing may be called that
 *   needs them. A pointer to itself (`self_ref`, stored by a relocation) tells: once it holds its own
 *   address, the objects are walked through _r_debug's list (no call into libc); before, the wrapper is
 *   answered (it then finds the function missing at its first call and says so, real.c), the one limit
 *   (docs/DESIGN.md "Feature detection").
 * This file is compiled without sanitizer instrumentation (Makefile) for the same reason. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>

#include "guard.h"

#ifndef NG_NO_IFUNC
/* 1 if the object defines `name` or its twin p`name` (a defined dynamic symbol) */
static int defines_either(uintptr_t base, const void* dynamic, const char* name) {
  char pname[96];
  size_t i = 0;
  pname[i++] = 'p';
  for (const char* s = name; *s && i < sizeof pname - 1; s++) pname[i++] = *s;
  pname[i] = 0;
  return ng_elf_sym(base, dynamic, pname) != NULL || ng_elf_sym(base, dynamic, name) != NULL;
}

/* A libnccl, not ncclguard, that is NCCL (defines ncclGetVersion); by its path */
static int is_nccl(const char* path, uintptr_t base, const void* dynamic) {
  if (!path || !*path || !dynamic) return 0;
  const char* b = ng_basename(path);
  if (!ng_startswith(b, "libnccl") || ng_startswith(b, "libncclguard")) return 0;
  int so = 0;
  for (const char* p = b; *p && !so; p++) so = ng_startswith(p, ".so");
  return so && defines_either(base, dynamic, "ncclGetVersion");
}

struct look {
  const char* name; /* "ncclX" */
  const void* pin;  /* the base of the libnccl the wrappers call (real.c), NULL: not known yet */
  int has;          /* that libnccl (else the first one loaded) defines name or pname */
};

/* The answer is the one libnccl's that the wrapper's call would reach: with two copies of NCCL in the
 * process, a name only the other copy has is absent (the wrapper would find it missing and fail). */
static int walk(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct look* l = data;
  const void* dyn = NULL;
  uintptr_t lo = UINTPTR_MAX;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const void*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_addr + info->dlpi_phdr[i].p_vaddr < lo)
      lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
  }
  if (!is_nccl(info->dlpi_name, info->dlpi_addr, dyn)) return 0;
  if (l->pin && (const void*)(lo & ~(uintptr_t)0xfff) != l->pin && (const void*)info->dlpi_addr != l->pin) return 0;
  l->has = defines_either(info->dlpi_addr, dyn, l->name);
  return 1; /* that libnccl answers: stop */
}

static int ready;
__attribute__((constructor)) static void exports_ready(void) { __atomic_store_n(&ready, 1, __ATOMIC_RELEASE); }
/* Its own address once this library is relocated (a RELATIVE relocation stores it); the link-time value
 * before. Read through a volatile pointer: the compiler must not assume the initial value. */
static void* self_ref = &self_ref;
static int relocated(void) { return *(void* volatile*)&self_ref == (void*)&self_ref; }

/* The resolver's answer: the wrapper, or NULL when the loaded NCCL lacks `name` (or no NCCL is loaded). */
static void* optional(const char* name, void* wrapper) {
  struct look l = {name, NULL, 0};
  if (__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
    l.pin = ng_real_pinned();
    if (!dl_iterate_phdr(walk, &l) && l.pin) { /* the pinned one is gone: the first loaded answers */
      l.pin = NULL;
      dl_iterate_phdr(walk, &l);
    }
  } else if (relocated()) {
    for (struct link_map* m = _r_debug.r_map; m; m = m->l_next) /* (nothing pinned yet: the first loaded) */
      if (is_nccl(m->l_name, m->l_addr, m->l_ld)) {
        l.has = defines_either(m->l_addr, m->l_ld, name);
        break;
      }
  } else {
    return wrapper;
  }
  return l.has ? wrapper : NULL;
}

int ng_export_absent(const char* name) {
#define NG_ABSENT_IF(f) if (ng_streq(name, #f)) return optional(#f, (void*)1) == NULL;
  NG_OPTIONAL_FUNCS(NG_ABSENT_IF)
#undef NG_ABSENT_IF
  return 0;
}

/* The list (guard.h): every wrapped function some NCCL from 2.19 on lacks. */
#define NG_OPTIONAL_EXPORT(name)                                                                   \
  extern __typeof__(name) ng_w_##name;                                                             \
  static __typeof__(&ng_w_##name) ng_r_##name(void) {                                               \
    return (__typeof__(&ng_w_##name))optional(#name, (void*)&ng_w_##name);                          \
  }                                                                                                \
  NG_API __typeof__(ng_w_##name) name __attribute__((ifunc("ng_r_" #name)));
NG_OPTIONAL_FUNCS(NG_OPTIONAL_EXPORT)
#else /* the shim linked into a test program (the fuzzers): the wrappers are the exports (guard.h) */
int ng_export_absent(const char* name) {
  (void)name;
  return 0;
}
#endif
