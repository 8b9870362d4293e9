/* Failpoints (guard.h, NG_FP): only in a build with NG_FAILPOINTS (`make FAILPOINTS=1`); a release
 * build compiles this file to nothing and every NG_FP to the constant 0.
 *
 *   NG_FAILPOINT=NAME:K     fail the K-th hit (1-based) of the failpoint NAME; NAME `*`: the K-th hit of
 *                           any failpoint, all counted together (the walk of tests/t_failpoints.sh); K 0
 *                           counts without failing. Hits are counted from the first one after the
 *                           variable is set (a program may set it once its communicator exists)
 *   NG_FAILPOINT=NAME:K:hook  at the K-th hit, call the program's `ng_failpoint_hook(name, 0)` and do not
 *                           fail the step: the program acts while ncclguard is at that hit (tests/progs/
 *                           failwalk.c aborts the communicator from another thread there)
 *   ng_failpoint_hook       `void ng_failpoint_hook(const char* name, int failing)`, exported by the program,
 *                           looked up once when the variable is first read; without the action `hook` it is
 *                           called with failing = 1 just before the K-th hit fails (the program learns when)
 *   NG_FAILPOINT_REPORT=F   at exit, append to F one line per failpoint: "NAME HITS"; "fired NAME" for the
 *                           one that failed; "total N"; and the sequence of hits as runs of one name,
 *                           "run FIRST COUNT NAME" (a poll loop is one run), so a test learns how many
 *                           hits a scenario reaches, and where
 * The variables are the test harness's, not the user's: they are not NCCLGUARD_* settings. */
#ifdef NG_FAILPOINTS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guard.h"

#define NG_FP_MAX 128
static struct { const char* name; long hits; } fp_tab[NG_FP_MAX];
static int fp_n;
static long fp_total;
static char fp_name[96];
static long fp_k = -1; /* -1: not armed */
static const char* fp_fired;
static void (*fp_hook)(const char*, int); /* the program's ng_failpoint_hook, if it has one */
static int fp_want_hook;
#define NG_FP_RUNS 512
static struct { const char* name; long first, count; } fp_runs[NG_FP_RUNS];
static int fp_nruns;
static pthread_mutex_t fp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fp_once = PTHREAD_ONCE_INIT;

static void fp_report(void) {
  const char* path = getenv("NG_FAILPOINT_REPORT");
  if (!path || !*path) return;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char buf[40000];
  size_t l = 0;
  pthread_mutex_lock(&fp_lock);
  for (int i = 0; i < fp_n && l < sizeof buf - 128; i++)
    l += (size_t)snprintf(buf + l, sizeof buf - l, "%s %ld\n", fp_tab[i].name, fp_tab[i].hits);
  if (fp_fired) l += (size_t)snprintf(buf + l, sizeof buf - l, "fired %s\n", fp_fired);
  for (int i = 0; i < fp_nruns && l < sizeof buf - 128; i++)
    l += (size_t)snprintf(buf + l, sizeof buf - l, "run %ld %ld %s\n", fp_runs[i].first, fp_runs[i].count, fp_runs[i].name);
  l += (size_t)snprintf(buf + l, sizeof buf - l, "total %ld\n", fp_total);
  pthread_mutex_unlock(&fp_lock);
  if (write(fd, buf, l) < 0) { /* a test sees the missing lines */ }
  close(fd);
}

/* The arming is read at the hits until the variable appears, so a program arms the failpoints after its
 * set-up (communicator creation) with setenv, and counts only what follows. */
static int fp_armed;
static void fp_arm_locked(const char* s) {
  const char* colon = strrchr(s, ':');
  if (colon && !strcmp(colon, ":hook") && colon > s) { /* NAME:K:hook */
    fp_want_hook = 1;
    const char* c2 = colon - 1;
    while (c2 > s && *c2 != ':') c2--;
    if (*c2 == ':' && (size_t)(c2 - s) < sizeof fp_name) {
      memcpy(fp_name, s, (size_t)(c2 - s));
      fp_name[c2 - s] = 0;
      fp_k = strtol(c2 + 1, NULL, 10);
    }
  } else if (colon && (size_t)(colon - s) < sizeof fp_name) {
    memcpy(fp_name, s, (size_t)(colon - s));
    fp_name[colon - s] = 0;
    fp_k = strtol(colon + 1, NULL, 10);
  }
  /* (ncclguard's own dlsym would decide this lookup: glibc's, through ng_dl_sym) */
  fp_hook = (void (*)(const char*, int))ng_dl_sym(RTLD_DEFAULT, "ng_failpoint_hook");
  fp_armed = 1;
}

static void fp_init(void) { atexit(fp_report); }

int ng_fp_hit(const char* name) {
  pthread_mutex_lock(&fp_lock);
  if (!fp_armed) {
    const char* s = getenv("NG_FAILPOINT");
    if (!s) {
      pthread_mutex_unlock(&fp_lock);
      return 0;
    }
    fp_arm_locked(s);
  }
  pthread_mutex_unlock(&fp_lock);
  pthread_once(&fp_once, fp_init);
  pthread_mutex_lock(&fp_lock);
  int i = 0;
  while (i < fp_n && strcmp(fp_tab[i].name, name)) i++;
  if (i == fp_n && fp_n < NG_FP_MAX) fp_tab[fp_n++].name = name; /* names are string literals */
  long hit = i < fp_n ? ++fp_tab[i].hits : 0;
  long total = ++fp_total;
  if (fp_nruns && fp_runs[fp_nruns - 1].name == name) fp_runs[fp_nruns - 1].count++;
  else if (fp_nruns < NG_FP_RUNS) fp_runs[fp_nruns].name = name, fp_runs[fp_nruns].first = total, fp_runs[fp_nruns++].count = 1;
  int fire = fp_k > 0 && !fp_fired &&
             ((!strcmp(fp_name, "*") && total == fp_k) || (!strcmp(fp_name, name) && hit == fp_k));
  if (fire) fp_fired = name;
  void (*hook)(const char*, int) = fire ? fp_hook : NULL;
  int act = fire && fp_want_hook;
  pthread_mutex_unlock(&fp_lock);
  if (hook) hook(name, !act); /* outside the failpoints' lock: the program may act here */
  return fire && !act; /* the action `hook` does not fail the step */
}
#else
typedef int ng_failpoints_off; /* (an empty translation unit is not ISO C) */
#endif
