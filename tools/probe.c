/* ncclguard-doctor --probe: the known window-registration failures, measured on this node with the
 * NCCL a job here loads: each scenario program (tests/progs, built header-free: libexec/ncclguard/ after
 * make install or in the wheel, probe/ in a build directory) runs in a child process of its own under a
 * time limit, once with NCCL alone and once with libncclguard.so preloaded, and the two outcomes give a
 * verdict. The outcome and verdict words are tests/gpu/run's, which runs the same programs.
 *
 * Outcomes: ok | ok, reg=<error> (the expected clean error) | ok, win=NULL | fail: <reason> |
 * crash (SIG...) | hang (<step>) | skip: <why> | not run (time budget).
 * Verdicts: same | same, changed: <outcome> | fixed | clean error (was crash|hang) | unchanged |
 * REGRESSION | skip | not run. Exit status: 0 nothing worse with ncclguard, 1 a REGRESSION, 2 could not
 * probe (no GPU, no NCCL, programs or library missing) or a usage error; each with one line. */
#define _GNU_SOURCE
#include "probe.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <link.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef NG_VERSION
#define NG_VERSION "unknown"
#endif
#ifdef NG_REVISION
#define NG_PROBE_IDENTITY NG_VERSION " (" NG_REVISION ")"
#else
#define NG_PROBE_IDENTITY NG_VERSION
#endif

static const char *probe_usage =
    "Usage: ncclguard-doctor --probe [options]\n"
    "\n"
    "Measures, on this node and with the NCCL a job here loads, which known window-registration\n"
    "failures happen and what ncclguard changes: each scenario runs in a child process under a time\n"
    "limit, once with NCCL alone and once with libncclguard.so preloaded, one GPU each rank. Prints\n"
    "progress on stderr, then a table (scenario, NCCL alone, with ncclguard, verdict) and the total\n"
    "time. Buffers are a few MiB, except the repeated registration (--repeat-size).\n"
    "\n"
    "Options:\n"
    "  --nccl PATH        the libnccl.so.2 to probe; every row runs on it, PyTorch's too (put first\n"
    "                     with LD_PRELOAD) (default: the nvidia-nccl wheel of python, the NCCL its\n"
    "                     PyTorch loads, else libnccl.so.2 on the library path (LD_LIBRARY_PATH,\n"
    "                     ld.so.cache))\n"
    "  --gpus N           GPUs to use (default 1: the one-rank scenarios; 2 or more: the two-rank\n"
    "                     scenarios too, one process per GPU)\n"
    "  --ranks N          ranks of the scenarios of several ranks, and of the PyTorch ones (default:\n"
    "                     the GPUs used); more ranks than GPUs share them (rank r on GPU r mod GPUs),\n"
    "                     each rank process a host of its own to NCCL (NCCL_HOSTID, NCCL_SOCKET_IFNAME=lo):\n"
    "                     N ranks on the GPUs as N hosts, joined by NCCL's network transport\n"
    "  --budget S         the whole probe within S seconds (default 60): a scenario starts only where both its\n"
    "                     runs fit in what is left (a PyTorch one needs about 17 s: its two runs go side\n"
    "                     by side; 32 s, one after the other, on a GPU in exclusive compute mode);\n"
    "                     the rest is 'not run'\n"
    "  --timeout S        a run still going after S seconds is a hang (default 20)\n"
    "  --repeat-size SIZE the allocation registered again and again (default 64M; 0 leaves that\n"
    "                     scenario out)\n"
    "  --only REGEX       only the scenarios whose name matches REGEX (extended)\n"
    "  --json             one JSON object on stdout instead of the table\n"
    "  --outdir DIR       keep every run's output there (default: a temporary directory, removed\n"
    "                     unless a verdict is REGRESSION)\n"
    "  --python PATH      the Python whose nvidia-nccl wheel counts (default: $PYTHON, python3)\n"
    "  --no-python        look for neither the wheel nor PyTorch\n"
    "  --no-torch         leave the PyTorch scenarios out (they run when the Python's torch imports,\n"
    "                     with PyTorch's own NCCL, under torchrun, one process per GPU used)\n"
    "  --list             list the scenarios and exit\n"
    "  -h, --help         this text\n"
    "\n"
    "Verdicts: fixed (NCCL alone failed, crashed or hung; with ncclguard it works), clean error (was\n"
    "crash|hang) (a crash or hang became an error), same, unchanged (failed both ways), REGRESSION\n"
    "(worked with NCCL alone, not with ncclguard).\n"
    "Exit status: 0 nothing is worse with ncclguard; 1 some REGRESSION; 2 could not probe (no GPU,\n"
    "no NCCL, the probe's programs not installed) or a usage error.\n";

/* ---- the scenarios: one row per known failure; the programs and flags tests/gpu/run uses ---- */
struct scenario {
  const char *name;
  int ranks;          /* 1, or 2: one process per GPU; PyTorch scenarios: at least, one process per GPU used */
  int torch;          /* 1: a PyTorch script (prog) under torchrun, with the Python of --python */
  const char *prog;   /* in the programs directory */
  const char *args;   /* blank-separated; %R the ranks, %S the repeat size, %K the repeat count */
  const char *env;    /* NAME=VALUE set for both runs, or NULL */
  const char *what;
};
static const struct scenario catalogue[] = {
    {"normal", 1, 0, "ngtest", "-n %R -m proc", NULL, "registration as the first operation, then an all-reduce on the window"},
    {"null-comm", 1, 0, "ngtest", "-n %R -m proc --null-comm", NULL,
     "registration on a NULL communicator (a lazy PyTorch group): a crash before NCCL 2.29"},
    {"first-op-nonblocking", 1, 0, "ngtest", "-n %R -m proc --nonblocking", NULL,
     "registration right after a nonblocking init: an error (2.28) or a silent NULL window (2.29+)"},
    {"cudaMalloc-all", 1, 0, "ngtest", "-n %R -m proc --alloc cuda", NULL, "a cudaMalloc buffer, which NCCL cannot register"},
    {"misaligned-offset-1000", 1, 0, "ngtest", "-n %R -m proc --offset 1000", NULL,
     "a buffer 1000 bytes into its allocation (not a multiple of 4096)"},
    {"graph-capture", 1, 0, "ngtest", "-n %R -m proc --capture", NULL,
     "registration during CUDA graph capture: an error and a lost capture before 2.30.7"},
    {"dereg-after-destroy", 1, 0, "ngtest", "-n %R -m proc --dereg-after-destroy", NULL,
     "deregistration after the communicator was destroyed (PyTorch's teardown order)"},
    {"null-win", 1, 0, "ngtest", "-n %R -m proc --null-win", NULL, "a NULL window pointer: a crash (2.27) or success written to no one (2.28)"},
    {"repeat-registration", 1, 0, "repeat", "-n %R --size %S --times %K --expect-all", "NCCL_WIN_STRIDE=8388608",
     "one allocation registered again and again in a small symmetric space: 2.30.7 runs out of it"},
    {"asym-cudaMalloc-rank0", 2, 0, "ngtest", "-n %R -m proc --alloc cuda0", NULL,
     "a buffer one rank cannot register (cudaMalloc on rank 0): that rank errors, the other hangs"},
    {"late-peer", 2, 0, "faults", "late --late 3 -n %R", NULL,
     "one rank reaches the registration 3 s after the other: both must succeed (NCCL has no timeout there)"},
    {"torch-lazy", 1, 1, "torch_symm.py", "--mode lazy", NULL,
     "(PyTorch, its own NCCL) symmetric-memory rendezvous on a lazily created group: a crash before NCCL 2.29"},
    {"torch-eager", 1, 1, "torch_symm.py", "--mode eager", NULL,
     "(PyTorch, its own NCCL) the same on an eagerly created group (init_process_group(device_id=...))"},
};
#define NSCEN ((int)(sizeof catalogue / sizeof *catalogue))

struct result {
  int run;                 /* 0 not run, 1 run, 2 skipped */
  int nccl_code;           /* the NCCL the runs loaded: their "loaded NCCL version" line, else the one probed */
  char bare[128], guard[128], verdict[160];
  int bare_rc, guard_rc;   /* exit status (128+signal), -1 killed at the time limit */
  double bare_s, guard_s;
};

/* ---- small helpers ---- */
static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", f);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static int opt_json;
static double t_start;

/* The one closing line for "could not probe": exit 2 (in JSON: {"probe":..,"exit":2,"error":...}) */
__attribute__((format(printf, 1, 2))) static int cannot(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (opt_json) {
    fputs("{\"probe\":1,\"exit\":2,\"error\":", stdout);
    json_str(stdout, msg);
    fputs("}\n", stdout);
  }
  fprintf(stderr, "ncclguard-doctor --probe: could not probe: %s\n", msg);
  return 2;
}

static int usage_error(const char *fmt, const char *a) {
  fprintf(stderr, "ncclguard-doctor --probe: ");
  fprintf(stderr, fmt, a);
  fprintf(stderr, " (see ncclguard-doctor --probe --help)\n");
  return 2;
}

static int parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = s && *s ? strtol(s, &end, 10) : 0;
  if (!s || !*s || errno || *end || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static int parse_size(const char *s, unsigned long long *out) {
  char *end;
  errno = 0;
  unsigned long long v = s && *s ? strtoull(s, &end, 10) : 0;
  if (!s || !*s || errno) return 0;
  switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    default: break;
  }
  if (*end || v > (64ULL << 30)) return 0;
  *out = v;
  return 1;
}

/* the directory of this executable */
static int exe_dir(char *buf, size_t n) {
  ssize_t k = readlink("/proc/self/exe", buf, n - 1);
  if (k <= 0) return 0;
  buf[k] = 0;
  char *slash = strrchr(buf, '/');
  if (!slash) return 0;
  *slash = 0;
  return 1;
}

/* the first of dir/rel[i] that exists (realpath into out) */
static int find_near(const char *dir, const char *const *rel, const char *leaf, char *out, size_t n) {
  for (int i = 0; rel[i]; i++) {
    char c[PATH_MAX + 256], r[PATH_MAX];
    snprintf(c, sizeof c, "%s/%s%s%s", dir, rel[i], leaf ? "/" : "", leaf ? leaf : "");
    if (access(c, R_OK) == 0 && realpath(c, r)) {
      if (leaf) { /* the directory holding leaf */
        char *s = strrchr(r, '/');
        if (s) *s = 0;
      }
      snprintf(out, n, "%s", r);
      return 1;
    }
  }
  return 0;
}

/* Runs argv (execvp) in a process group of its own, with LD_PRELOAD unset (neither the probe's programs nor
 * the doctor's Python are to be intercepted by ncclguard), stdin and stderr on /dev/null and its stdout read
 * into buf (cap bytes, NUL-terminated) for at most timeout_s; its group is killed at the end. Returns the bytes
 * read; *status: the wait status (-1 when it could not be started); *timed_out: 1 when the time ran out
 * before the output ended. Shared with the doctor's Python check (probe.h). */
size_t ng_run_capture(char *const argv[], int timeout_s, char *buf, size_t cap, int *status, int *timed_out) {
  buf[0] = 0;
  *status = -1;
  *timed_out = 0;
  int fd[2];
  if (pipe(fd)) return 0;
  pid_t pid = fork();
  if (pid < 0) { close(fd[0]); close(fd[1]); return 0; }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fd[1], 1);
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) { dup2(nul, 0); dup2(nul, 2); }
    close(fd[0]); close(fd[1]);
    unsetenv("LD_PRELOAD");
    execvp(argv[0], argv);
    _exit(127);
  }
  close(fd[1]);
  size_t len = 0;
  double until = now_s() + timeout_s;
  for (;;) {
    int left = (int)((until - now_s()) * 1000);
    if (left <= 0) { *timed_out = 1; break; }
    struct pollfd p = {.fd = fd[0], .events = POLLIN};
    int r = poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) { *timed_out = r == 0; break; }
    ssize_t got = read(fd[0], buf + len, cap - 1 - len);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    len += (size_t)got;
    if (len >= cap - 1) break;
  }
  buf[len] = 0;
  close(fd[0]);
  kill(-pid, SIGKILL);
  if (*timed_out) kill(pid, SIGKILL); /* before its setpgid, the group is not there yet */
  while (waitpid(pid, status, 0) < 0 && errno == EINTR) {}
  return len;
}

/* Runs argv with stdout captured, for at most timeout_s; returns what it printed (static buffer). */
static const char *capture(char *const argv[], int timeout_s) {
  static char buf[8192];
  int status, timed_out;
  ng_run_capture(argv, timeout_s, buf, sizeof buf, &status, &timed_out);
  return buf;
}

/* ---- finding NCCL: what a job here loads ---- */
struct nccl_found {
  char path[PATH_MAX];
  char how[256];
  char note[PATH_MAX + 256]; /* another NCCL a Python job would load instead, if any */
  int code;
};

static void version_str(int code, char *buf, size_t n) {
  if (code >= 10000) snprintf(buf, n, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
  else snprintf(buf, n, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
}

/* dlopen + ncclGetVersion; 0 and a reason when it is no usable libnccl */
static int load_nccl(const char *name, char *path, size_t n, int *code, char *why, size_t wn) {
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, wn, "%s", e ? e : "cannot be loaded");
    return 0;
  }
  struct link_map *lm = NULL;
  char r[PATH_MAX];
  const char *p = dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0] ? lm->l_name : name;
  snprintf(path, n, "%s", realpath(p, r) ? r : p);
  int (*getv)(int *) = (int (*)(int *))dlsym(h, "ncclGetVersion");
  *code = 0;
  if (!getv || getv(code) != 0 || *code <= 0) {
    snprintf(why, wn, "%s has no working ncclGetVersion", path);
    return 0;
  }
  if (!dlsym(h, "ncclCommWindowRegister")) {
    char v[32];
    version_str(*code, v, sizeof v);
    snprintf(why, wn, "%s is NCCL %s, without window registration (ncclCommWindowRegister, NCCL 2.27+)", path, v);
    return 0;
  }
  return 1; /* stays loaded: unloading NCCL is not worth the risk */
}

/* what the Python of the jobs has: the nvidia-nccl wheel's libnccl, and whether PyTorch (with symmetric
 * memory) imports */
static const char *python_script =
    "import os\n"
    "try:\n"
    "    import nvidia.nccl as m\n"
    "    for d in list(getattr(m, '__path__', [])):\n"
    "        p = os.path.join(d, 'lib', 'libnccl.so.2')\n"
    "        if os.path.exists(p): print('NGP wheel=' + p); break\n"
    "except Exception:\n"
    "    pass\n"
    "try:\n"
    "    import torch, torch.distributed._symmetric_memory\n"
    "    if not torch.cuda.is_available(): raise RuntimeError('PyTorch sees no GPU')\n"
    "    print('NGP torch=' + str(torch.__version__))\n"
    "except Exception as e:\n"
    "    print('NGP notorch=' + type(e).__name__ + ': ' + str(e).replace('\\n', ' ')[:160])\n";
static char py_torch[128], py_notorch[256];

static void line_value(const char *text, const char *key, char *out, size_t n) {
  const char *w = strstr(text, key);
  out[0] = 0;
  if (!w) return;
  w += strlen(key);
  snprintf(out, n, "%.*s", (int)strcspn(w, "\n"), w);
}

static void python_facts(const char *python, char *wheel, size_t n) {
  wheel[0] = 0;
  if (!python) return;
  char *argv[] = {(char *)python, "-c", (char *)python_script, NULL};
  const char *o = capture(argv, 30);
  line_value(o, "NGP wheel=", wheel, n);
  line_value(o, "NGP torch=", py_torch, sizeof py_torch);
  line_value(o, "NGP notorch=", py_notorch, sizeof py_notorch);
  if (!py_torch[0] && !py_notorch[0]) snprintf(py_notorch, sizeof py_notorch, "%.200s did not run", python);
}

/* The NCCL to probe: --nccl; else the nvidia-nccl wheel of the Python (the NCCL its PyTorch loads: a job there
 * runs on it, whatever the library path has), else libnccl.so.2 on the library path. The library path's is
 * loaded first: once the wheel's copy (soname libnccl.so.2) is loaded, dlopen("libnccl.so.2") would answer it. */
static int find_nccl(const char *opt, const char *python, struct nccl_found *f, char *why, size_t wn) {
  char wheel[PATH_MAX] = "", e1[1024] = "";
  python_facts(python, wheel, sizeof wheel);
  if (opt) {
    if (!load_nccl(opt, f->path, sizeof f->path, &f->code, e1, sizeof e1)) {
      snprintf(why, wn, "--nccl %s: %s", opt, e1);
      return 0;
    }
    snprintf(f->how, sizeof f->how, "--nccl");
    return 1;
  }
  char lp[PATH_MAX] = "", e2[1024] = "";
  int lp_code = 0, have_lp = load_nccl("libnccl.so.2", lp, sizeof lp, &lp_code, e1, sizeof e1);
  if (wheel[0] && load_nccl(wheel, f->path, sizeof f->path, &f->code, e2, sizeof e2)) {
    snprintf(f->how, sizeof f->how, "the nvidia-nccl wheel of %s%s", python, py_torch[0] ? ", the NCCL its PyTorch loads" : "");
    if (have_lp && strcmp(lp, f->path) != 0) {
      char v[32];
      version_str(lp_code, v, sizeof v);
      snprintf(f->note, sizeof f->note, "libnccl.so.2 on the library path is %.1000s (NCCL %s): --nccl %.1000s probes that one", lp, v, lp);
    }
    return 1;
  }
  if (have_lp) {
    snprintf(f->path, sizeof f->path, "%s", lp);
    f->code = lp_code;
    snprintf(f->how, sizeof f->how, "the library path (LD_LIBRARY_PATH, ld.so.cache)");
    if (wheel[0]) snprintf(f->note, sizeof f->note, "the nvidia-nccl wheel of %.200s (%.1000s) cannot be loaded: %.800s", python, wheel, e2);
    return 1;
  }
  snprintf(why, wn, "no NCCL found: libnccl.so.2 is not on the library path (%s)%s%s%s; install NCCL, put it on "
           "LD_LIBRARY_PATH, or give --nccl PATH", e1, python ? ", and " : "", python ? python : "",
           python ? (wheel[0] ? "'s nvidia-nccl wheel cannot be loaded" : " has no nvidia-nccl wheel") : "");
  return 0;
}

/* ---- the GPUs ---- */
static int gpus_not_shared; /* some GPU's compute mode is not the default: one process on it at a time */
static int count_gpus(char *name, size_t n, char *why, size_t wn) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, wn, "no GPU: the CUDA driver (libcuda.so.1) cannot be loaded (%s); run it on a compute node", e ? e : "?");
    return 0;
  }
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
  int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
  int (*get)(int *, int) = (int (*)(int *, int))dlsym(h, "cuDeviceGet");
  int (*getname)(char *, int, int) = (int (*)(char *, int, int))dlsym(h, "cuDeviceGetName");
  int c = 0, r;
  if (!init || !count) {
    snprintf(why, wn, "no GPU: libcuda.so.1 lacks cuInit/cuDeviceGetCount");
    return 0;
  }
  if ((r = init(0)) != 0 || (r = count(&c)) != 0 || c < 1) {
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    snprintf(why, wn, "no GPU visible (%s%d%s%s); run it on a compute node, check nvidia-smi and CUDA_VISIBLE_DEVICES",
             r ? "CUDA error " : "count ", r ? r : c, cvd ? ", CUDA_VISIBLE_DEVICES=" : "", cvd ? cvd : "");
    return 0;
  }
  int d;
  name[0] = 0;
  if (get && getname && get(&d, 0) == 0) getname(name, (int)n, d);
  /* a GPU in a compute mode other than the default (exclusive process: one context at a time) takes one run at a
   * time: two runs side by side would fail the second to start for the mode's sake, not NCCL's or ncclguard's */
  int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(h, "cuDeviceGetAttribute");
  for (int i = 0; i < c && get && attr; i++) {
    int m = 0;
    if (get(&d, i) == 0 && attr(&m, 20 /* CU_DEVICE_ATTRIBUTE_COMPUTE_MODE */, d) == 0 && m != 0) gpus_not_shared = 1;
  }
  return c;
}

/* ---- one run ---- */
static char progdir[PATH_MAX], guardlib[PATH_MAX], outdir[PATH_MAX], hookdir[PATH_MAX];
static struct nccl_found nccl;
static int host_per_process; /* --ranks beyond the GPUs: each rank process a host of its own (NGTEST_HOST_PER_PROCESS) */

/* the argument list of a scenario: "%R", "%S", "%K" replaced */
static int build_argv(const struct scenario *s, int ranks, const char *rsize, long rtimes, const char *python, char *store,
                      size_t sn, char **argv, int maxv) {
  int argc = 0;
  size_t used = 0;
  int k;
  if (s->torch) { /* python -m torch.distributed.run --standalone --nproc-per-node=N SCRIPT ARGS */
    static char nproc[48];
    snprintf(nproc, sizeof nproc, "--nproc-per-node=%d", ranks);
    argv[argc++] = (char *)python;
    argv[argc++] = "-m";
    argv[argc++] = "torch.distributed.run";
    argv[argc++] = "--standalone";
    argv[argc++] = nproc;
  }
  k = snprintf(store, sn, "%s/%s", progdir, s->prog);
  argv[argc++] = store;
  used = (size_t)k + 1;
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s", s->args);
  for (char *tok = strtok(tmp, " "); tok && argc < maxv - 1; tok = strtok(NULL, " ")) {
    char *dst = store + used;
    if (!strcmp(tok, "%R")) k = snprintf(dst, sn - used, "%d", ranks);
    else if (!strcmp(tok, "%S")) k = snprintf(dst, sn - used, "%s", rsize);
    else if (!strcmp(tok, "%K")) k = snprintf(dst, sn - used, "%ld", rtimes);
    else k = snprintf(dst, sn - used, "%s", tok);
    argv[argc++] = dst;
    used += (size_t)k + 1;
  }
  argv[argc] = NULL;
  return argc;
}

/* LD_PRELOAD without any libncclguard*.so (a probe started under ncclguard-run) */
static void strip_guard_preload(void) {
  const char *pre = getenv("LD_PRELOAD");
  if (!pre) return;
  char out[4096] = "";
  size_t ol = 0;
  for (const char *p = pre; *p;) {
    size_t len = strcspn(p, ": \t");
    const char *base = p;
    for (const char *q = p; q < p + len; q++)
      if (*q == '/') base = q + 1;
    if (len && strncmp(base, "libncclguard", 12) != 0 && ol + len + 2 < sizeof out)
      ol += (size_t)snprintf(out + ol, sizeof out - ol, "%s%.*s", ol ? ":" : "", (int)len, p);
    p += len;
    if (*p) p++;
  }
  if (ol) setenv("LD_PRELOAD", out, 1);
  else unsetenv("LD_PRELOAD");
}

/* Runs one scenario once; writes runs/<name>.<bare|guard>.txt. Returns the exit status (128+signal),
 * or -1 when it was killed at the time limit. */
/* one run of a scenario, started: its process group, its output file, when it began */
struct run {
  pid_t pid;
  double t0;
  char out[PATH_MAX + 128];
};
static int start_run(const struct scenario *s, char **argv, int guard, double limit, struct run *r) {
  char *out = r->out, logd[PATH_MAX + 64];
  r->pid = -1;
  snprintf(out, sizeof r->out, "%s/runs/%s.%s.txt", outdir, s->name, guard ? "guard" : "bare");
  snprintf(logd, sizeof logd, "%s/logs/%s", outdir, s->name);
  if (guard) mkdir(logd, 0755);
  FILE *f = fopen(out, "w");
  if (f) {
    fputc('$', f);
    if (s->env) fprintf(f, " %s", s->env);
    if (host_per_process) fprintf(f, " NGTEST_HOST_PER_PROCESS=1");
    /* PyTorch runs on the probed NCCL: put first, so that libtorch's libnccl.so.2 is that one */
    if (guard || s->torch)
      fprintf(f, " LD_PRELOAD=%s%s%s", guard ? guardlib : "", guard && s->torch ? ":" : "", s->torch ? nccl.path : "");
    for (int i = 0; argv[i]; i++) fprintf(f, " %s", argv[i]);
    fputc('\n', f);
    fclose(f);
  }
  fflush(stdout);
  fflush(stderr);
  r->t0 = now_s();
  pid_t pid = fork();
  if (pid < 0) return -2;
  if (pid == 0) {
    setpgid(0, 0);
    int fd = open(out, O_WRONLY | O_APPEND);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); }
    strip_guard_preload();
    unsetenv("NCCLGUARD_DISABLE");
    setenv("NGTEST_NCCL_LIB", nccl.path, 1);
    if (host_per_process) {
      setenv("NGTEST_HOST_PER_PROCESS", "1", 1);
      setenv("NCCL_SOCKET_IFNAME", "lo", 0); /* the ranks' "hosts" are this one: loopback */
    }
    if (s->torch) { /* PyTorch's rows run on the NCCL probed, not on the one PyTorch would load: put it first */
      const char *pre = getenv("LD_PRELOAD");
      char p[8192];
      snprintf(p, sizeof p, "%s%s%s", nccl.path, pre && *pre ? ":" : "", pre && *pre ? pre : "");
      setenv("LD_PRELOAD", p, 1);
    }
    char t[32];
    snprintf(t, sizeof t, "%d", (int)limit - 2); /* ngtest's watchdog names the step a rank hangs in */
    if (limit >= 5) setenv("NGTEST_TIMEOUT", t, 1);
    else unsetenv("NGTEST_TIMEOUT");
    if (s->env) {
      char kv[256];
      snprintf(kv, sizeof kv, "%s", s->env);
      char *eq = strchr(kv, '=');
      if (eq) { *eq = 0; setenv(kv, eq + 1, 1); }
    }
    if (guard) {
      const char *pre = getenv("LD_PRELOAD");
      char p[8192];
      snprintf(p, sizeof p, "%s%s%s", guardlib, pre && *pre ? ":" : "", pre && *pre ? pre : "");
      setenv("LD_PRELOAD", p, 1);
      setenv("NCCLGUARD_LOG", "info", 1);
      char lf[PATH_MAX + 128];
      snprintf(lf, sizeof lf, "%s/%%h-%%p.log", logd);
      setenv("NCCLGUARD_LOG_FILE", lf, 1);
    }
    if (guard && s->torch && hookdir[0]) { /* as ncclguard-run does: the Python start-up hook too */
      const char *pp = getenv("PYTHONPATH");
      char v[8192];
      snprintf(v, sizeof v, "%s%s%s", hookdir, pp && *pp ? ":" : "", pp && *pp ? pp : "");
      setenv("PYTHONPATH", v, 1);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  r->pid = pid;
  return 0;
}
/* wait for a run started with start_run, killing its process group past LIMIT seconds from its start; its exit
 * status (-1: killed at the limit, 128 + N: signal N) and how long it ran */
static int finish_run(struct run *r, double limit, double *secs) {
  const char *out = r->out;
  pid_t pid = r->pid;
  double t0 = r->t0;
  FILE *f;
  int st = 0, killed = 0;
  for (;;) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (now_s() - t0 > limit) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
      killed = 1;
      break;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill(-pid, SIGKILL); /* what the scenario left behind (its rank processes) */
  *secs = now_s() - t0;
  int rc = killed ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
  f = fopen(out, "a");
  if (f) {
    if (killed) fprintf(f, "# killed after %.0f s (time limit)\n", limit);
    fprintf(f, "# exit status %d\n", rc < 0 ? 137 : rc);
    fclose(f);
  }
  return rc;
}
static int run_one(const struct scenario *s, char **argv, int guard, double limit, double *secs) {
  struct run r;
  int e = start_run(s, argv, guard, limit, &r);
  return e ? e : finish_run(&r, limit, secs);
}

/* ---- outcome and verdict: tests/gpu/run's words ---- */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return strdup("");
  size_t cap = 1 << 16, len = 0;
  char *b = malloc(cap);
  size_t got;
  while (b && (got = fread(b + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 >= cap) {
      if (cap >= (8u << 20)) break;
      char *nb = realloc(b, cap *= 2);
      if (!nb) break;
      b = nb;
    }
  }
  fclose(f);
  if (b) b[len] = 0;
  return b ? b : strdup("");
}

static const char *sig_name(int s) {
  static char buf[16];
  static const struct { int n; const char *s; } t[] = {{SIGSEGV, "SIGSEGV"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},
                                                         {SIGILL, "SIGILL"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
                                                         {SIGTERM, "SIGTERM"}, {SIGTRAP, "SIGTRAP"}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    if (t[i].n == s) return t[i].s;
  snprintf(buf, sizeof buf, "SIG%d", s);
  return buf;
}

/* text after `key` up to one of `stop` (or the line's end), into out */
static int after(const char *text, const char *key, const char *stop, char *out, size_t n) {
  const char *p = strstr(text, key);
  if (!p) return 0;
  p += strlen(key);
  size_t k = strcspn(p, stop);
  while (k > 0 && p[k - 1] == ' ') k--;
  snprintf(out, n, "%.*s", (int)k, p);
  return 1;
}

static void outcome(const char *file, int rc, char *out, size_t n) {
  char *t = slurp(file), w[256];
  if (rc == -1 || rc == 124 || rc == 137) {
    /* "rank R/N: RESULT fail hang in STEP (watchdog ...)" -> "hang (rank R in STEP)" */
    const char *h = strstr(t, ": RESULT fail hang in ");
    const char *b = h;
    while (b && b > t && b[-1] != '\n') b--;
    int r = -1;
    if (h && sscanf(b, "rank %d/", &r) == 1 && after(h, "RESULT fail hang in ", "(\n", w, sizeof w) && w[0])
      snprintf(out, n, "hang (rank %d in %.100s)", r, w);
    else snprintf(out, n, "hang");
  } else {
    int sig = 0;
    const char *k = strstr(t, "killed by signal ");
    if (k) sig = atoi(k + strlen("killed by signal "));
    /* torchrun: "Signal 11 (SIGSEGV) received by PID ..." or "exitcode  : -11" */
    if (!sig && (k = strstr(t, "Signal ")) != NULL && strstr(k, " (SIG") == k + 7 + strspn(k + 7, "0123456789"))
      sig = atoi(k + 7);
    if (!sig && (k = strstr(t, "exitcode")) != NULL) {
      k += strlen("exitcode");
      k += strspn(k, " ");
      if (*k == ':') {
        k++;
        k += strspn(k, " ");
        if (*k == '-') sig = atoi(k + 1);
      }
    }
    if (!sig && rc > 128) sig = rc - 128;
    if (sig == SIGTERM && strstr(t, "RESULT fail")) sig = 0; /* the others stopped after one rank failed */
    if (sig) snprintf(out, n, "crash (%s)", sig_name(sig));
    else if (rc == 77) {
      after(t, "RESULT skip ", "|\n", w, sizeof w);
      snprintf(out, n, "skip: %.100s", w);
    } else if (rc == 0) {
      if (after(t, "RESULT ok reg=", " \n", w, sizeof w) && strcmp(w, "ncclSuccess") && strcmp(w, "none"))
        snprintf(out, n, "ok, reg=%.100s", w);
      else {
        int null = 0;
        for (const char *p = t; (p = strstr(p, "RESULT ok")) != NULL; p++) {
          size_t l = strcspn(p, "\n");
          const char *q = strstr(p, " win=null");
          if (q && q < p + l) null = 1;
        }
        snprintf(out, n, "%s", null ? "ok, win=NULL" : "ok");
      }
    } else if (after(t, "RESULT fail ", "|\n", w, sizeof w) && w[0]) {
      snprintf(out, n, "fail: %.84s", w);
    } else if (after(t, "rendezvous=", " \n", w, sizeof w) && w[0]) {
      snprintf(out, n, "fail: rendezvous=%.72s", w);
    } else {
      snprintf(out, n, "fail: exit %d", rc);
    }
  }
  free(t);
}

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* the version code of a run's "loaded NCCL version CODE" line (0: none) */
static int loaded_code(const char *file) {
  char *t = slurp(file);
  const char *k = strstr(t, "loaded NCCL version ");
  int c = k ? atoi(k + strlen("loaded NCCL version ")) : 0;
  free(t);
  return c > 0 ? c : 0;
}

static void verdict(const char *a, const char *g, char *out, size_t n) {
  if (starts(a, "skip") || starts(g, "skip")) snprintf(out, n, "skip");
  else if (starts(a, "ok") && starts(g, "ok")) {
    if (!strcmp(a, g)) snprintf(out, n, "same");
    else snprintf(out, n, "same, changed: %s", g);
  } else if (starts(g, "ok")) snprintf(out, n, "fixed");
  else if (starts(a, "ok")) snprintf(out, n, "REGRESSION");
  else if ((starts(a, "crash") || starts(a, "hang")) && starts(g, "fail")) {
    size_t k = strcspn(a, " ");
    snprintf(out, n, "clean error (was %.*s)", (int)k, a);
  } else snprintf(out, n, "unchanged");
}

/* ---- the output directory ---- */
static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

static void print_list(void) {
  for (int i = 0; i < NSCEN; i++) printf("%-24s %d rank%s  %s\n", catalogue[i].name, catalogue[i].ranks, catalogue[i].ranks > 1 ? "s" : " ", catalogue[i].what);
}

int ng_probe_main(int argc, char **argv) {
  const char *opt_nccl = NULL, *python = getenv("PYTHON"), *only = NULL, *opt_out = NULL;
  long gpus = 1, budget = 60, timeout = 20, opt_ranks = 0;
  int gpus_given = 0;
  int use_python = 1, use_torch = 1;
  unsigned long long rsize = 64ULL << 20;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--probe")) continue;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(probe_usage, stdout); return 0; }
    if (!strcmp(a, "--list")) { print_list(); return 0; }
    if (!strcmp(a, "--json")) { opt_json = 1; continue; }
    if (!strcmp(a, "--no-python")) { use_python = 0; continue; }
    if (!strcmp(a, "--no-torch")) { use_torch = 0; continue; }
    static const char *with_arg[] = {"--nccl", "--nccl-lib", "--gpus", "--ranks", "--budget", "--timeout", "--only", "--outdir", "--python", "--repeat-size", NULL};
    int known = 0;
    for (int k = 0; with_arg[k]; k++) known |= !strcmp(a, with_arg[k]);
    if (!known) return usage_error("unknown option '%s'", a);
    if (i + 1 >= argc || !argv[i + 1][0]) return usage_error("option %s needs an argument", a);
    const char *v = argv[++i];
    if (!strcmp(a, "--nccl") || !strcmp(a, "--nccl-lib")) opt_nccl = v;
    else if (!strcmp(a, "--gpus")) { if (!parse_long(v, 1, 64, &gpus)) return usage_error("--gpus needs 1..64, not '%s'", v); gpus_given = 1; }
    else if (!strcmp(a, "--ranks")) { if (!parse_long(v, 1, 64, &opt_ranks)) return usage_error("--ranks needs 1..64, not '%s'", v); }
    else if (!strcmp(a, "--budget")) { if (!parse_long(v, 1, 3600, &budget)) return usage_error("--budget needs 1..3600 seconds, not '%s'", v); }
    else if (!strcmp(a, "--timeout")) { if (!parse_long(v, 2, 600, &timeout)) return usage_error("--timeout needs 2..600 seconds, not '%s'", v); }
    else if (!strcmp(a, "--only")) only = v;
    else if (!strcmp(a, "--outdir")) opt_out = v;
    else if (!strcmp(a, "--python")) python = v;
    else if (!strcmp(a, "--repeat-size")) {
      if (!parse_size(v, &rsize)) return usage_error("--repeat-size needs a size such as 64M or 1G (at most 64G), not '%s'", v);
    }
  }
  regex_t re;
  if (only && regcomp(&re, only, REG_EXTENDED | REG_NOSUB) != 0) return usage_error("--only '%s' is not a valid regular expression", only);
  if (!use_python) python = NULL;
  else if (!python || !*python) python = "python3";
  signal(SIGPIPE, SIG_IGN);
  t_start = now_s();

  /* the probe's programs and the library, next to this executable */
  char dir[PATH_MAX];
  if (!exe_dir(dir, sizeof dir)) return cannot("cannot tell where ncclguard-doctor is (/proc/self/exe)");
  static const char *const prog_rel[] = {"probe", "../libexec/ncclguard", NULL};
  static const char *const lib_rel[] = {"libncclguard.so", "../lib/libncclguard.so", "../lib64/libncclguard.so", NULL};
  if (!find_near(dir, prog_rel, "ngtest", progdir, sizeof progdir))
    return cannot("the probe's programs are not installed next to ncclguard-doctor (%s/probe, %s/../libexec/ncclguard): "
                  "make install, or pip install ncclguard", dir, dir);
  const char *lib_env = getenv("NCCLGUARD_LIB");
  char r[PATH_MAX];
  if (lib_env && *lib_env && access(lib_env, R_OK) == 0 && realpath(lib_env, r)) snprintf(guardlib, sizeof guardlib, "%s", r);
  else if (!find_near(dir, lib_rel, NULL, guardlib, sizeof guardlib))
    return cannot("libncclguard.so is not next to ncclguard-doctor (%s, %s/../lib): make install, or set NCCLGUARD_LIB", dir, dir);

  static const char *const hook_rel[] = {"python", "../share/ncclguard/python", "../tools/python", NULL};
  if (!find_near(dir, hook_rel, "sitecustomize.py", hookdir, sizeof hookdir)) hookdir[0] = 0;

  char why[2048], gpu_name[256];
  if (!find_nccl(opt_nccl, python, &nccl, why, sizeof why)) return cannot("%s", why);
  int present = count_gpus(gpu_name, sizeof gpu_name, why, sizeof why);
  if (present < 1) return cannot("%s", why);
  /* --ranks without --gpus: as many GPUs as there are ranks, up to those present */
  if (opt_ranks && !gpus_given) gpus = opt_ranks;
  int used = (int)(gpus < present ? gpus : present);
  int nranks = opt_ranks ? (int)opt_ranks : used; /* of the scenarios of several ranks, and PyTorch's */
  host_per_process = nranks > used;
  char ver[32], layout[160];
  version_str(nccl.code, ver, sizeof ver);
  if (host_per_process)
    snprintf(layout, sizeof layout, "%d ranks on %d GPU%s as %d hosts (network transport)", nranks, used, used == 1 ? "" : "s", nranks);
  else
    snprintf(layout, sizeof layout, "%d of %d GPU%s", used, present, present == 1 ? "" : "s");

  /* where the runs' outputs go */
  int temp_out = 0;
  if (opt_out) {
    if (mkdir(opt_out, 0755) != 0 && errno != EEXIST) return cannot("--outdir %s: %s", opt_out, strerror(errno));
    if (!realpath(opt_out, outdir)) return cannot("--outdir %s: %s", opt_out, strerror(errno));
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(outdir, sizeof outdir, "%s/ncclguard-probe.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(outdir)) return cannot("cannot make a temporary directory (%s): %s", outdir, strerror(errno));
    temp_out = 1;
  }
  char sub[PATH_MAX + 16];
  snprintf(sub, sizeof sub, "%s/runs", outdir);
  mkdir(sub, 0755);
  snprintf(sub, sizeof sub, "%s/logs", outdir);
  mkdir(sub, 0755);

  fprintf(stderr, "ncclguard-doctor --probe: NCCL %s, %s (found by %s)\n", ver, nccl.path, nccl.how);
  if (nccl.note[0]) fprintf(stderr, "ncclguard-doctor --probe: note: %s\n", nccl.note);
  fprintf(stderr, "ncclguard-doctor --probe: every row runs on NCCL %s, the PyTorch rows too (put first with LD_PRELOAD)\n", ver);
  if (host_per_process)
    fprintf(stderr, "ncclguard-doctor --probe: %s: rank r on GPU r mod %d, each rank process a host of its own (NCCL_HOSTID)\n", layout, used);
  fprintf(stderr, "ncclguard-doctor --probe: %d of %d GPU%s (%s), ncclguard %s (%s); budget %ld s, %ld s a run\n", used, present,
          present == 1 ? "" : "s", gpu_name[0] ? gpu_name : "?", NG_PROBE_IDENTITY, guardlib, budget, timeout);

  /* the repeated registration: enough repeats to pass a 4 GiB symmetric space (NCCL_WIN_STRIDE, rounded) */
  long rtimes = rsize ? (long)((4ULL << 30) / rsize) + 8 : 0;
  if (rtimes > 5000) rtimes = 5000;

  struct result res[NSCEN];
  memset(res, 0, sizeof res);
  int other_nccl = 0; /* rows whose runs said they loaded another NCCL */
  int nsel = 0, k = 0;
  for (int i = 0; i < NSCEN; i++) nsel += !only || regexec(&re, catalogue[i].name, 0, NULL, 0) == 0;
  for (int i = 0; i < NSCEN; i++) {
    const struct scenario *s = &catalogue[i];
    struct result *R = &res[i];
    if (only && regexec(&re, s->name, 0, NULL, 0) != 0) continue;
    k++;
    if (!strcmp(s->prog, "repeat") && !rsize) {
      R->run = 2;
      snprintf(R->bare, sizeof R->bare, "skip: --repeat-size 0");
      snprintf(R->guard, sizeof R->guard, "%s", R->bare);
      snprintf(R->verdict, sizeof R->verdict, "skip");
      fprintf(stderr, "  [%d/%d] %-24s %s\n", k, nsel, s->name, R->bare);
      continue;
    }
    const char *tskip = !s->torch ? NULL : !use_torch ? "--no-torch" : !python ? "--no-python"
                        : py_notorch[0] ? py_notorch : NULL;
    char tsp[PATH_MAX + 32];
    snprintf(tsp, sizeof tsp, "%s/%s", progdir, s->prog);
    if (s->torch && !tskip && access(tsp, R_OK) != 0) tskip = "torch_symm.py is not installed with the probe";
    if (tskip) {
      R->run = 2;
      snprintf(R->bare, sizeof R->bare, "skip: %.100s", tskip);
      snprintf(R->guard, sizeof R->guard, "%s", R->bare);
      snprintf(R->verdict, sizeof R->verdict, "skip");
      fprintf(stderr, "  [%d/%d] %-24s %s\n", k, nsel, s->name, R->bare);
      continue;
    }
    if (s->ranks > (opt_ranks ? nranks : used)) {
      R->run = 2;
      if (opt_ranks) snprintf(R->bare, sizeof R->bare, "skip: needs %d ranks (--ranks %d)", s->ranks, s->ranks);
      else if (present >= s->ranks) snprintf(R->bare, sizeof R->bare, "skip: needs %d GPUs (--gpus %d)", s->ranks, s->ranks);
      else snprintf(R->bare, sizeof R->bare, "skip: needs %d GPUs, %d here", s->ranks, present);
      snprintf(R->guard, sizeof R->guard, "%s", R->bare);
      snprintf(R->verdict, sizeof R->verdict, "skip");
      fprintf(stderr, "  [%d/%d] %-24s %s\n", k, nsel, s->name, R->bare);
      continue;
    }
    double left = budget - (now_s() - t_start);
    /* a scenario starts only where both its runs can finish in the budget left (a PyTorch run takes 9 - 15 s
     * under torchrun on an H200, mostly Python's start-up; the two runs of a PyTorch scenario go side by side) */
    int side_by_side = s->torch && !gpus_not_shared;
    double need = side_by_side ? 17 : s->torch ? 32 : 3;
    if (left < need) {
      snprintf(R->bare, sizeof R->bare, "not run");
      snprintf(R->guard, sizeof R->guard, "not run");
      snprintf(R->verdict, sizeof R->verdict, "not run (time budget)");
      fprintf(stderr, "  [%d/%d] %-24s not run (time budget)\n", k, nsel, s->name);
      continue;
    }
    char store[PATH_MAX + 1024], *av[32], rs[32];
    snprintf(rs, sizeof rs, "%llu", rsize);
    /* PyTorch: one process per rank; the scenarios of several ranks: --ranks when given, else their own count */
    int rk = s->torch ? nranks : s->ranks > 1 && opt_ranks ? nranks : s->ranks;
    build_argv(s, rk, rs, rtimes, python, store, sizeof store, av, 32);
    R->run = 1;
    double lim = left < timeout ? left : timeout;
    int cut;
    if (side_by_side) {
      /* side by side: each its own torchrun (its own rendezvous port), processes and log; one after the other,
       * two PyTorch scenarios do not fit in the default budget after the others */
      fprintf(stderr, "  [%d/%d] %-24s (both runs at once) ", k, nsel, s->name);
      struct run rb, rg;
      int eb = start_run(s, av, 0, lim, &rb), eg = start_run(s, av, 1, lim, &rg);
      R->bare_rc = eb ? eb : finish_run(&rb, lim, &R->bare_s);
      R->guard_rc = eg ? eg : finish_run(&rg, lim, &R->guard_s);
      snprintf(sub, sizeof sub, "%s/runs/%s.bare.txt", outdir, s->name);
      outcome(sub, R->bare_rc, R->bare, sizeof R->bare);
      snprintf(sub, sizeof sub, "%s/runs/%s.guard.txt", outdir, s->name);
      outcome(sub, R->guard_rc, R->guard, sizeof R->guard);
      cut = lim < timeout && (starts(R->bare, "hang") || starts(R->guard, "hang"));
      fprintf(stderr, "NCCL alone: %s (%.1f s); with ncclguard: ", R->bare, R->bare_s);
    } else {
      fprintf(stderr, "  [%d/%d] %-24s NCCL alone: ", k, nsel, s->name);
      R->bare_rc = run_one(s, av, 0, lim, &R->bare_s);
      snprintf(sub, sizeof sub, "%s/runs/%s.bare.txt", outdir, s->name);
      outcome(sub, R->bare_rc, R->bare, sizeof R->bare);
      cut = lim < timeout && starts(R->bare, "hang"); /* stopped by the budget, not by the hang timeout */
      fprintf(stderr, "%s (%.1f s); with ncclguard: ", R->bare, R->bare_s);
      left = budget - (now_s() - t_start);
      if (left < 1) left = 1; /* a scenario begun is finished: the guard run gets at least a second */
      lim = left < timeout ? left : timeout;
      R->guard_rc = run_one(s, av, 1, lim, &R->guard_s);
      snprintf(sub, sizeof sub, "%s/runs/%s.guard.txt", outdir, s->name);
      outcome(sub, R->guard_rc, R->guard, sizeof R->guard);
      cut |= lim < timeout && starts(R->guard, "hang");
    }
    verdict(R->bare, R->guard, R->verdict, sizeof R->verdict);
    if (cut) { /* a run the budget stopped says nothing: not a hang */
      if (starts(R->bare, "hang")) snprintf(R->bare, sizeof R->bare, "stopped (time budget)");
      if (starts(R->guard, "hang")) snprintf(R->guard, sizeof R->guard, "stopped (time budget)");
      snprintf(R->verdict, sizeof R->verdict, "not run (time budget)");
    }
    /* the NCCL the runs loaded, as they say ("loaded NCCL version CODE": ngtest, torch_symm.py); a run that says
     * nothing ran on the one probed (NGTEST_NCCL_LIB, or put first) */
    snprintf(sub, sizeof sub, "%s/runs/%s.bare.txt", outdir, s->name);
    int cb = loaded_code(sub);
    snprintf(sub, sizeof sub, "%s/runs/%s.guard.txt", outdir, s->name);
    int cg = loaded_code(sub);
    R->nccl_code = cb ? cb : cg ? cg : nccl.code;
    if ((cb && cb != nccl.code) || (cg && cg != nccl.code)) {
      char vb[32], vg[32];
      version_str(cb ? cb : nccl.code, vb, sizeof vb);
      version_str(cg ? cg : nccl.code, vg, sizeof vg);
      size_t l = strlen(R->verdict);
      snprintf(R->verdict + l, sizeof R->verdict - l, " (ran on NCCL %s / %s, not %s)", vb, vg, ver);
      other_nccl++;
    }
    char rv[32];
    version_str(R->nccl_code, rv, sizeof rv);
    fprintf(stderr, "%s (%.1f s): %s [NCCL %s]\n", R->guard, R->guard_s, R->verdict, rv);
    /* NCCL alone cannot do the normal thing here: nothing else can be measured */
    if (!strcmp(s->name, "normal") && !starts(R->bare, "ok"))
      return cannot("NCCL alone fails the normal scenario on this node (%s): fix that first (ncclguard-doctor without "
                    "--probe checks the node; the run's output is %s/runs/normal.bare.txt)", R->bare, outdir);
  }
  double total = now_s() - t_start;

  int nfixed = 0, nclean = 0, nsame = 0, nreg = 0, nother = 0, nskip = 0, nnotrun = 0;
  char regs[512] = "";
  for (int i = 0; i < NSCEN; i++) {
    const char *v = res[i].verdict;
    if (!v[0]) continue;
    if (!strcmp(v, "fixed")) nfixed++;
    else if (starts(v, "clean error")) nclean++;
    else if (starts(v, "same")) nsame++;
    else if (!strcmp(v, "REGRESSION")) {
      nreg++;
      size_t l = strlen(regs);
      snprintf(regs + l, sizeof regs - l, "%s%s", l ? ", " : "", catalogue[i].name);
    } else if (starts(v, "skip")) nskip++;
    else if (starts(v, "not run")) nnotrun++;
    else nother++;
  }
  int code = nreg ? 1 : 0;
  char closing[PATH_MAX + 1024];
  if (nreg)
    snprintf(closing, sizeof closing, "REGRESSION in %s: worked with NCCL alone, not with ncclguard; the runs are in %s", regs, outdir);
  else
    snprintf(closing, sizeof closing, "nothing is worse with ncclguard (%d fixed, %d clean error, %d same, %d unchanged, %d skipped%s)",
             nfixed, nclean, nsame, nother, nskip, nnotrun ? ", some not run: raise --budget" : "");

  if (opt_json) {
    printf("{\"probe\":1,\"exit\":%d,\"summary\":", code);
    json_str(stdout, closing);
    printf(",\"seconds\":%.1f,\"budget\":%ld,\"timeout\":%ld,\"nccl\":{\"version\":", total, budget, timeout);
    json_str(stdout, ver);
    printf(",\"code\":%d,\"path\":", nccl.code);
    json_str(stdout, nccl.path);
    fputs(",\"found_by\":", stdout);
    json_str(stdout, nccl.how);
    printf("},\"gpus\":{\"present\":%d,\"used\":%d,\"name\":", present, used);
    json_str(stdout, gpu_name);
    printf("},\"ranks\":{\"count\":%d,\"hosts\":%d,\"layout\":", nranks, host_per_process ? nranks : 1);
    json_str(stdout, layout);
    fputs("},\"ncclguard\":{\"version\":", stdout);
    json_str(stdout, NG_PROBE_IDENTITY);
    fputs(",\"lib\":", stdout);
    json_str(stdout, guardlib);
    fputs("},\"outdir\":", stdout);
    if (temp_out && !nreg) fputs("null", stdout);
    else json_str(stdout, outdir);
    fputs(",\"scenarios\":[", stdout);
    int first = 1;
    for (int i = 0; i < NSCEN; i++) {
      const struct result *R = &res[i];
      if (!R->verdict[0]) continue;
      printf("%s{\"name\":", first ? "" : ",");
      first = 0;
      json_str(stdout, catalogue[i].name);
      printf(",\"ranks\":%d,\"what\":", catalogue[i].ranks);
      json_str(stdout, catalogue[i].what);
      fputs(",\"bare\":", stdout);
      json_str(stdout, R->bare);
      fputs(",\"guard\":", stdout);
      json_str(stdout, R->guard);
      fputs(",\"verdict\":", stdout);
      json_str(stdout, R->verdict);
      if (R->nccl_code) {
        char rv[32];
        version_str(R->nccl_code, rv, sizeof rv);
        fputs(",\"nccl\":", stdout);
        json_str(stdout, rv);
      } else fputs(",\"nccl\":null", stdout);
      if (R->run == 1)
        printf(",\"bare_exit\":%d,\"guard_exit\":%d,\"bare_seconds\":%.2f,\"guard_seconds\":%.2f", R->bare_rc < 0 ? 137 : R->bare_rc,
               R->guard_rc < 0 ? 137 : R->guard_rc, R->bare_s, R->guard_s);
      fputs("}", stdout);
    }
    fputs("]}\n", stdout);
  } else {
    printf("ncclguard-doctor --probe: NCCL %s (%s, found by %s); %s; %s\n", ver, nccl.path, nccl.how, layout,
           other_nccl ? "the rows marked 'ran on' loaded another NCCL" : "every row that ran ran on it, PyTorch's too");
    printf("%-24s | %-40s | %-40s | %s\n", "scenario", "NCCL alone", "with ncclguard", "verdict");
    printf("%-24s-+-%-40s-+-%-40s-+-%s\n", "------------------------", "----------------------------------------",
           "----------------------------------------", "--------");
    for (int i = 0; i < NSCEN; i++)
      if (res[i].verdict[0]) printf("%-24s | %-40s | %-40s | %s\n", catalogue[i].name, res[i].bare, res[i].guard, res[i].verdict);
    printf("ncclguard-doctor --probe: %.1f s; %s\n", total, closing);
  }
  fflush(stdout);
  if (opt_json) fprintf(stderr, "ncclguard-doctor --probe: %.1f s; %s\n", total, closing);
  if (temp_out && !nreg) nftw(outdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  else if (!nreg) fprintf(stderr, "ncclguard-doctor --probe: the runs are in %s\n", outdir);
  if (only) regfree(&re);
  return code;
}
