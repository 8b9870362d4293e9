/* ncclguard-doctor: the checklist for "window registration fails", automated.
 * One line per check: OK|WARN|FAIL  check-name  detail  [fix: ...]; --json for JSON lines.
 * libnccl and libcuda are loaded with dlopen at run time (no NEEDED entry on either). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include "identity.h" /* NG_IDENTITY, for --version */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "varinfo.h" /* the table of variables (shim/vars.def) and its reader, shared with the library */
#include "probe.h"   /* --probe: the known failures measured, NCCL alone and with ncclguard (tools/probe.c) */

/* The CUDA driver API: prototypes from cuda.h when it is there, so the compiler checks the
 * signatures; a minimal equivalent otherwise (the tools must build with nccl.h alone). */
#if defined(__has_include)
#if __has_include(<cuda.h>)
#include <cuda.h>
#define HAVE_CUDA_H 1
#endif
#endif
#ifndef HAVE_CUDA_H
typedef int CUresult;
typedef int CUdevice;
#define CUDA_SUCCESS 0
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED 102
CUresult cuInit(unsigned int);
CUresult cuDriverGetVersion(int *);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetName(char *, int, CUdevice);
CUresult cuDeviceGetAttribute(int *, int, CUdevice);
CUresult cuDeviceCanAccessPeer(int *, CUdevice, CUdevice);
CUresult cuGetErrorName(CUresult, const char **);
#endif

/* ncclGetVersion: declared here rather than through nccl.h, which needs cuda_runtime.h. */
typedef int (*nccl_get_version_fn)(int *);

#define NG_NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

static const char *usage_text =
    "Usage: ncclguard-doctor [options]\n"
    "\n"
    "Checks what NCCL window registration needs on this host and in this environment:\n"
    "the libnccl a job would load and what its version means, the CUDA driver, each GPU\n"
    "(name, compute capability, virtual memory management), peer access between GPUs,\n"
    "NCCL variables (environment, ~/.nccl.conf, /etc/nccl.conf) that switch windows off\n"
    "or change them, the launcher's rendezvous variables (MASTER_ADDR/MASTER_PORT/RANK/\n"
    "WORLD_SIZE/LOCAL_RANK, port reachable), NCCLGUARD_* variables, ncclguard itself,\n"
    "and PyTorch (version, the NCCL it loads, advice for its lazy communicators).\n"
    "\n"
    "Output: one line per check, 'OK|WARN|FAIL|INFO  check  detail  [fix: ...]' (at a terminal:\n"
    "wrapped at its width, the fix on a line of its own). INFO lines name the known\n"
    "window-registration bugs of the NCCL found (docs/NCCL.md section 10) and what ncclguard\n"
    "does about each; they never change the exit status. Where ncclguard is on\n"
    "(libncclguard.so in LD_PRELOAD, as under ncclguard-run, or NCCLGUARD=1 for the Python\n"
    "package), a problem it answers (a NULL communicator, registration under graph capture)\n"
    "is OK, 'guarded', not a WARN: ncclguard-run ncclguard-doctor -q --strict shows what is left.\n"
    "\n"
    "On a compute node, start with --probe: it runs the known failures there, NCCL alone and\n"
    "with ncclguard, and prints what ncclguard fixes and whether anything is worse\n"
    "(ncclguard-doctor --probe --help).\n"
    "\n"
    "Options:\n"
    "  --probe           measure instead of check: each scenario, NCCL alone and with ncclguard,\n"
    "                    a table of verdicts (fixed, same, clean error, REGRESSION); its own\n"
    "                    options: --nccl PATH, --gpus N, --budget S (default 60), --json, ...\n"
    "                    Exit 0 nothing worse, 1 a REGRESSION, 2 could not probe\n"
    "  --json            one JSON object per line: {\"status\",\"check\",\"detail\",\"fix\"}\n"
    "  -q, --quiet       print only WARN and FAIL lines (no INFO, no summary line)\n"
    "  --strict          WARN counts as a failure for the exit status\n"
    "  --nccl-lib PATH   check this libnccl (default: NCCLGUARD_NCCL_LIB, libnccl.so.2 as\n"
    "                    the dynamic linker finds it, python3's nvidia-nccl wheel,\n"
    "                    /usr/local/cuda/lib*)\n"
    "  --cuda-lib PATH   check this libcuda (default: NCCLGUARD_CUDA_LIB, libcuda.so.1)\n"
    "  --python PATH     Python interpreter to probe (default: $PYTHON, python3); one that\n"
    "                    does not exist is a usage error\n"
    "  --no-python       skip the PyTorch checks\n"
    "  --connect-timeout SEC  TCP check of MASTER_ADDR:MASTER_PORT (default 2)\n"
    "  --config-only     check the configuration alone: the NCCLGUARD_* variables, NCCLGUARD\n"
    "                    and the NCCL_* variables (environment, NCCL's configuration files);\n"
    "                    no driver, GPU, NCCL or Python probe, so it runs on a login node too.\n"
    "                    Exit 0 valid, 2 not\n"
    "  --vars            list the variables (values, default, meaning) and exit\n"
    "  --version      the version of ncclguard\n"
    "  -h, --help        this text\n"
    "\n"
    "Exit status: 0 no FAIL (WARN allowed unless --strict); 1 some FAIL of the host (driver,\n"
    "GPUs, NCCL, launcher, Python); 2 a usage error, or the configuration is not valid (a FAIL\n"
    "of an env.* check: an NCCLGUARD_* value not valid, an NCCL variable that switches windows\n"
    "off; with --strict also a WARN of one), whatever the host.\n"
    "\n"
    "Documentation: tools/README.md and docs/ of the source tree; installed with pip, the same\n"
    "paths under the folder that python -m ncclguard --docs prints.\n";

/* ---- output ---- */

static int opt_json, opt_quiet, opt_strict;
static int n_ok, n_warn, n_fail, n_info;
/* FAIL and WARN lines of the configuration checks (env.*): exit status 2, not 1 */
static int n_cfg_fail, n_cfg_warn;

/* INFO: a fact to know (a known NCCL bug of the version found); counted apart, never in the exit status */
enum { OK, WARN, FAIL, INFO };
static const char *status_name[] = {"OK", "WARN", "FAIL", "INFO"};

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': fputs("\\\"", f); break;
      case '\\': fputs("\\\\", f); break;
      case '\n': fputs("\\n", f); break;
      case '\t': fputs("\\t", f); break;
      case '\r': fputs("\\r", f); break;
      default:
        if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* The terminal's width when standard output is one (at least 60 columns counted), else 0: rows are
 * wrapped only for a reader, never in a pipe or a file. */
static int term_width(void) {
  static int w = -1;
  if (w < 0) {
    struct winsize ws;
    w = isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? (ws.ws_col < 60 ? 60 : ws.ws_col) : 0;
  }
  return w;
}

/* text from column `indent` (the cursor is there), broken at blanks before column `width`, each
 * further line indented to `indent`; ends with a newline */
static void put_wrapped(const char *text, int indent, int width) {
  int room = width - indent - 1 > 20 ? width - indent - 1 : 20;
  const char *p = text;
  while (*p) {
    int n = (int)strlen(p);
    if (n > room) {
      int cut = room;
      while (cut > 0 && p[cut] != ' ') cut--;
      if (cut == 0) { /* one long word: cut at the next blank */
        cut = room;
        while (p[cut] && p[cut] != ' ') cut++;
      }
      n = cut;
    }
    printf("%.*s\n", n, p);
    p += n;
    while (*p == ' ') p++;
    if (*p) printf("%*s", indent, "");
  }
  if (!*text) putchar('\n');
}

/* report(status, check, fix or NULL, detail format, ...) */
__attribute__((format(printf, 4, 5))) static void report(int st, const char *check, const char *fix, const char *fmt, ...) {
  char detail[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  for (char *p = detail; *p; p++)
    if (*p == '\n') *p = ' ';
  if (st == OK) n_ok++;
  else if (st == WARN) n_warn++;
  else if (st == INFO) n_info++;
  else n_fail++;
  if (!strncmp(check, "env.", 4)) {
    if (st == FAIL) n_cfg_fail++;
    else if (st == WARN) n_cfg_warn++;
  }
  if (opt_quiet && (st == OK || st == INFO)) return;
  if (opt_json) {
    fputs("{\"status\":", stdout);
    json_str(stdout, status_name[st]);
    fputs(",\"check\":", stdout);
    json_str(stdout, check);
    fputs(",\"detail\":", stdout);
    json_str(stdout, detail);
    fputs(",\"fix\":", stdout);
    if (fix) json_str(stdout, fix);
    else fputs("null", stdout);
    fputs("}\n", stdout);
  } else {
    char head[64];
    snprintf(head, sizeof head, "%-4s  %-22s  ", status_name[st], check);
    int width = term_width();
    if (!width) { /* not a terminal: one line per check, for grep and scripts */
      printf("%s%s", head, detail);
      if (fix) printf("  fix: %s", fix);
      putchar('\n');
    } else { /* a terminal: wrapped at its width, the fix on a line of its own */
      int indent = (int)strlen(head);
      fputs(head, stdout);
      put_wrapped(detail, indent, width);
      if (fix) {
        printf("%*s", indent, "");
        char f2[4200];
        snprintf(f2, sizeof f2, "fix: %s", fix);
        put_wrapped(f2, indent, width);
      }
    }
  }
  fflush(stdout);
}

/* ---- small helpers ---- */

static int parse_int(const char *s, long *out) {
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end) return 0;
  *out = v;
  return 1;
}

static void version_str(int code, char *buf, size_t n) {
  int major, minor, patch;
  if (code >= 10000) {
    major = code / 10000; minor = code % 10000 / 100; patch = code % 100;
  } else {
    major = code / 1000; minor = code % 1000 / 100; patch = code % 100;
  }
  snprintf(buf, n, "%d.%d.%d", major, minor, patch);
}

/* version code of "2.28.9" (or 0) */
static int version_code(const char *s) {
  int a = 0, b = 0, c = 0;
  if (sscanf(s, "%d.%d.%d", &a, &b, &c) < 2) return 0;
  return NG_NCCL_VERSION(a, b, c);
}

static const char *lib_path(void *h, const char *fallback) {
  struct link_map *lm = NULL;
  if (h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) return lm->l_name;
  return fallback;
}

/* ---- the Python probe (run once, early: it also names the nvidia-nccl wheel) ---- */

static struct {
  int ran;             /* the interpreter could be started */
  int timed_out;
  char interp[512];
  char py_version[64];
  char torch_version[128];
  char torch_cuda[64];
  char torch_nccl[64]; /* "2.28.9" */
  char torch_pin[64];  /* "2.28.9": the nvidia-nccl version torch's package requires, if pinned */
  char torch_error[512];
  char torch_path[1024];
  char wheel_nccl[1024]; /* .../nvidia/nccl/lib/libnccl.so.2 */
} py;

static const char *py_script =
    "import sys, os\n"
    "print('NGD py_version=' + sys.version.split()[0])\n"
    "try:\n"
    "    import nvidia.nccl as m\n"
    "    for d in list(getattr(m, '__path__', [])):\n"
    "        p = os.path.join(d, 'lib', 'libnccl.so.2')\n"
    "        if os.path.exists(p):\n"
    "            print('NGD wheel_nccl=' + p); break\n"
    "except Exception:\n"
    "    pass\n"
    "try:\n"
    "    import torch\n"
    "    print('NGD torch_version=' + str(torch.__version__))\n"
    "    print('NGD torch_path=' + os.path.dirname(torch.__file__))\n"
    "    print('NGD torch_cuda=' + str(torch.version.cuda))\n"
    "    try:\n"
    "        v = torch.cuda.nccl.version()\n"
    "        if isinstance(v, tuple): v = '.'.join(str(x) for x in v[:3])\n"
    "        elif isinstance(v, int): v = '%d.%d.%d' % ((v // 10000, v % 10000 // 100, v % 100) if v >= 10000 else (v // 1000, v % 1000 // 100, v % 100))\n"
    "        print('NGD torch_nccl=' + str(v))\n"
    "    except Exception as e:\n"
    "        print('NGD torch_nccl=')\n"
    "    try:\n"
    "        import importlib.metadata as md, re\n"
    "        for r in md.requires('torch') or []:\n"
    "            m = re.match(r'nvidia-nccl-cu\\d+\\s*==\\s*([0-9.]+)', r)\n"
    "            if m: print('NGD torch_pin=' + m.group(1)); break\n"
    "    except Exception:\n"
    "        pass\n"
    "except Exception as e:\n"
    "    print('NGD torch_error=' + type(e).__name__ + ': ' + str(e).replace('\\n', ' ')[:400])\n";

static void copy_field(char *dst, size_t n, const char *line, const char *key) {
  size_t k = strlen(key);
  if (strncmp(line, key, k) == 0) snprintf(dst, n, "%s", line + k);
}

static void run_python(const char *interp, int timeout_s) {
  snprintf(py.interp, sizeof py.interp, "%s", interp);
  /* the probe must not be intercepted by ncclguard nor start the Python hook: LD_PRELOAD unset */
  char buf[16384];
  char *argv[] = {(char *)interp, "-c", (char *)py_script, NULL};
  int status = 0;
  size_t len = ng_run_capture(argv, timeout_s, buf, sizeof buf, &status, &py.timed_out);
  if (status == -1) return; /* could not be started */
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && len == 0) return; /* not found */
  py.ran = 1;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    if (strncmp(line, "NGD ", 4) != 0) continue;
    line += 4;
    copy_field(py.py_version, sizeof py.py_version, line, "py_version=");
    copy_field(py.wheel_nccl, sizeof py.wheel_nccl, line, "wheel_nccl=");
    copy_field(py.torch_version, sizeof py.torch_version, line, "torch_version=");
    copy_field(py.torch_path, sizeof py.torch_path, line, "torch_path=");
    copy_field(py.torch_cuda, sizeof py.torch_cuda, line, "torch_cuda=");
    copy_field(py.torch_nccl, sizeof py.torch_nccl, line, "torch_nccl=");
    copy_field(py.torch_pin, sizeof py.torch_pin, line, "torch_pin=");
    copy_field(py.torch_error, sizeof py.torch_error, line, "torch_error=");
  }
}

/* ---- whether ncclguard is on ---- */

/* guard_on: ncclguard guards the jobs of this environment: libncclguard.so is in LD_PRELOAD
 * (ncclguard-run; the Python package exports it too), or NCCLGUARD says yes (the Python package turns
 * ncclguard on in each Python process), and NCCLGUARD_DISABLE does not make it a pass-through. Then
 * the rows whose problem ncclguard answers say so (OK, "guarded") instead of a WARN; guard_how: why. */
static int guard_on, guard_disabled;
static char guard_how[96];

static int bool_true(const char *v) {
  static const char *yes[] = {"1", "true", "yes", "on"};
  for (size_t i = 0; v && i < sizeof yes / sizeof *yes; i++)
    if (!strcasecmp(v, yes[i])) return 1;
  return 0;
}

/* whether LD_PRELOAD (separated by ':' or blanks, as ld.so reads it) names a libncclguard*.so */
static int preload_has_guard(const char *pre) {
  for (const char *p = pre ? pre : ""; *p;) {
    size_t len = strcspn(p, ": \t");
    const char *base = p;
    for (const char *q = p; q < p + len; q++)
      if (*q == '/') base = q + 1;
    if (len && !strncmp(base, "libncclguard", 12)) return 1;
    p += len;
    if (*p) p++;
  }
  return 0;
}

static void detect_guard(void) {
  int pre = preload_has_guard(getenv("LD_PRELOAD")), py = bool_true(getenv("NCCLGUARD"));
  guard_disabled = (pre || py) && bool_true(getenv("NCCLGUARD_DISABLE"));
  guard_on = (pre || py) && !guard_disabled;
  if (pre) snprintf(guard_how, sizeof guard_how, "libncclguard.so preloaded");
  else if (py) snprintf(guard_how, sizeof guard_how, "NCCLGUARD=%s: the Python package", getenv("NCCLGUARD"));
}

/* ---- NCCL ---- */

static int nccl_code; /* version of the libnccl found, 0 if none */

/* The catalogue's reports that the two rows below are about: named there, and not again as a
 * known-bug line (one bug, one line). */
#define NULL_COMM_REPORT "pytorch/pytorch#188567"
#define CAPTURE_REPORT "vllm-project/vllm#54626"

/* What a version means for window registration; `who` names the library ("libnccl", "PyTorch's NCCL"). */
static void nccl_version_checks(int code, const char *prefix) {
  char v[32], name[64];
  version_str(code, v, sizeof v);
  snprintf(name, sizeof name, "%s.null-comm", prefix);
  /* PyTorch's lazy communicator (symm_mem.rendezvous before any collective): NCCL dereferences the NULL
   * communicator before 2.29 (SIGSEGV) and refuses it from 2.29 (ncclInvalidArgument: "Failed to window register
   * segment ... invalid argument", the error the user has); the fix is the same on both, the PyTorch hook of
   * ncclguard-run / NCCLGUARD=1, which creates the communicator before the rendezvous */
  const char *fix = "run the job under ncclguard-run or NCCLGUARD=1 (its PyTorch hook creates the communicator before "
                    "symm_mem.rendezvous), or create communicators eagerly (init_process_group(..., device_id=...))";
  int crash = code < NG_NCCL_VERSION(2, 29, 0);
  const char *what = crash ? "ncclCommWindowRegister on a NULL communicator dereferences it (SIGSEGV, before 2.29)"
                           : "ncclCommWindowRegister on a NULL communicator returns ncclInvalidArgument (2.29+): PyTorch's "
                             "symm_mem.rendezvous on a lazy communicator fails with \"Failed to window register ... invalid argument\"";
  if (guard_on)
    report(OK, name, NULL, "NCCL %s: %s (%s); guarded: ncclguard is on (%s): its PyTorch hook creates the communicator first, "
           "and a NULL one elsewhere is a clean ncclInvalidArgument", v, what, NULL_COMM_REPORT, guard_how);
  else
    report(WARN, name, fix, "NCCL %s: %s - what a lazy PyTorch communicator triggers (%s)", v, what, NULL_COMM_REPORT);
  snprintf(name, sizeof name, "%s.graph-capture", prefix);
  if (code < NG_NCCL_VERSION(2, 30, 7) && guard_on) {
    const char *cap = getenv("NCCLGUARD_CAPTURE");
    const char *how = code < NG_NCCL_VERSION(2, 28, 0) ? "degrades it on every rank (a NULL window), the capture intact"
                      : cap && !strcasecmp(cap, "degrade") ? "degrades it on every rank (NCCLGUARD_CAPTURE=degrade: a NULL window), the capture intact"
                                                           : "registers it in relaxed capture mode (NCCLGUARD_CAPTURE=relaxed), the capture intact";
    report(OK, name, NULL,
           "NCCL %s: registration during CUDA graph capture fails and invalidates the capture (fixed in 2.30.7; %s); guarded: ncclguard is on "
           "(%s) and %s", v, CAPTURE_REPORT, guard_how, how);
  } else if (code < NG_NCCL_VERSION(2, 30, 7))
    report(WARN, name, "register windows before stream capture starts, or upgrade to NCCL 2.30.7+",
           "NCCL %s: registration during CUDA graph capture fails (ncclUnhandledCudaError) and invalidates the capture (fixed in 2.30.7; %s)", v, CAPTURE_REPORT);
  else
    report(OK, name, NULL, "NCCL %s: registration under graph capture is supported (2.30.7+)", v);
}

static void check_nccl(const char *opt_lib) {
  const char *env = getenv("NCCLGUARD_NCCL_LIB");
  const char *want = opt_lib ? opt_lib : (env && *env ? env : NULL);
  const char *how = NULL;
  void *h = NULL;
  char tried[2048] = "";
  if (want) {
    h = dlopen(want, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *e = dlerror();
      report(FAIL, "nccl.lib", "point NCCLGUARD_NCCL_LIB (or --nccl-lib) at an existing libnccl.so.2, or unset it",
             "%s=%s cannot be loaded: %s", opt_lib ? "--nccl-lib" : "NCCLGUARD_NCCL_LIB", want, e ? e : "?");
      return;
    }
    how = opt_lib ? "--nccl-lib" : "NCCLGUARD_NCCL_LIB";
  }
  if (!h) {
    h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h) how = "dynamic linker: LD_LIBRARY_PATH/ld.so.cache";
    else snprintf(tried, sizeof tried, "libnccl.so.2 (LD_LIBRARY_PATH=%s)", getenv("LD_LIBRARY_PATH") ? getenv("LD_LIBRARY_PATH") : "");
  }
  if (!h && py.wheel_nccl[0]) {
    h = dlopen(py.wheel_nccl, RTLD_NOW | RTLD_LOCAL);
    if (h) how = "nvidia-nccl wheel of python";
  }
  static const char *cuda_dirs[] = {"/usr/local/cuda/lib/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"};
  for (size_t i = 0; !h && i < sizeof cuda_dirs / sizeof *cuda_dirs; i++) {
    if (access(cuda_dirs[i], R_OK) != 0) continue;
    h = dlopen(cuda_dirs[i], RTLD_NOW | RTLD_LOCAL);
    if (h) how = "CUDA toolkit (not on LD_LIBRARY_PATH: a plain job would not load it)";
  }
  if (!h) {
    report(FAIL, "nccl.lib", "install NCCL (libnccl2, or pip install nvidia-nccl-cu13) and put it on LD_LIBRARY_PATH, or set NCCLGUARD_NCCL_LIB",
           "no libnccl.so.2 found (tried %s, python's nvidia-nccl wheel, /usr/local/cuda/lib*): this host cannot run NCCL jobs as configured",
           tried[0] ? tried : "libnccl.so.2");
    return;
  }
  const char *path = lib_path(h, want ? want : "libnccl.so.2");
  nccl_get_version_fn getv = (nccl_get_version_fn)dlsym(h, "ncclGetVersion");
  int code = 0;
  if (!getv || getv(&code) != 0 || code <= 0) {
    report(FAIL, "nccl.lib", "use a real libnccl.so.2", "%s (found by %s) has no working ncclGetVersion", path, how);
    return;
  }
  nccl_code = code;
  char v[32];
  version_str(code, v, sizeof v);
  report(OK, "nccl.lib", NULL, "%s (found by %s)", path, how);
  if (py.wheel_nccl[0] && strcmp(how, "nvidia-nccl wheel of python") != 0) {
    char wr[4096];
    if (realpath(py.wheel_nccl, wr) && strcmp(wr, path) != 0) {
      char pr[4096];
      if (!realpath(path, pr) || strcmp(wr, pr) != 0)
        report(WARN, "nccl.lib-python", "set NCCLGUARD_NCCL_LIB to the library the job really loads, if ncclguard should use that one",
               "PyTorch jobs load %s (its RPATH), not %s: two different NCCLs on this host", py.wheel_nccl, path);
    }
  }
  int has_win = dlsym(h, "ncclCommWindowRegister") != NULL;
  if (code < NG_NCCL_VERSION(2, 27, 0) || !has_win)
    report(FAIL, "nccl.version", "upgrade NCCL to 2.27 or later (pip install -U nvidia-nccl-cu13, or the libnccl2 package)",
           "NCCL %s (%d): window registration (ncclCommWindowRegister) %s; it needs NCCL 2.27+", v, code,
           has_win ? "is too new for this version" : "is missing");
  else
    report(OK, "nccl.version", NULL, "NCCL %s (%d): window API present (2.27+)", v, code);
  nccl_version_checks(code, "nccl");
  /* the library stays loaded: unloading NCCL at exit is not worth the risk */
}

/* ---- CUDA driver and GPUs ---- */

static int n_devices = -1; /* -1: unknown */
static void note_gpu_sm(int major, int minor); /* for the catalogue rows of one architecture */

static const char *cu_err(CUresult (*name_fn)(CUresult, const char **), CUresult r, char *buf, size_t n) {
  const char *s = NULL;
  if (name_fn && name_fn(r, &s) == CUDA_SUCCESS && s) return s;
  snprintf(buf, n, "CUDA error %d", (int)r);
  return buf;
}

static void check_cuda(const char *opt_lib) {
  const char *env = getenv("NCCLGUARD_CUDA_LIB");
  const char *want = opt_lib ? opt_lib : (env && *env ? env : "libcuda.so.1");
  void *h = dlopen(want, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    report(FAIL, "cuda.driver", "run the doctor on a GPU node with the NVIDIA driver installed (or set NCCLGUARD_CUDA_LIB)",
           "%s cannot be loaded (%s): no NVIDIA driver on this host, no GPU checks", want, e ? e : "?");
    return;
  }
  __typeof__(&cuInit) p_init = (__typeof__(&cuInit))dlsym(h, "cuInit");
  __typeof__(&cuDriverGetVersion) p_ver = (__typeof__(&cuDriverGetVersion))dlsym(h, "cuDriverGetVersion");
  __typeof__(&cuDeviceGetCount) p_count = (__typeof__(&cuDeviceGetCount))dlsym(h, "cuDeviceGetCount");
  __typeof__(&cuDeviceGet) p_get = (__typeof__(&cuDeviceGet))dlsym(h, "cuDeviceGet");
  __typeof__(&cuDeviceGetName) p_name = (__typeof__(&cuDeviceGetName))dlsym(h, "cuDeviceGetName");
  __typeof__(&cuDeviceGetAttribute) p_attr = (__typeof__(&cuDeviceGetAttribute))dlsym(h, "cuDeviceGetAttribute");
  __typeof__(&cuDeviceCanAccessPeer) p_peer = (__typeof__(&cuDeviceCanAccessPeer))dlsym(h, "cuDeviceCanAccessPeer");
  __typeof__(&cuGetErrorName) p_ename = (__typeof__(&cuGetErrorName))dlsym(h, "cuGetErrorName");
  const char *path = lib_path(h, want);
  if (!p_init || !p_ver || !p_count || !p_get || !p_name || !p_attr || !p_peer) {
    report(FAIL, "cuda.driver", "use the NVIDIA driver's libcuda.so.1", "%s lacks driver API functions (cuInit, cuDeviceGet...)", path);
    return;
  }
  char eb[64];
  int drv = 0;
  CUresult r = p_ver(&drv);
  char dv[32];
  snprintf(dv, sizeof dv, "%d.%d", drv / 1000, drv % 1000 / 10);
  r = p_init(0);
  if (r != CUDA_SUCCESS) {
    report(FAIL, "cuda.driver", "check nvidia-smi, the driver installation and CUDA_VISIBLE_DEVICES",
           "%s: driver API %s (%d), but cuInit fails: %s", path, dv, drv, cu_err(p_ename, r, eb, sizeof eb));
    return;
  }
  report(OK, "cuda.driver", NULL, "%s: driver API %s (%d)", path, dv, drv);
  int n = 0;
  r = p_count(&n);
  if (r != CUDA_SUCCESS || n <= 0) {
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    report(FAIL, "cuda.devices", "run on a node with GPUs; check CUDA_VISIBLE_DEVICES",
           "no CUDA device visible (%s%s%s)", r != CUDA_SUCCESS ? cu_err(p_ename, r, eb, sizeof eb) : "count 0",
           cvd ? ", CUDA_VISIBLE_DEVICES=" : "", cvd ? cvd : "");
    n_devices = 0;
    return;
  }
  n_devices = n;
  report(OK, "cuda.devices", NULL, "%d device%s visible%s%s", n, n == 1 ? "" : "s",
         getenv("CUDA_VISIBLE_DEVICES") ? ", CUDA_VISIBLE_DEVICES=" : "",
         getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "");
  CUdevice *dev = calloc((size_t)n, sizeof *dev);
  if (!dev) return;
  for (int i = 0; i < n; i++) {
    char check[32], nm[256] = "?";
    snprintf(check, sizeof check, "gpu.%d", i);
    if ((r = p_get(&dev[i], i)) != CUDA_SUCCESS) {
      report(FAIL, check, "check nvidia-smi", "cuDeviceGet(%d): %s", i, cu_err(p_ename, r, eb, sizeof eb));
      continue;
    }
    p_name(nm, sizeof nm, dev[i]);
    int ccmaj = 0, ccmin = 0, vmm = 0;
    p_attr(&ccmaj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev[i]);
    p_attr(&ccmin, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev[i]);
    note_gpu_sm(ccmaj, ccmin);
    r = p_attr(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev[i]);
    if (r != CUDA_SUCCESS || !vmm)
      report(FAIL, check, "use a GPU and driver with VMM support (cuMemCreate); without it windows cannot be registered",
             "%s, compute capability %d.%d, no virtual memory management: ncclMemAlloc and windows need it", nm, ccmaj, ccmin);
    else
      report(OK, check, NULL, "%s, compute capability %d.%d, virtual memory management supported", nm, ccmaj, ccmin);
  }
  if (n == 1) {
    report(OK, "gpu.p2p", NULL, "one GPU: no peer pairs to check");
  } else {
    char missing[2048] = "";
    size_t ml = 0;
    int bad = 0, pairs = 0;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        if (i == j) continue;
        int can = 0;
        pairs++;
        if (p_peer(&can, dev[i], dev[j]) != CUDA_SUCCESS || !can) {
          bad++;
          if (ml < sizeof missing - 32) ml += (size_t)snprintf(missing + ml, sizeof missing - ml, "%s%d->%d", bad > 1 ? "," : "", i, j);
        }
      }
    if (bad)
      report(WARN, "gpu.p2p", "use GPUs connected by NVLink/PCIe P2P (check nvidia-smi topo -m, IOMMU/ACS settings); ncclguard degrades to unregistered buffers",
             "%d of %d GPU pairs have no peer access (%s): communicators spanning them get no symmetric windows (NULL window)", bad, pairs, missing);
    else
      report(OK, "gpu.p2p", NULL, "peer access between all %d GPUs (%d ordered pairs)", n, pairs);
  }
  free(dev);
}

/* ---- NCCL variables: environment, then ~/.nccl.conf, then /etc/nccl.conf (NCCL's order) ---- */

static char conf_src[64][2][256]; /* name, origin */
static char conf_val[64][256];
static int n_conf;

static void load_conf(const char *file) {
  FILE *f = fopen(file, "r");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof line, f) && n_conf < 64) {
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#' || *p == '\n' || !*p) continue;
    char *eq = strchr(p, '=');
    if (!eq) continue;
    *eq = 0;
    char *v = eq + 1;
    v[strcspn(v, "\r\n")] = 0;
    int dup = 0;
    for (int i = 0; i < n_conf; i++)
      if (!strcmp(conf_src[i][0], p)) dup = 1;
    if (dup) continue;
    snprintf(conf_src[n_conf][0], 256, "%.255s", p);
    snprintf(conf_src[n_conf][1], 256, "%.255s", file);
    snprintf(conf_val[n_conf], 256, "%.255s", v);
    n_conf++;
  }
  fclose(f);
}

/* value of an NCCL variable as NCCL would see it; *origin says where it came from */
static const char *nccl_var(const char *name, const char **origin) {
  const char *v = getenv(name);
  if (v) { *origin = "environment"; return v; }
  for (int i = 0; i < n_conf; i++)
    if (!strcmp(conf_src[i][0], name)) { *origin = conf_src[i][1]; return conf_val[i]; }
  return NULL;
}

static void check_nccl_vars(void) {
  char file[1024];
  const char *cf = getenv("NCCL_CONF_FILE");
  if (cf && *cf) load_conf(cf);
  const char *home = getenv("HOME");
  if (home) {
    snprintf(file, sizeof file, "%s/.nccl.conf", home);
    load_conf(file);
  }
  load_conf("/etc/nccl.conf");

  struct {
    const char *name;
    const char *bad;  /* value(s) that matter, "|"-separated; NULL: any value */
    int level;        /* when it matches */
    const char *what; /* the effect */
  } vars[] = {
      {"NCCL_WIN_ENABLE", "0", FAIL, "windows switched off: every window registration gives a NULL window"},
      {"NCCL_CUMEM_ENABLE", "0", FAIL, "cuMem off: a 'window' is a local-registration handle, not a symmetric window"},
      {"NCCL_LOCAL_REGISTER", "0", WARN, "local (user buffer) registration off"},
      {"NCCL_P2P_DISABLE", "1", WARN, "P2P transport off: symmetric windows need every rank reachable by P2P"},
      {"NCCL_P2P_LEVEL", "LOC|0", WARN, "P2P never used: no symmetric windows"},
      {"NCCL_SHM_DISABLE", "1", WARN, "shared-memory transport off: changes the transports behind windows"},
      {"NCCL_NVLS_ENABLE", "0", WARN, "NVLink SHARP off: changes the symmetric kernels"},
      {"NCCL_GIN_ENABLE", "0", WARN, "GPU-initiated networking off: multi-node windows (2.29+) need it"},
      {"NCCL_GRAPH_REGISTER", "0", WARN, "buffer registration under graph capture off"},
      {"NCCL_LEGACY_CUDA_REGISTER", NULL, WARN, "legacy cudaMalloc registration path changed"},
      {"NCCL_WIN_STRIDE", NULL, WARN, "window layout changed from NCCL's default"},
      {"NCCL_SYM_KERNEL", NULL, WARN, "symmetric kernel selection changed"},
      {"NCCL_SYM_CTAS", NULL, WARN, "symmetric kernel CTA count changed"},
  };
  int any = 0;
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *origin = NULL;
    const char *v = nccl_var(vars[i].name, &origin);
    if (!v) continue;
    char check[64];
    snprintf(check, sizeof check, "env.%s", vars[i].name);
    int match = 0;
    if (!vars[i].bad) match = 1;
    else {
      char tmp[64];
      snprintf(tmp, sizeof tmp, "%s", vars[i].bad);
      for (char *t = strtok(tmp, "|"); t; t = strtok(NULL, "|"))
        if (!strcasecmp(t, v)) match = 1;
    }
    char fix[512];
    snprintf(fix, sizeof fix, "unset %s%s%s unless you mean it", vars[i].name, strcmp(origin, "environment") ? " in " : "",
             strcmp(origin, "environment") ? origin : "");
    if (match) {
      report(vars[i].level, check, fix, "%s=%s (%s): %s", vars[i].name, v, origin, vars[i].what);
      any++;
    } else {
      report(OK, check, NULL, "%s=%s (%s): no effect on windows", vars[i].name, v, origin);
    }
  }
  if (!any) report(OK, "env.nccl", NULL, "no NCCL variable switches windows off or changes them");
}

/* ---- Known window-registration bugs, by NCCL version and GPU architecture ----
 *
 * The rows of tools/catalogue.def (the one table of upstream reports; docs/NCCL.md §10 is generated
 * from it) that apply to the NCCL a job will load, to the GPUs visible here and to the NCCL variables
 * the doctor can read, each as an INFO line (never in the exit status). The fields are described in
 * catalogue.def; the tests each row names are for the docs only. */
enum { GUARDED, CLEAR, OUT };
static const struct known_bug {
  const char *id, *url;
  int from, to, sm;
  const char *unless, *note;
  int verdict;
  const char *versions, *what, *guard, *fix;
} known_bugs[] = {
#define NG_REPORT(id, url, from, to, sm, unless, note, verdict, tests, versions, symptom, guard, fix) \
  {id, url, from, to, sm, unless, note, verdict, versions, symptom, guard, fix},
#include "catalogue.def"
#undef NG_REPORT
};
static const char *const verdict_text[] = {"ncclguard guards it", "ncclguard makes it clear", "out of reach for ncclguard"};

/* the compute capabilities (major * 10 + minor) of the GPUs check_cuda saw, each once */
static int gpu_sm[16], n_gpu_sm;
static void note_gpu_sm(int major, int minor) {
  int sm = major * 10 + minor;
  for (int i = 0; i < n_gpu_sm; i++)
    if (gpu_sm[i] == sm) return;
  if (n_gpu_sm < (int)(sizeof gpu_sm / sizeof *gpu_sm)) gpu_sm[n_gpu_sm++] = sm;
}

/* S without the backquotes of its `code` spans, into BUF */
static const char *plain(const char *s, char *buf, size_t n) {
  size_t k = 0;
  for (; *s && k + 1 < n; s++)
    if (*s != '`') buf[k++] = *s;
  buf[k] = 0;
  return buf;
}

/* The gist of catalogue text S, into BUF: without backquotes and parenthesized asides, up to its
 * first ": ", "; " or ". " past its first words, and at most about 110 characters (then cut at a blank
 * and ended with "..."). The whole text: docs/NCCL.md §10. */
static const char *clause(const char *s, char *buf, size_t n) {
  char t[1024];
  plain(s, t, sizeof t);
  size_t k = 0;
  int depth = 0;
  for (const char *p = t; *p && k + 1 < n; p++) {
    if (*p == '(') {
      if (!depth && k && buf[k - 1] == ' ') k--;
      depth++;
    } else if (*p == ')' && depth) {
      depth--;
    } else if (!depth) {
      buf[k++] = *p;
    }
  }
  buf[k] = 0;
  size_t len = k, cut = len;
  static const char *const stops[] = {": ", "; ", ". "};
  for (size_t i = 0; i < sizeof stops / sizeof *stops; i++) {
    const char *p = strstr(buf + (len > 20 ? 20 : len), stops[i]);
    if (p && (size_t)(p - buf) < cut) cut = (size_t)(p - buf);
  }
  if (cut > 110) {
    size_t c = 110;
    while (c > 40 && buf[c] != ' ') c--;
    while (c > 0 && (buf[c - 1] == ',' || buf[c - 1] == ' ')) c--;
    /* not ending on a word that leads on ("... and...") */
    static const char *const lead[] = {" and", " or", " but", " with", " the", " a", " an", " to", " of", " in", " on", " by"};
    for (size_t i = 0; i < sizeof lead / sizeof *lead; i++) {
      size_t l = strlen(lead[i]);
      if (c > l + 40 && !strncmp(buf + c - l, lead[i], l)) {
        c -= l;
        while (c > 0 && (buf[c - 1] == ',' || buf[c - 1] == ' ')) c--;
        break;
      }
    }
    snprintf(buf + c, n - c, "...");
    return buf;
  }
  buf[cut] = 0;
  if (cut && buf[cut - 1] == '.') buf[cut - 1] = 0;
  return buf;
}

/* The rows of the table that apply to NCCL `code` (and its variables): one INFO line each. */
static void check_known_bugs(int code, const char *prefix) {
  char v[32], check[64];
  version_str(code, v, sizeof v);
  snprintf(check, sizeof check, "%s.known-bug", prefix);
  int named = 0;
  for (size_t i = 0; i < sizeof known_bugs / sizeof *known_bugs; i++) {
    const struct known_bug *b = &known_bugs[i];
    if (!b->from || code < b->from || (b->to && code >= b->to)) continue;
    char on[32] = "";
    if (b->sm) {
      int seen = 0;
      for (int g = 0; g < n_gpu_sm; g++) seen |= gpu_sm[g] == b->sm;
      if (!seen) continue;
      snprintf(on, sizeof on, " on SM %d.%d", b->sm / 10, b->sm % 10);
    }
    const char *origin = NULL, *val;
    char avoided[160] = "", note[200] = "";
    if (b->unless) {
      char name[64];
      const char *eq = strchr(b->unless, '=');
      snprintf(name, sizeof name, "%.*s", (int)(eq - b->unless), b->unless);
      if ((val = nccl_var(name, &origin)) && !strcmp(val, eq + 1)) snprintf(avoided, sizeof avoided, "%s (%s)", b->unless, origin);
    }
    if (avoided[0]) {
      report(OK, check, NULL, "NCCL %s%s: %s does not apply here: %s avoids it (%s)", v, on, b->id, avoided, b->url);
      continue;
    }
    if (!strcmp(b->id, NULL_COMM_REPORT) || !strcmp(b->id, CAPTURE_REPORT)) {
      named++; /* its own row (nccl_version_checks) names it */
      continue;
    }
    if (b->note && (val = nccl_var(b->note, &origin))) snprintf(note, sizeof note, " [%s=%s (%s) here]", b->note, val, origin);
    char tw[512], tg[512], tf[256];
    clause(b->guard, tg, sizeof tg);
    size_t gl = strlen(tg);
    report(INFO, check, b->fix[0] ? plain(b->fix, tf, sizeof tf) : NULL, "NCCL %s%s: %s - %s%s; %s: %s%s %s", v, on,
           b->id, clause(b->what, tw, sizeof tw), note, verdict_text[b->verdict], tg, gl >= 3 && !strcmp(tg + gl - 3, "...") ? "" : ".",
           b->url);
    named++;
  }
  if (!named) report(OK, check, NULL, "NCCL %s: no catalogued registration bug applies (docs/NCCL.md section 10)", v);
}

/* ---- NCCLGUARD_* variables ---- */

/* NCCLGUARD_STRICT as the launcher and the Python package read it: on unless set to a valid false value */
static int strict_rule(void) {
  const char *sv = getenv("NCCLGUARD_STRICT");
  struct ng_value sx = {1, 0};
  return !(sv && ng_tab_find("NCCLGUARD_STRICT") && !ng_var_check(ng_tab_find("NCCLGUARD_STRICT"), sv, &sx) && !sx.i);
}

/* Each NCCLGUARD_* variable of the environment, and NCCLGUARD (the Python package's switch),
 * checked by the library's own reader (vars.c); the paths also for what the library will do with
 * them (a file to load, a log directory). */
static void check_guard_vars(void) {
  extern char **environ;
  int bad = 0, n = 0;
  for (char **e = environ; *e; e++) {
    if (strncmp(*e, "NCCLGUARD_", 10) != 0 && strncmp(*e, "NCCLGUARD=", 10) != 0) continue;
    char name[128];
    const char *eq = strchr(*e, '=');
    if (!eq || (size_t)(eq - *e) >= sizeof name) continue;
    memcpy(name, *e, (size_t)(eq - *e));
    name[eq - *e] = 0;
    const char *v = eq + 1;
    const struct ng_var *var = ng_tab_find(name);
    char why[320] = "", check[160];
    n++;
    snprintf(check, sizeof check, "env.%s", name);
    if (!var) {
      /* refused at entry under NCCLGUARD_STRICT (the default), a warning without it */
      int strict = strict_rule();
      report(strict ? FAIL : WARN, check,
             strict ? "check the spelling (ncclguard-doctor --vars lists the variables); ncclguard-run and the Python package refuse it"
                    : "check the spelling (ncclguard-doctor --vars lists the variables)",
             "%s=%s: unknown ncclguard variable (did you mean %s?)", name, v, ng_var_closest(name));
      bad++;
      continue;
    }
    if (ng_var_check(var, v, NULL) != 0) {
      char expect[128];
      int strict = strict_rule();
      const char *what = strict ? (var->lib ? "ncclguard-run and the Python package refuse it; the library alone warns and uses the default"
                                            : "ncclguard-run and the Python package refuse it")
                                : (var->lib ? "under NCCLGUARD_STRICT=0 ncclguard-run and the Python package warn and run; the library warns and uses the default"
                                            : "under NCCLGUARD_STRICT=0 ncclguard-run and the Python package warn and run");
      char fix[256];
      snprintf(fix, sizeof fix, "fix the value or unset it (%s)", what);
      report(FAIL, check, fix, "%s=%s: not valid (expected %s)", name, v, ng_var_expect(var, expect, sizeof expect));
      bad++;
      continue;
    } else if (var->kind == NG_KIND_PATH && *v) {
      if (!strcmp(name, "NCCLGUARD_LOG_FILE")) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", v);
        char *slash = strrchr(dir, '/');
        if (slash) {
          if (slash == dir) slash[1] = 0;
          else *slash = 0;
          if (access(dir, W_OK) != 0) snprintf(why, sizeof why, "directory %.200s is not writable", dir);
        }
      } else if (access(v, R_OK) != 0) {
        snprintf(why, sizeof why, "file not found");
      }
    }
    if (why[0]) {
      report(WARN, check, "fix the value; the library warns and uses the default", "%s=%s: %s", name, v, why);
      bad++;
    }
  }
  if (!bad) report(OK, "env.ncclguard", NULL, "%d NCCLGUARD_* variable%s set, all valid", n, n == 1 ? "" : "s");
}

/* --vars: the table, one variable a line (tab-separated with --json off: name, values, default,
 * reader, meaning) */
static void print_vars(void) {
  for (int i = 0; i < ng_tab_count(); i++) {
    const struct ng_var *v = ng_tab_var(i);
    char values[160], def[PATH_MAX], note[PATH_MAX + 16];
    if (!v->name) continue;
    ng_var_values(v, values, sizeof values);
    ng_tab_default(v, def, sizeof def);
    if (opt_json) {
      fputs("{\"name\":", stdout);
      json_str(stdout, v->name);
      fputs(",\"values\":", stdout);
      json_str(stdout, values);
      fputs(",\"default\":", stdout);
      json_str(stdout, def);
      printf(",\"reader\":\"%s\",\"help\":", ng_tab_reader(v));
      json_str(stdout, v->help);
      fputs("}\n", stdout);
    } else {
      const char *reader = ng_tab_reader(v);
      printf("%-22s %s %s%s\n    %s\n", v->name, values, ng_tab_default_note(v, note, sizeof note),
             v->lib ? "" : strcmp(reader, "python") ? " [ncclguard-run]" : " [Python package]", v->help);
    }
  }
}

/* ---- ncclguard itself ---- */

static void check_guard_lib(void) {
  const char *pre = getenv("LD_PRELOAD");
  if (pre && strstr(pre, "libncclguard")) {
    report(OK, "ncclguard.lib", NULL, "preloaded: LD_PRELOAD=%s%s", pre,
           guard_disabled ? " (NCCLGUARD_DISABLE: a pass-through, nothing guarded)" : "");
    return;
  }
  const char *not_here = guard_on ? "not preloaded here: NCCLGUARD turns it on in Python processes that have the ncclguard package"
                                  : "not preloaded here: run the job with ncclguard-run";
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const char *lib_env = getenv("NCCLGUARD_LIB");
  if (lib_env && access(lib_env, R_OK) == 0) {
    report(OK, "ncclguard.lib", NULL, "%s (NCCLGUARD_LIB; %s)", lib_env, not_here);
    return;
  }
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    static const char *rel[] = {"libncclguard.so", "../lib/libncclguard.so", "../lib64/libncclguard.so", "../build/libncclguard.so"};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
      char c[4200], r[4096];
      snprintf(c, sizeof c, "%s/%s", exe, rel[i]);
      if (access(c, R_OK) == 0 && realpath(c, r)) {
        report(OK, "ncclguard.lib", NULL, "%s (%s)", r, not_here);
        return;
      }
    }
  }
  report(WARN, "ncclguard.lib", "build it with 'make' (or 'make install'), or set NCCLGUARD_LIB", "libncclguard.so not found next to ncclguard-doctor and not preloaded");
}

/* ---- launcher rendezvous ---- */

static void check_rendezvous(int connect_timeout) {
  const char *names[] = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"};
  const char *vals[5];
  int set = 0;
  for (int i = 0; i < 5; i++)
    if ((vals[i] = getenv(names[i])) != NULL) set++;
  const char *launcher = getenv("TORCHELASTIC_RUN_ID") ? "torchrun"
                         : getenv("OMPI_COMM_WORLD_RANK") ? "Open MPI"
                         : getenv("PMI_RANK") || getenv("PMIX_RANK") ? "MPI (PMI)"
                         : getenv("SLURM_PROCID") ? "Slurm"
                                                  : NULL;
  if (set == 0) {
    if (launcher)
      report(WARN, "launcher.env", "export MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK from the launcher's own variables (e.g. RANK=$OMPI_COMM_WORLD_RANK), or use torchrun",
             "under %s but none of MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK is set: torch.distributed's env:// rendezvous needs them", launcher);
    else
      report(OK, "launcher.env", NULL, "no rendezvous variables (MASTER_ADDR, RANK, ...): not started by torchrun, srun or mpirun; run the doctor under the job's launcher to check them");
    return;
  }
  char missing[128] = "", problems[1024] = "";
  size_t pl = 0;
  for (int i = 0; i < 5; i++)
    if (!vals[i]) {
      strcat(missing, missing[0] ? "," : "");
      strcat(missing, names[i]);
    }
  long rank = -1, world = -1, lrank = -1, port = -1, lworld = -1;
  if (vals[1] && (!parse_int(vals[1], &port) || port < 1 || port > 65535))
    pl += (size_t)snprintf(problems + pl, sizeof problems - pl, "MASTER_PORT=%s is not a port; ", vals[1]);
  if (vals[2] && (!parse_int(vals[2], &rank) || rank < 0))
    pl += (size_t)snprintf(problems + pl, sizeof problems - pl, "RANK=%s is not a rank; ", vals[2]);
  if (vals[3] && (!parse_int(vals[3], &world) || world < 1))
    pl += (size_t)snprintf(problems + pl, sizeof problems - pl, "WORLD_SIZE=%s is not a size; ", vals[3]);
  if (vals[4] && (!parse_int(vals[4], &lrank) || lrank < 0))
    pl += (size_t)snprintf(problems + pl, sizeof problems - pl, "LOCAL_RANK=%s is not a rank; ", vals[4]);
  if (rank >= 0 && world >= 1 && rank >= world)
    pl += (size_t)snprintf(problems + pl, sizeof problems - pl, "RANK=%ld is not below WORLD_SIZE=%ld; ", rank, world);
  const char *lw = getenv("LOCAL_WORLD_SIZE");
  if (lw && parse_int(lw, &lworld)) {
    if (lrank >= 0 && lrank >= lworld)
      pl += (size_t)snprintf(problems + pl, sizeof problems - pl, "LOCAL_RANK=%ld is not below LOCAL_WORLD_SIZE=%ld; ", lrank, lworld);
    if (world >= 1 && lworld > world)
      pl += (size_t)snprintf(problems + pl, sizeof problems - pl, "LOCAL_WORLD_SIZE=%ld exceeds WORLD_SIZE=%ld; ", lworld, world);
  }
  if (lrank >= 0 && world >= 1 && lrank >= world)
    pl += (size_t)snprintf(problems + pl, sizeof problems - pl, "LOCAL_RANK=%ld is not below WORLD_SIZE=%ld; ", lrank, world);
  if (missing[0] || problems[0]) {
    if (pl >= 2) problems[pl - 2] = 0;
    report(FAIL, "launcher.env", "let the launcher set them (torchrun does; with srun/mpirun export them from SLURM_*/OMPI_* variables)",
           "%s%s%s%s", missing[0] ? "missing: " : "", missing, missing[0] && problems[0] ? "; " : "", problems);
  } else {
    report(OK, "launcher.env", NULL, "MASTER_ADDR=%s MASTER_PORT=%s RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s%s%s", vals[0], vals[1], vals[2],
           vals[3], vals[4], launcher ? ", launcher " : "", launcher ? launcher : "");
  }
  if (lrank >= 0 && n_devices > 0 && lrank >= n_devices)
    report(WARN, "launcher.gpu", "start at most one rank per visible GPU, or check CUDA_VISIBLE_DEVICES",
           "LOCAL_RANK=%ld but only %d GPU%s visible: cuda:%ld does not exist here", lrank, n_devices, n_devices == 1 ? "" : "s", lrank);

  if (!vals[0] || port < 1) return;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  char ps[24];
  snprintf(ps, sizeof ps, "%ld", port);
  int gr = getaddrinfo(vals[0], ps, &hints, &res);
  if (gr != 0) {
    report(FAIL, "launcher.master", "set MASTER_ADDR to a host name or address that resolves on every node",
           "MASTER_ADDR=%s does not resolve: %s", vals[0], gai_strerror(gr));
    return;
  }
  int result = -1; /* 0 connected, 1 refused, 2 timeout/unreachable */
  char err[256] = "";
  for (struct addrinfo *a = res; a && result != 0; a = a->ai_next) {
    int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) continue;
    int r = connect(s, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      struct pollfd p = {.fd = s, .events = POLLOUT};
      r = poll(&p, 1, connect_timeout * 1000);
      if (r == 1) {
        int soerr = 0;
        socklen_t l = sizeof soerr;
        getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &l);
        if (soerr == 0) r = 0;
        else { errno = soerr; r = -1; }
      } else {
        errno = ETIMEDOUT;
        r = -1;
      }
    }
    if (r == 0) result = 0;
    else {
      int e = errno;
      snprintf(err, sizeof err, "%s", strerror(e));
      if (result != 1) result = (e == ECONNREFUSED) ? 1 : 2;
    }
    close(s);
  }
  freeaddrinfo(res);
  if (result == 0)
    report(OK, "launcher.master", NULL, "%s:%ld accepts TCP connections from this host", vals[0], port);
  else if (result == 1)
    report(WARN, "launcher.master", "if the job is already running, check that rank 0 runs on MASTER_ADDR and uses MASTER_PORT",
           "nothing listens on %s:%ld yet (%s): normal before launch, rank 0 opens the port when the job starts", vals[0], port, err);
  else
    report(WARN, "launcher.master", "check that MASTER_ADDR is reachable from this host (firewall, network interface, routing)",
           "%s:%ld did not answer within %d s (%s): a firewall or a wrong address makes the rendezvous hang", vals[0], port,
           connect_timeout, err[0] ? err : "no reply");
}

/* ---- PyTorch ---- */

static void check_python(int enabled) {
  if (!enabled) return;
  if (!py.ran) {
    report(OK, "python.torch", NULL, "no Python interpreter '%s': PyTorch checks skipped", py.interp);
    return;
  }
  if (py.timed_out) {
    report(WARN, "python.torch", "check that python3 -c 'import torch' works (a slow shared file system can cause it), or use --no-python",
           "%s did not answer within 20 s (import torch hangs?)", py.interp);
    return;
  }
  if (!py.torch_version[0]) {
    report(OK, "python.torch", NULL, "PyTorch not importable by %s (Python %s, %s): skip this if the job is not PyTorch", py.interp,
           py.py_version[0] ? py.py_version : "?", py.torch_error[0] ? py.torch_error : "no torch");
    return;
  }
  report(OK, "python.torch", NULL, "PyTorch %s (CUDA %s) at %s, NCCL %s", py.torch_version, py.torch_cuda, py.torch_path,
         py.torch_nccl[0] ? py.torch_nccl : "unknown (torch.cuda.nccl.version() failed)");
  int code = py.torch_nccl[0] ? version_code(py.torch_nccl) : 0;
  if (code && nccl_code && code != nccl_code) {
    char a[32];
    version_str(nccl_code, a, sizeof a);
    report(WARN, "python.nccl", "ncclguard follows the libnccl loaded in the process; set NCCLGUARD_NCCL_LIB if it should use another",
           "PyTorch uses NCCL %s, the libnccl found for other jobs is %s: the version checks below apply to PyTorch jobs", py.torch_nccl, a);
  }
  if (code) nccl_version_checks(code, "python.nccl");
  if (code && code != nccl_code) check_known_bugs(code, "python.nccl");
  /* PyTorch's symmetric memory uses NCCL's device API as of the NCCL it was built and pinned with;
   * another minor version (put first with LD_PRELOAD, or found first on LD_LIBRARY_PATH) refuses
   * its requirements (measured: PyTorch 2.11 with NCCL 2.30.7, ncclDevCommCreate "invalid usage") */
  int pin = py.torch_pin[0] ? version_code(py.torch_pin) : 0;
  if (pin && code && pin / 100 != code / 100)
    report(WARN, "python.nccl-pin", "load the NCCL PyTorch pins (its nvidia-nccl wheel), or a PyTorch built against this NCCL",
           "PyTorch %s pins NCCL %s, but loads NCCL %s here: symmetric memory's device communicators (ncclDevCommCreate) "
           "fail across NCCL minor versions (the device API changed)", py.torch_version, py.torch_pin, py.torch_nccl);
  else if (pin && code)
    report(OK, "python.nccl-pin", NULL, "PyTorch %s pins NCCL %s and loads NCCL %s", py.torch_version, py.torch_pin, py.torch_nccl);
  int crash = code && code < NG_NCCL_VERSION(2, 29, 0);
  if (crash && guard_on) {
    report(OK, "python.lazy-comm", NULL,
           "PyTorch creates NCCL communicators lazily, at the first collective: window registration before that (symmetric memory "
           "rendezvous) passes a NULL communicator, which crashes this NCCL (SIGSEGV); guarded: ncclguard is on (%s) and answers it "
           "with ncclInvalidArgument", guard_how);
    return;
  }
  report(crash ? WARN : OK, "python.lazy-comm",
         "init_process_group(backend='nccl', device_id=torch.device('cuda', local_rank)) (eager communicator), or a barrier()/all_reduce on each group before symm_mem rendezvous; ncclguard-run also enables the Python hook (NCCLGUARD_PYHOOK=1)",
         "PyTorch creates NCCL communicators lazily, at the first collective: window registration before that (symmetric memory rendezvous) passes a NULL communicator%s",
         crash ? ", which crashes this NCCL (SIGSEGV)" : ", which this NCCL rejects with invalid argument");
}

/* ---- main ---- */

/* whether PROG runs: a path (with a '/') to an executable file, or a name found on PATH; else
 * why not, in `why` */
static int find_program(const char *prog, char *why, size_t n) {
  struct stat st;
  if (strchr(prog, '/')) {
    if (stat(prog, &st) != 0) { snprintf(why, n, "%s", strerror(errno)); return 0; }
    if (S_ISDIR(st.st_mode)) { snprintf(why, n, "is a directory, not a Python interpreter"); return 0; }
    if (access(prog, X_OK) != 0) { snprintf(why, n, "not executable (%s)", strerror(errno)); return 0; }
    return 1;
  }
  const char *path = getenv("PATH");
  char dir[4096], full[4400];
  for (const char *p = path ? path : ""; p && *p;) {
    size_t len = strcspn(p, ":");
    snprintf(dir, sizeof dir, "%.*s", (int)len, p);
    snprintf(full, sizeof full, "%s/%s", len ? dir : ".", prog);
    if (stat(full, &st) == 0 && !S_ISDIR(st.st_mode) && access(full, X_OK) == 0) return 1;
    p += len;
    if (*p == ':') p++;
  }
  snprintf(why, n, "not found on PATH");
  return 0;
}

/* the summary line and the exit status: 2 the configuration (env.* FAIL, or WARN with --strict),
 * 1 anything else failed, 0 */
static int summary(void) {
  if (!opt_json && !opt_quiet) {
    if (n_info) printf("ncclguard-doctor: %d OK, %d INFO, %d WARN, %d FAIL\n", n_ok, n_info, n_warn, n_fail);
    else printf("ncclguard-doctor: %d OK, %d WARN, %d FAIL\n", n_ok, n_warn, n_fail);
  }
  if (n_cfg_fail || (opt_strict && n_cfg_warn)) return 2;
  return (n_fail || (opt_strict && n_warn)) ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *nccl_lib = NULL, *cuda_lib = NULL, *python = getenv("PYTHON");
  int use_python = 1, connect_timeout = 2, opt_vars = 0, opt_config = 0;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--probe")) return ng_probe_main(argc, argv); /* its own options */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_text, stdout); return 0; }
    if (!strcmp(a, "--version")) { printf("%s %s\n", "ncclguard-doctor", NG_IDENTITY); return 0; }
    else if (!strcmp(a, "--json")) opt_json = 1;
    else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) opt_quiet = 1;
    else if (!strcmp(a, "--strict")) opt_strict = 1;
    else if (!strcmp(a, "--no-python")) use_python = 0;
    else if (!strcmp(a, "--vars")) opt_vars = 1;
    else if (!strcmp(a, "--config-only")) opt_config = 1;
    else if (!strcmp(a, "--nccl-lib") || !strcmp(a, "--cuda-lib") || !strcmp(a, "--python") || !strcmp(a, "--connect-timeout")) {
      if (i + 1 >= argc || !argv[i + 1][0]) {
        fprintf(stderr, "ncclguard-doctor: option %s needs an argument (see --help)\n", a);
        return 2;
      }
      const char *v = argv[++i];
      if (!strcmp(a, "--nccl-lib")) nccl_lib = v;
      else if (!strcmp(a, "--cuda-lib")) cuda_lib = v;
      else if (!strcmp(a, "--python")) {
        /* an interpreter named on the command line must exist: "checks skipped" would hide a typo */
        char why[160];
        if (!find_program(v, why, sizeof why)) {
          fprintf(stderr, "ncclguard-doctor: --python %s: %s\n", v, why);
          return 2;
        }
        python = v;
      } else {
        long t;
        if (!parse_int(v, &t) || t < 1 || t > 600) { fprintf(stderr, "ncclguard-doctor: --connect-timeout needs 1..600 seconds\n"); return 2; }
        connect_timeout = (int)t;
      }
    } else {
      fprintf(stderr, "ncclguard-doctor: unknown option '%s' (see --help)\n", a);
      return 2;
    }
  }
  if (opt_vars) {
    print_vars();
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);
  detect_guard();
  if (opt_config) {
    /* the configuration alone: nothing loaded, nothing probed (a login node has no driver) */
    check_nccl_vars();
    check_guard_vars();
    return summary();
  }
  if (!python || !*python) python = "python3";
  if (use_python) run_python(python, 20);
  check_nccl(nccl_lib);
  check_cuda(cuda_lib);
  check_nccl_vars();
  if (nccl_code) check_known_bugs(nccl_code, "nccl");
  check_rendezvous(connect_timeout);
  check_guard_lib();
  check_guard_vars();
  check_python(use_python);
  return summary();
}
