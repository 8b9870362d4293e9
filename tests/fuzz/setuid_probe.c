/* setuid_probe SHIM: loads ncclguard (dlopen, absolute path: LD_PRELOAD is ignored for setuid
 * programs) and makes one call it answers itself (window registration on a NULL communicator),
 * which logs a WARN line. Run with NCCLGUARD_DUMP_CONFIG=1 and NCCLGUARD_LOG_FILE=PATH: in a
 * normal process the configuration dump and the line go to PATH; in a setuid process
 * (AT_SECURE) secure_getenv hides both variables, so PATH must not be created. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

typedef int (*reg_fn)(void*, void*, size_t, void**, int);

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "setuid_probe: %s\n", dlerror()); return 3; }
  reg_fn reg = (reg_fn)dlsym(h, "ncclCommWindowRegister");
  if (!reg) return 4;
  void* win = NULL;
  int r = reg(NULL, &win, 4096, &win, 1);
  printf("setuid_probe: ruid=%d euid=%d result=%d\n", (int)getuid(), (int)geteuid(), r);
  return 0;
}
