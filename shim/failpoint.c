/* Failpoints (guard.h, NG_FP): only in a build with NG_FAILPOINTS (`make FAILPOINTS=1`); a release
 * build compiles this file to nothing and every NG_FP to the constant 0.
 *
 *   NG_FAILPOINT=NAME:K     fail the K-th hit (1-based) of the failpoint NAME; NAME `*`: the K-th hit of
 *                           any failpoint, all counted together (the walk of tests/t_failpoints.sh); K 0
 *                           counts without failing. Hits are counted from the first one after the
 *                           variable is set (a program may set it once its communicator exists)
 *   NG_FAILPOINT_REPORT=F   at exit, append to F one line per failpoint: "NAME HITS"; "fired NAME" for the
 *                           one that failed; "total N"; and the sequence of hits as runs of one name,
 *                           "run FIRST COUNT NAME" (a poll loop is one run), so a test learns how many
 *                           hits a scenario reaches, and where
 * The variables are the test harness's, not the user's: they are not NCCLGUARD_* settings. */
#ifdef NG_FAILPOINTS
#define _GNU_SOURCE
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
  if (colon && (size_t)(colon - s) < sizeof fp_name) {
    memcpy(fp_name, s, (size_t)(colon - s));
    fp_name[colon - s] = 0;
    fp_k = strtol(colon + 1, NULL, 10);
  }
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
  pthread_mutex_unlock(&fp_lock);
  return fire;
}
#else
typedef int ng_failpoints_off; /* (an empty translation unit is not ISO C) */
#endif
