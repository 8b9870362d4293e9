/* hostid.c: a host of its own for every process. tests/gpu/run preloads it (built into $BUILD/gpu/) when a
 * scenario has more ranks than there are GPUs: the ranks then share GPUs, and NCCL refuses two ranks of one
 * host on one GPU ("Duplicate GPU detected"). NCCL takes its host identity from NCCL_HOSTID when set
 * (NCCL's getHostHash, src/misc/utils.cc), so a process with a host id of its own is, to NCCL, a rank on another
 * host: the ranks talk over the network transport (loopback: NCCL_SOCKET_IFNAME=lo), as between nodes.
 *
 * The id is "NCCL_HOSTID=<prefix>-<pid>" (prefix: $NG_HOSTID_PREFIX, default "ngrank"), set when the library
 * is loaded (every exec'd process: torchrun's workers too) and again in every child a process forks (ngtest,
 * faults and the other programs fork one process per rank). The string lives in a static buffer given to
 * putenv(): the child rewrites it in place, so the fork handler neither allocates nor takes the
 * environment's lock. Threads of one process share its id: ranks that are threads of one process (ngtest
 * -m thread/group, ncclCommInitAll) stay one host and cannot share a GPU; tests/gpu/run marks those n/a. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char entry[96];  /* "NCCL_HOSTID=<prefix>-<pid>", handed to the environment by putenv */
static size_t pid_at;   /* where the pid's digits begin in entry */

static void write_pid(void) {
  char digits[24];
  int n = 0;
  unsigned long v = (unsigned long)getpid();
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v && n < (int)sizeof digits);
  size_t at = pid_at;
  while (n > 0 && at + 1 < sizeof entry) entry[at++] = digits[--n];
  entry[at] = 0;
}

__attribute__((constructor)) static void ng_hostid_load(void) {
  const char *prefix = getenv("NG_HOSTID_PREFIX");
  if (!prefix || !*prefix || strlen(prefix) > 48) prefix = "ngrank";
  strcpy(entry, "NCCL_HOSTID=");
  strcat(entry, prefix);
  strcat(entry, "-");
  pid_at = strlen(entry);
  write_pid();
  putenv(entry);
  pthread_atfork(NULL, NULL, write_pid);
}
