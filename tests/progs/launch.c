/* ngtest's three ways of running the ranks:
 *   proc:   fork one process per rank; rank 0 makes the ncclUniqueId and passes it through the
 *           shared mapping made before fork (the parent calls neither CUDA nor NCCL);
 *   thread: one thread per rank in one process;
 *   group:  one thread drives every rank (ncclGroupStart/End around the collective steps).
 * --timeout: a watchdog names the step each unfinished rank is in and ends the run with 124. */
#define _GNU_SOURCE
#include "ngtest.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void init_rank(struct ng_rank* r, int rank, struct ng_shared* sh) {
  memset(r, 0, sizeof *r);
  r->rank = rank;
  r->nranks = opt.nranks;
  r->dev = -1;
  r->sh = sh;
  snprintf(sh->step[rank], sizeof sh->step[rank], "start");
}

static void report_hangs(struct ng_shared* sh) {
  for (int i = 0; i < opt.nranks; i++)
    if (!__atomic_load_n(&sh->done[i], __ATOMIC_ACQUIRE))
      ng_say("rank %d/%d: RESULT fail hang in %s (watchdog %d s)", i, opt.nranks, sh->step[i], opt.timeout);
}

/* ---- proc ---- */
static int launch_proc(struct ng_shared* sh) {
  int n = opt.nranks;
  pid_t pid[NG_MAXRANKS];
  int status[NG_MAXRANKS], finished[NG_MAXRANKS] = {0};
  for (int i = 0; i < n; i++) {
    pid[i] = fork();
    if (pid[i] < 0) { perror("ngtest: fork"); return 1; }
    if (pid[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the launcher (a killed hang) */
      /* NGTEST_ENV_RANK<i>="NAME=VALUE": an environment variable for that rank only, set before
       * its first CUDA/NCCL call (e.g. one rank without ncclguard: NCCLGUARD_DISABLE=1). */
      char key[32];
      snprintf(key, sizeof key, "NGTEST_ENV_RANK%d", i);
      const char* kv = getenv(key);
      if (kv && strchr(kv, '=')) putenv(strdup(kv));
      struct ng_rank* r = aligned_alloc(_Alignof(struct ng_rank), sizeof *r); /* _Alignas(64) member */
      if (!r) _exit(1);
      init_rank(r, i, sh);
      ng_run(r, 1);
      int code = ng_report(r);
      __atomic_store_n(&sh->done[i], 1, __ATOMIC_RELEASE);
      free(r);
      exit(code); /* exit, not _exit: atexit handlers (a preloaded library's summary) must run */
    }
  }
  double start = ng_now_us(), crash_at = 0;
  int left = n, first_sig = 0, code = 0;
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p < 0 && errno != EINTR) break;
    if (p > 0) {
      for (int i = 0; i < n; i++) {
        if (pid[i] != p) continue;
        finished[i] = 1;
        status[i] = st;
        left--;
        if (WIFSIGNALED(st)) {
          int s = WTERMSIG(st);
          ng_say("rank %d/%d: RESULT fail killed by signal %d (%s) in %s", i, n, s, strsignal(s), sh->step[i]);
          if (!first_sig) { first_sig = s; crash_at = ng_now_us(); }
        }
      }
      continue;
    }
    double now = ng_now_us();
    int kill_rest = 0;
    if (opt.timeout > 0 && now - start > opt.timeout * 1e6) {
      report_hangs(sh);
      code = 124;
      kill_rest = 1;
    } else if (first_sig && now - crash_at > 15e6) {
      for (int i = 0; i < n; i++)
        if (!finished[i])
          ng_say("rank %d/%d: RESULT fail killed 15 s after a peer crashed, in %s", i, n, sh->step[i]);
      kill_rest = 1;
    }
    if (kill_rest) {
      for (int i = 0; i < n; i++)
        if (!finished[i]) kill(pid[i], SIGKILL);
      while (waitpid(-1, NULL, 0) > 0) {}
      return code ? code : 128 + first_sig;
    }
    usleep(10000);
  }
  if (first_sig) return 128 + first_sig;
  for (int i = 0; i < n; i++) {
    int c = finished[i] && WIFEXITED(status[i]) ? WEXITSTATUS(status[i]) : 1;
    if (c != 0 && c != 77) return 1;
    if (c == 77) code = 77;
  }
  return code;
}

/* ---- thread / group ---- */
static void* watchdog(void* arg) {
  struct ng_rank* r = arg;
  sleep((unsigned)opt.timeout);
  for (int i = 0; i < opt.nranks; i++) /* finished ranks have not printed their RESULT yet */
    if (__atomic_load_n(&r->sh->done[i], __ATOMIC_ACQUIRE)) ng_report(&r[i]);
  report_hangs(r->sh);
  _exit(124);
  return NULL;
}

static void* rank_thread(void* arg) {
  struct ng_rank* r = arg;
  ng_run(r, 1);
  __atomic_store_n(&r->sh->done[r->rank], 1, __ATOMIC_RELEASE);
  return NULL;
}

static int launch_threads(struct ng_shared* sh) {
  int n = opt.nranks;
  struct ng_rank* r = aligned_alloc(_Alignof(struct ng_rank), (size_t)n * sizeof *r); /* _Alignas(64) member */
  if (r) memset(r, 0, (size_t)n * sizeof *r);
  if (!r) return 1;
  for (int i = 0; i < n; i++) init_rank(&r[i], i, sh);
  if (opt.timeout > 0) {
    pthread_t w;
    if (pthread_create(&w, NULL, watchdog, r) == 0) pthread_detach(w);
  }
  if (opt.mode == MODE_GROUP) {
    ng_run(r, n);
  } else {
    pthread_t th[NG_MAXRANKS];
    for (int i = 0; i < n; i++)
      if (pthread_create(&th[i], NULL, rank_thread, &r[i])) { perror("ngtest: pthread_create"); return 1; }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  }
  int code = 0;
  for (int i = 0; i < n; i++) {
    int c = ng_report(&r[i]);
    __atomic_store_n(&sh->done[i], 1, __ATOMIC_RELEASE);
    if (c == 1 || (c == 77 && code == 0)) code = c;
  }
  free(r);
  return code;
}

int ng_launch(void) {
  struct ng_shared* sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) { perror("ngtest: mmap"); return 1; }
  return opt.mode == MODE_PROC ? launch_proc(sh) : launch_threads(sh);
}
