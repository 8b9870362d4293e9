/* Threads of ncclguard's own: a detached start, and a bounded wait for a flag (agree.c's launch of a
 * first round, wrap_comm.c's bounded abort of a revoked communicator, the watchdog). */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

#include "guard.h"

int ng_spawn_detached(void* (*fn)(void*), void* arg) {
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &a, fn, arg);
  pthread_attr_destroy(&a);
  return e;
}

int ng_wait_done(pthread_mutex_t* mu, pthread_cond_t* cv, const int* done, double until_us) {
  while (!*done && ng_now_us() < until_us) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double w = until_us - ng_now_us();
    if (w > 100e3) w = 100e3; /* re-check at least every 100 ms */
    if (w < 0) w = 0;
    ts.tv_nsec += (long)(w * 1000);
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
  }
  return *done;
}
