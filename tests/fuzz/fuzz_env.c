/* libFuzzer harness: the NCCLGUARD_* environment parser (shim/config.c) and the log-line
 * builder it feeds (shim/log.c). The input is a list of records "<selector byte><value>\n":
 * the selector picks one of the variables, the value is set with setenv (or the variable is
 * unset when the selector's top bit is set). ng_parse_env then fills a fresh struct, and the
 * harness checks the invariants every consumer of ng_cfg relies on, plus an oracle for the
 * values whose meaning is unambiguous (booleans, enums, retries). The parsed strings then go
 * through the log-line builder (text and JSON) whose output is checked for stray control
 * bytes and for its length bound. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "guard.h"

static const char* const vars[] = {
    "NCCLGUARD_DISABLE",   "NCCLGUARD_LOG",       "NCCLGUARD_LOG_FORMAT", "NCCLGUARD_LOG_FILE",
    "NCCLGUARD_STATS",     "NCCLGUARD_DUMP_CONFIG", "NCCLGUARD_ON_FAILURE", "NCCLGUARD_WARMUP",
    "NCCLGUARD_AGREE",     "NCCLGUARD_PREFLIGHT", "NCCLGUARD_RETRIES",    "NCCLGUARD_TIMEOUT",
    "NCCLGUARD_NULL_WINDOW", "NCCLGUARD_CAPTURE", "NCCLGUARD_NCCL_LIB",   "NCCLGUARD_CUDA_LIB",
};
#define NVARS (int)(sizeof vars / sizeof vars[0])

#define CHECK(c)                                                                  \
  do {                                                                            \
    if (!(c)) {                                                                   \
      fprintf(stderr, "fuzz_env: invariant failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                    \
    }                                                                             \
  } while (0)

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc, (void)argv;
  /* Log lines go to /dev/null: the logger opens the file once, at its first line. */
  snprintf(ng_cfg.log_file, sizeof ng_cfg.log_file, "/dev/null");
  ng_cfg.log_level = NG_LOG_TRACE;
  ng_log_msg(NG_LOG_WARN, -1, "fuzz", "open the log");
  return 0;
}

static int bool_of(const char* v) {
  static const char* yes[] = {"1", "true", "yes", "on"};
  static const char* no[] = {"0", "false", "no", "off"};
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(v, yes[i])) return 1;
    if (!strcasecmp(v, no[i])) return 0;
  }
  return -1;
}

static int enum_of(const char* v, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcasecmp(v, names[i])) return i;
  return -1;
}

static void check_line(const struct ng_line* l) {
  CHECK(l->len >= 0 && (size_t)l->len + 2 <= sizeof l->buf);
  for (int i = 0; i < l->len; i++) CHECK((unsigned char)l->buf[i] >= 0x20);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* val[NVARS] = {0};
  char* copy = malloc(size + 1);
  memcpy(copy, data, size);
  copy[size] = 0;
  for (int i = 0; i < NVARS; i++) unsetenv(vars[i]);
  /* records: selector byte, value up to '\n' (a NUL inside a value ends it, as in a real environment) */
  for (size_t p = 0; p < size;) {
    unsigned sel = (unsigned char)copy[p++];
    char* v = copy + p;
    char* nl = memchr(v, '\n', size - p);
    size_t n = nl ? (size_t)(nl - v) : size - p;
    v[n] = 0;
    p += n + 1;
    int k = (int)(sel & 0x7f) % NVARS;
    if (sel & 0x80) { unsetenv(vars[k]); val[k] = NULL; }
    else if (setenv(vars[k], v, 1) == 0) val[k] = getenv(vars[k]);
  }
  struct ng_config c;
  memset(&c, 0, sizeof c);
  c.log_level = NG_LOG_WARN, c.retries = 3, c.timeout_s = 600.0;
  ng_parse_env(&c);

  CHECK(c.disable == 0 || c.disable == 1);
  CHECK(c.log_level >= NG_LOG_OFF && c.log_level <= NG_LOG_TRACE);
  CHECK(c.log_json == 0 || c.log_json == 1);
  CHECK(c.stats == 0 || c.stats == 1);
  CHECK(c.dump == 0 || c.dump == 1);
  CHECK(c.on_failure == NG_FAIL_DEGRADE || c.on_failure == NG_FAIL_ERROR);
  CHECK(c.warmup >= NG_WARMUP_AUTO && c.warmup <= NG_WARMUP_NEVER);
  CHECK(c.agree == 0 || c.agree == 1);
  CHECK(c.preflight == 0 || c.preflight == 1);
  CHECK(c.retries >= 0 && c.retries <= 100);
  CHECK(isfinite(c.timeout_s) && c.timeout_s > 0 && c.timeout_s <= 1e7);
  CHECK(c.null_window == 0 || c.null_window == 1);
  CHECK(c.capture == 0 || c.capture == 1);
  CHECK(memchr(c.log_file, 0, sizeof c.log_file));
  CHECK(memchr(c.nccl_lib, 0, sizeof c.nccl_lib));
  CHECK(memchr(c.cuda_lib, 0, sizeof c.cuda_lib));

  /* oracle: a valid value is taken as given; an invalid one leaves the default */
  static const char* const levels[] = {"off", "warn", "info", "trace"};
  static const char* const failures[] = {"degrade", "error"};
  static const char* const warmups[] = {"auto", "always", "never"};
  int b;
  if (val[0]) CHECK((b = bool_of(val[0])) < 0 ? c.disable == 0 : c.disable == b);
  if (val[1]) CHECK((b = enum_of(val[1], levels, 4)) < 0 ? c.log_level == NG_LOG_WARN : c.log_level == b);
  if (val[6]) CHECK((b = enum_of(val[6], failures, 2)) < 0 ? c.on_failure == 0 : c.on_failure == b);
  if (val[7]) CHECK((b = enum_of(val[7], warmups, 3)) < 0 ? c.warmup == 0 : c.warmup == b);
  if (val[8]) CHECK((b = bool_of(val[8])) < 0 ? c.agree == 0 : c.agree == b);
  if (val[10]) {
    char* end;
    long x = strtol(val[10], &end, 10);
    errno = 0;
    x = strtol(val[10], &end, 10);
    /* decimal digits with an optional '-', nothing else (no blank, no '+': shim/vars.h NG_INT_RE) */
    int plain = (val[10][0] >= '0' && val[10][0] <= '9') || (val[10][0] == '-' && val[10][1] >= '0' && val[10][1] <= '9');
    int good = plain && !errno && end != val[10] && !*end && x >= 0 && x <= 100;
    CHECK(c.retries == (good ? (int)x : 3));
  }
  if (val[3] && *val[3]) CHECK(strlen(val[3]) >= PATH_MAX ? c.log_file[0] == 0 : !strcmp(c.log_file, val[3]));
  if (val[14] && *val[14]) CHECK(strlen(val[14]) >= PATH_MAX ? c.nccl_lib[0] == 0 : !strcmp(c.nccl_lib, val[14]));

  /* the parsed strings through the log-line builder, text and JSON */
  for (int json = 0; json < 2; json++) {
    ng_cfg.log_json = json;
    struct ng_line l;
    ng_line_begin(&l, NG_LOG_WARN, -1);
    ng_kv_str(&l, "fn", "config");
    ng_kv_str(&l, "NCCLGUARD_LOG_FILE", c.log_file);
    ng_kv_str(&l, "NCCLGUARD_NCCL_LIB", c.nccl_lib);
    ng_kv_str(&l, "NCCLGUARD_CUDA_LIB", c.cuda_lib);
    for (int i = 0; i < NVARS; i++) if (val[i]) ng_kv_str(&l, vars[i], val[i]);
    check_line(&l);
    ng_line_end(&l, "value %s", val[1] ? val[1] : "");
    CHECK((size_t)l.len <= sizeof l.buf);
  }
  ng_cfg.log_json = 0;
  free(copy);
  return 0;
}
