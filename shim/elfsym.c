/* Symbols found without ncclguard's own dlsym.
 *
 * A dynamic symbol of a loaded object, read from its own ELF tables (GNU or SysV hash): no dlsym, no
 * lock, no call into the dynamic linker. Used where dlsym cannot be: inside an indirect function's
 * resolver (exports.c) and to find glibc's own dlsym and dlvsym before ncclguard's dlsym can answer
 * (dlsym.c). Compiled without sanitizer instrumentation (Makefile), and calls no libc function (a
 * sanitizer intercepts them): both callers can run before a sanitizer runtime is set up.
 *
 * The dlsym of ncclguard's own lookups (ng_dl_sym: the real NCCL, other copies of libnccl, NVML, the CUDA
 * driver). ncclguard exports a dlsym of its own (dlsym.c, x86_64), and a call to `dlsym` from inside the
 * library binds to that one, the first in the global scope: each of ncclguard's lookups would go through
 * the interposer's decision (its configuration, the resolution of the real NCCL). So they call glibc's
 * dlsym, read from libc's ELF tables here; RTLD_NEXT is answered relative to ncclguard, as it is for a
 * plain call. */
#define _GNU_SOURCE
#include <link.h>

#include "guard.h"

/* Pointers in the dynamic section are relocated by glibc in place, except in some objects (the vDSO). */
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

void* ng_elf_sym(uintptr_t base, const void* dynamic, const char* name) {
  const ElfW(Dyn)* dyn = dynamic;
  if (!dyn) return NULL;
  const ElfW(Sym)* symtab = NULL;
  const char* strtab = NULL;
  const uint32_t *gnu = NULL, *sysv = NULL;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; d++) {
    ElfW(Addr) p = fix(d->d_un.d_ptr, base);
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = (const ElfW(Sym)*)p; break;
      case DT_STRTAB: strtab = (const char*)p; break;
      case DT_GNU_HASH: gnu = (const uint32_t*)p; break;
      case DT_HASH: sysv = (const uint32_t*)p; break;
      default: break;
    }
  }
  if (!symtab || !strtab) return NULL;
  if (gnu) {
    uint32_t nb = gnu[0], symoff = gnu[1], bloom = gnu[2];
    if (!nb) return NULL;
    const uint32_t* buckets = (const uint32_t*)((const ElfW(Addr)*)(gnu + 4) + bloom);
    const uint32_t* chain = buckets + nb;
    uint32_t h = gnu_hash(name), i = buckets[h % nb];
    if (i < symoff) return NULL;
    for (;; i++) {
      uint32_t h2 = chain[i - symoff];
      const ElfW(Sym)* s = &symtab[i];
      if ((h | 1) == (h2 | 1) && s->st_shndx != SHN_UNDEF && ng_streq(strtab + s->st_name, name))
        return (void*)(base + s->st_value);
      if (h2 & 1) return NULL;
    }
  }
  if (sysv) {
    uint32_t nb = sysv[0];
    if (!nb) return NULL;
    const uint32_t *bucket = sysv + 2, *chain = bucket + nb;
    for (uint32_t i = bucket[sysv_hash(name) % nb]; i; i = chain[i]) {
      const ElfW(Sym)* s = &symtab[i];
      if (s->st_shndx != SHN_UNDEF && ng_streq(strtab + s->st_name, name)) return (void*)(base + s->st_value);
    }
  }
  return NULL;
}

/* glibc's own function `name`, from libc.so.6 (2.34+) or libdl.so.2 (before), by their ELF tables. */
void* ng_glibc_fn(const char* name) {
  static const char* const libs[] = {"libc.so.6", "libdl.so.2"};
  for (int i = 0; i < 2; i++)
    for (struct link_map* m = _r_debug.r_map; m; m = m->l_next) {
      if (!m->l_name || !ng_streq(ng_basename(m->l_name), libs[i])) continue;
      void* f = ng_elf_sym(m->l_addr, m->l_ld, name);
      if (f) return f;
    }
  return NULL;
}

void* ng_dl_sym(void* handle, const char* name) {
  static void* glibc_dlsym; /* set once (idempotent: racing threads store the same value) */
  void* f = __atomic_load_n(&glibc_dlsym, __ATOMIC_ACQUIRE);
  if (!f && (f = ng_glibc_fn("dlsym")) != NULL) __atomic_store_n(&glibc_dlsym, f, __ATOMIC_RELEASE);
  return f ? ((void* (*)(void*, const char*))f)(handle, name) : NULL; /* a process without glibc's dlsym */
}
