/* Threads of ncclguard's own: a detached start, a name, and a bounded wait for a flag (agree.c's launch of a
 * first round, wrap_comm.c's bounded abort of a revoked communicator, the watchdog). */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

#include "guard.h"

int ng_spawn_detached(void* (*fn)(void*), void* arg) {
  if (NG_FP("thread.spawn")) return 11; /* EAGAIN */
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &a, fn, arg);
  pthread_attr_destroy(&a);
  return e;
}

/* Names the calling thread (at most 15 characters: "ng-..."): what top -H, gdb and /proc/PID/task/TID/comm show.
 * From the thread itself: a detached thread's handle may be gone by the time its creator would name it. */
void ng_thread_name(const char* name) { (void)pthread_setname_np(pthread_self(), name); }

/* A condition variable whose timed waits run on CLOCK_MONOTONIC (a step of the wall clock neither
 * delays nor hastens them). */
int ng_cond_init(pthread_cond_t* cv) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  int e = pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
  return e;
}

/* The absolute CLOCK_MONOTONIC time `us` microseconds from now, for a timed wait on such a variable. */
struct timespec ng_mono_after(double us) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (us < 0) us = 0;
  ts.tv_sec += (time_t)(us / 1e6);
  ts.tv_nsec += (long)((us - (double)(time_t)(us / 1e6) * 1e6) * 1000);
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  return ts;
}

int ng_wait_done(pthread_mutex_t* mu, pthread_cond_t* cv, const int* done, double until_us) {
  while (!*done && ng_now_us() < until_us) {
    double w = until_us - ng_now_us();
    if (w > 100e3) w = 100e3; /* re-check at least every 100 ms */
    struct timespec ts = ng_mono_after(w);
    pthread_cond_timedwait(cv, mu, &ts);
  }
  return *done;
}
