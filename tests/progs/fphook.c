/* libfphook.so: the program side of the test build's failpoint hook (shim/failpoint.c, NG_FAILPOINT=NAME:K:hook),
 * for programs that have none of their own: preloaded after ncclguard, it makes the K-th hit of NAME take
 * FPHOOK_SLEEP_MS milliseconds (default 3000) in the thread that hit it, so that a call ncclguard makes there
 * overruns its bound: a slow NCCL call, at a chosen step. Says "fphook: NAME sleeps N ms" on stderr first. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void ng_failpoint_hook(const char* name, int failing);
void ng_failpoint_hook(const char* name, int failing) {
  (void)failing;
  const char* v = getenv("FPHOOK_SLEEP_MS");
  long ms = v && *v ? strtol(v, NULL, 10) : 3000;
  if (ms < 0) ms = 0;
  fprintf(stderr, "fphook: %s sleeps %ld ms\n", name, ms);
  usleep((useconds_t)ms * 1000);
}
