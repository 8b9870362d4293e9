/* The NCCL functions that not every NCCL version has, exported so that a program probing NCCL with
 * dlsym(RTLD_DEFAULT, name) sees exactly what the loaded NCCL has.
 *
 * Each is a GNU indirect function: the dynamic linker asks its resolver for the address when a
 * program binds the name (a dlsym lookup, or the relocation of a library that imports it). The
 * resolver looks the name up in the libnccl the process has loaded, by reading that library's own
 * ELF symbol table (no dlsym, no lock beyond dl_iterate_phdr's: a resolver runs inside the dynamic
 * linker), and answers ncclguard's wrapper when the library has the function and NULL when it
 * does not, which is what dlsym answers without ncclguard. Before any libnccl is loaded the wrapper
 * is answered (it then finds the function missing at its first call and says so, real.c).
 * A name bound when no libnccl was loaded yet keeps that answer: the one limit (docs/DESIGN.md). */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <string.h>

#include "guard.h"

#ifndef NG_NO_IFUNC
struct look {
  const char* name;  /* "ncclX" */
  int found_nccl;    /* a libnccl (one that defines ncclGetVersion) was seen */
  int has;           /* it defines name or pname */
};

/* 1 if the object defines `name` (a defined dynamic symbol), else 0. */
static int defines(const struct dl_phdr_info* info, const char* name) {
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      return ng_elf_sym(info->dlpi_addr, (const void*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr), name) != NULL;
  return 0;
}

static int walk(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct look* l = data;
  const char* path = info->dlpi_name;
  if (!path || !*path) return 0;
  const char* base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, "libnccl", 7) || !strstr(base, ".so") || !strncmp(base, "libncclguard", 12)) return 0;
  if (!defines(info, "pncclGetVersion") && !defines(info, "ncclGetVersion")) return 0; /* not NCCL */
  l->found_nccl = 1;
  char pname[96] = "p";
  strncat(pname, l->name, sizeof pname - 2);
  if (defines(info, pname) || defines(info, l->name)) {
    l->has = 1;
    return 1; /* stop */
  }
  return 0;
}

/* A resolver can run while the dynamic linker is still relocating the objects of the process (a
 * library bound at load time): then nothing may be called that needs this library's own
 * relocations. Until the constructors run, the resolvers answer the wrapper without looking. This
 * file is compiled without sanitizer instrumentation (Makefile) for the same reason. */
static int ready;
__attribute__((constructor)) static void exports_ready(void) { __atomic_store_n(&ready, 1, __ATOMIC_RELEASE); }

/* The resolver's answer: the wrapper, or NULL when the loaded NCCL lacks `name`. */
static void* optional(const char* name, void* wrapper) {
  if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) return wrapper;
  struct look l = {name, 0, 0};
  dl_iterate_phdr(walk, &l);
  return l.found_nccl && !l.has ? NULL : wrapper;
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
typedef int ng_exports_unused;
#endif
