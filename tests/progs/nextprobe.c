/* libnextprobe.so: a library in the global scope (linked by dlsym_handle) that looks up with
 * dlsym(RTLD_NEXT) a name it defines itself. glibc answers relative to the caller: nothing defines
 * it after this library, so NULL. Answered relative to a preloaded ncclguard, it would be this
 * library's own probe (the caller's address lost). */
#define _GNU_SOURCE
#include <dlfcn.h>

int nextprobe_probe(void) { return 1; }
/* and with a version (NEXTPROBE, nextprobe.map), for dlvsym */
/* The empty asm uses the result: no tail call, which would make the program (the jump's return
 * address) the caller. */
void* nextprobe_next(void) {
  void* r = dlsym(RTLD_NEXT, "nextprobe_probe");
  __asm__ volatile("" : : "r"(r) : "memory");
  return r;
}
void* nextprobe_next_v(void) {
  void* r = dlvsym(RTLD_NEXT, "nextprobe_probe", "NEXTPROBE");
  __asm__ volatile("" : : "r"(r) : "memory");
  return r;
}
