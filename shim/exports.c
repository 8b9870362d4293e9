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

static ElfW(Addr) fix(ElfW(Addr) p, ElfW(Addr) base) { return p < base ? p + base : p; }

static uint32_t gnu_hash(const char* s) {
  uint32_t h = 5381;
  for (; *s; s++) h = h * 33 + (unsigned char)*s;
  return h;
}

static uint32_t sysv_hash(const char* s) {
  uint32_t h = 0, g;
  for (; *s; s++) {
    h = (h << 4) + (unsigned char)*s;
    if ((g = h & 0xf0000000u)) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

/* 1 if the object defines `name` (a defined dynamic symbol), else 0. */
static int defines(const struct dl_phdr_info* info, const char* name) {
  const ElfW(Dyn)* dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn)*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym)* symtab = NULL;
  const char* strtab = NULL;
  const uint32_t *gnu = NULL, *sysv = NULL;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; d++) {
    ElfW(Addr) p = fix(d->d_un.d_ptr, info->dlpi_addr);
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = (const ElfW(Sym)*)p; break;
      case DT_STRTAB: strtab = (const char*)p; break;
      case DT_GNU_HASH: gnu = (const uint32_t*)p; break;
      case DT_HASH: sysv = (const uint32_t*)p; break;
      default: break;
    }
  }
  if (!symtab || !strtab) return 0;
  if (gnu) {
    uint32_t nb = gnu[0], symoff = gnu[1], bloom = gnu[2];
    if (!nb) return 0;
    const uint32_t* buckets = (const uint32_t*)((const ElfW(Addr)*)(gnu + 4) + bloom);
    const uint32_t* chain = buckets + nb;
    uint32_t h = gnu_hash(name), i = buckets[h % nb];
    if (i < symoff) return 0;
    for (;; i++) {
      uint32_t h2 = chain[i - symoff];
      const ElfW(Sym)* s = &symtab[i];
      if ((h | 1) == (h2 | 1) && s->st_shndx != SHN_UNDEF && !strcmp(strtab + s->st_name, name)) return 1;
      if (h2 & 1) return 0;
    }
  }
  if (sysv) {
    uint32_t nb = sysv[0];
    if (!nb) return 0;
    const uint32_t *bucket = sysv + 2, *chain = bucket + nb;
    for (uint32_t i = bucket[sysv_hash(name) % nb]; i; i = chain[i]) {
      const ElfW(Sym)* s = &symtab[i];
      if (s->st_shndx != SHN_UNDEF && !strcmp(strtab + s->st_name, name)) return 1;
    }
  }
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

/* The list: every wrapped function some NCCL from 2.19 on lacks (first version in brackets). */
#define NG_OPTIONAL_FUNCS(X)                                                                            \
  X(ncclCommInitRankScalable) /* 2.23.4 */ X(ncclGroupSimulateEnd) /* 2.22.3 */                       \
  X(ncclCommShrink) /* 2.27.3 */ X(ncclCommWindowRegister) /* 2.27.3 */                                \
  X(ncclCommWindowDeregister) /* 2.27.3 */ X(ncclDevCommCreate) /* 2.28.3 */                           \
  X(ncclDevCommDestroy) /* 2.28.3 */ X(ncclCommRevoke) /* 2.28.7 */ X(ncclCommGrow) /* 2.29.2 */    \
  X(ncclCommSuspend) /* 2.29.7 */ X(ncclCommResume) /* 2.29.7 */

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
