/* A process without any libnccl that still reaches the NCCL names (through the preloaded
 * ncclguard): every wrapped call must come back with a clean error, never a crash. The names only some
 * NCCL versions have (ncclCommWindowRegister, ncclCommWindowDeregister) are not found, as without
 * ncclguard: no NCCL is loaded that has them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*init_fn)(void**, int, char[128], int);
typedef int (*reg_fn)(void*, void*, size_t, void**, int);
typedef int (*dereg_fn)(void*, void*);
typedef int (*destroy_fn)(void*);
typedef int (*group_fn)(void);

int main(void) {
  init_fn init = (init_fn)dlsym(RTLD_DEFAULT, "ncclCommInitRank");
  reg_fn reg = (reg_fn)dlsym(RTLD_DEFAULT, "ncclCommWindowRegister");
  dereg_fn dereg = (dereg_fn)dlsym(RTLD_DEFAULT, "ncclCommWindowDeregister");
  destroy_fn destroy = (destroy_fn)dlsym(RTLD_DEFAULT, "ncclCommDestroy");
  group_fn gs = (group_fn)dlsym(RTLD_DEFAULT, "ncclGroupStart"), ge = (group_fn)dlsym(RTLD_DEFAULT, "ncclGroupEnd");
  if (!init || !destroy || !gs || !ge) { printf("no-symbols\n"); return 0; }
  char id[128];
  memset(id, 0, sizeof id);
  void* comm = NULL;
  void* win = NULL;
  int buf[4];
  int a = init(&comm, 1, id, 0);
  int b = reg ? reg((void*)0x1, buf, sizeof buf, &win, 0) : -1;
  int c = dereg ? dereg((void*)0x1, (void*)0x2) : -1;
  int d = destroy((void*)0x1);
  int e = gs(), f = ge();
  printf("init=%d register=%d deregister=%d destroy=%d groupstart=%d groupend=%d\n", a, b, c, d, e, f);
  return 0;
}
