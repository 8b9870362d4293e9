/* NCCLGUARD_* variables: read once with secure_getenv (setuid programs ignore them), validated;
 * a bad value warns and keeps the default. One rule for booleans: 1/0 true/false yes/no on/off. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "guard.h"

struct ng_config ng_cfg = {
    .disable = 0,
    .log_level = NG_LOG_WARN,
    .log_json = 0,
    .stats = 0,
    .dump = 0,
    .on_failure = NG_FAIL_DEGRADE,
    .warmup = NG_WARMUP_AUTO,
    .agree = 1,
    .preflight = 1,
    .retries = 3,
    .timeout_s = 600.0,
    .null_window = NG_NULLWIN_WARN,
    .capture = NG_CAPTURE_RELAXED,
    .log_max_mb = 256,
};

/* Warnings about the configuration are collected here and logged once the level is known. */
static char bad[8][256];
static int nbad;

static void complain(const char* name, const char* val, const char* expect) {
  if (nbad < 8)
    snprintf(bad[nbad++], sizeof bad[0], "%s=%.60s is not valid (expected %s); using the default",
             name, val, expect);
}

static int parse_bool(const char* name, const char* v, int* out) {
  static const char* yes[] = {"1", "true", "yes", "on"};
  static const char* no[] = {"0", "false", "no", "off"};
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(v, yes[i])) { *out = 1; return 0; }
    if (!strcasecmp(v, no[i])) { *out = 0; return 0; }
  }
  complain(name, v, "1/0, true/false, yes/no or on/off");
  return -1;
}

static int parse_enum(const char* name, const char* v, const char* const* names, int n, int* out) {
  for (int i = 0; i < n; i++)
    if (!strcasecmp(v, names[i])) { *out = i; return 0; }
  char expect[128] = "";
  for (int i = 0; i < n; i++) {
    strncat(expect, names[i], sizeof expect - strlen(expect) - 1);
    if (i + 1 < n) strncat(expect, "|", sizeof expect - strlen(expect) - 1);
  }
  complain(name, v, expect);
  return -1;
}

static int parse_long(const char* name, const char* v, long lo, long hi, long* out) {
  char* end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    char expect[64];
    snprintf(expect, sizeof expect, "an integer in [%ld, %ld]", lo, hi);
    complain(name, v, expect);
    return -1;
  }
  *out = x;
  return 0;
}

static int parse_seconds(const char* name, const char* v, double* out) {
  char* end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !(x > 0) || x > 1e7) {
    complain(name, v, "a number of seconds > 0");
    return -1;
  }
  *out = x;
  return 0;
}

static void parse_path(const char* name, const char* v, char* out, size_t cap) {
  if (strlen(v) >= cap) { complain(name, "(too long)", "a path shorter than PATH_MAX"); return; }
  strcpy(out, v);
}

/* The names each enumerated variable accepts, in the order of its enum (guard.h). */
static const char* const levels[] = {"off", "warn", "info", "trace"};
static const char* const formats[] = {"text", "json"};
static const char* const failures[] = {"degrade", "error"};
static const char* const warmups[] = {"auto", "always", "never"};
static const char* const nullwins[] = {"warn", "error"};
static const char* const captures[] = {"degrade", "relaxed"};

void ng_parse_env(struct ng_config* c) {
  const char* v;
  long l;
  if ((v = secure_getenv("NCCLGUARD_DISABLE"))) parse_bool("NCCLGUARD_DISABLE", v, &c->disable);
  if ((v = secure_getenv("NCCLGUARD_LOG"))) parse_enum("NCCLGUARD_LOG", v, levels, 4, &c->log_level);
  if ((v = secure_getenv("NCCLGUARD_LOG_FORMAT"))) parse_enum("NCCLGUARD_LOG_FORMAT", v, formats, 2, &c->log_json);
  if ((v = secure_getenv("NCCLGUARD_LOG_FILE")) && *v) parse_path("NCCLGUARD_LOG_FILE", v, c->log_file, sizeof c->log_file);
  if ((v = secure_getenv("NCCLGUARD_STATS"))) parse_bool("NCCLGUARD_STATS", v, &c->stats);
  if ((v = secure_getenv("NCCLGUARD_DUMP_CONFIG"))) parse_bool("NCCLGUARD_DUMP_CONFIG", v, &c->dump);
  if ((v = secure_getenv("NCCLGUARD_ON_FAILURE"))) parse_enum("NCCLGUARD_ON_FAILURE", v, failures, 2, &c->on_failure);
  if ((v = secure_getenv("NCCLGUARD_WARMUP"))) parse_enum("NCCLGUARD_WARMUP", v, warmups, 3, &c->warmup);
  if ((v = secure_getenv("NCCLGUARD_AGREE"))) parse_bool("NCCLGUARD_AGREE", v, &c->agree);
  if ((v = secure_getenv("NCCLGUARD_PREFLIGHT"))) parse_bool("NCCLGUARD_PREFLIGHT", v, &c->preflight);
  if ((v = secure_getenv("NCCLGUARD_RETRIES")) && !parse_long("NCCLGUARD_RETRIES", v, 0, 100, &l)) c->retries = (int)l;
  if ((v = secure_getenv("NCCLGUARD_TIMEOUT"))) parse_seconds("NCCLGUARD_TIMEOUT", v, &c->timeout_s);
  if ((v = secure_getenv("NCCLGUARD_NULL_WINDOW"))) parse_enum("NCCLGUARD_NULL_WINDOW", v, nullwins, 2, &c->null_window);
  if ((v = secure_getenv("NCCLGUARD_CAPTURE"))) parse_enum("NCCLGUARD_CAPTURE", v, captures, 2, &c->capture);
  if ((v = secure_getenv("NCCLGUARD_LOG_MAX_MB")) && !parse_long("NCCLGUARD_LOG_MAX_MB", v, 0, 1L << 30, &l))
    c->log_max_mb = l;
  if ((v = secure_getenv("NCCLGUARD_NCCL_LIB")) && *v) parse_path("NCCLGUARD_NCCL_LIB", v, c->nccl_lib, sizeof c->nccl_lib);
  if ((v = secure_getenv("NCCLGUARD_CUDA_LIB")) && *v) parse_path("NCCLGUARD_CUDA_LIB", v, c->cuda_lib, sizeof c->cuda_lib);
}

static const char* b(int x) { return x ? "1" : "0"; }

void ng_dump_config(void) {
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%g", ng_cfg.timeout_s);
  struct ng_line l;
  /* Printed whatever the level: the user asked for it. */
  int saved = ng_cfg.log_level;
  if (ng_cfg.log_level < NG_LOG_WARN) ng_cfg.log_level = NG_LOG_WARN;
  ng_line_begin(&l, NG_LOG_WARN, -1);
  ng_kv_str(&l, "fn", "config");
  ng_kv_str(&l, "NCCLGUARD_DISABLE", b(ng_cfg.disable));
  ng_kv_str(&l, "NCCLGUARD_LOG", levels[saved]);
  ng_kv_str(&l, "NCCLGUARD_LOG_FORMAT", formats[ng_cfg.log_json]);
  ng_kv_str(&l, "NCCLGUARD_LOG_FILE", ng_cfg.log_file[0] ? ng_cfg.log_file : "(stderr)");
  ng_kv_str(&l, "NCCLGUARD_STATS", b(ng_cfg.stats));
  ng_kv_str(&l, "NCCLGUARD_ON_FAILURE", failures[ng_cfg.on_failure]);
  ng_kv_str(&l, "NCCLGUARD_WARMUP", warmups[ng_cfg.warmup]);
  ng_kv_str(&l, "NCCLGUARD_AGREE", b(ng_cfg.agree));
  ng_kv_str(&l, "NCCLGUARD_PREFLIGHT", b(ng_cfg.preflight));
  ng_kv_int(&l, "NCCLGUARD_RETRIES", ng_cfg.retries);
  ng_kv_str(&l, "NCCLGUARD_TIMEOUT", timeout);
  ng_kv_str(&l, "NCCLGUARD_NULL_WINDOW", nullwins[ng_cfg.null_window]);
  ng_kv_str(&l, "NCCLGUARD_CAPTURE", captures[ng_cfg.capture]);
  ng_kv_int(&l, "NCCLGUARD_LOG_MAX_MB", ng_cfg.log_max_mb);
  ng_kv_str(&l, "NCCLGUARD_NCCL_LIB", ng_cfg.nccl_lib[0] ? ng_cfg.nccl_lib : "(auto)");
  ng_kv_str(&l, "NCCLGUARD_CUDA_LIB", ng_cfg.cuda_lib[0] ? ng_cfg.cuda_lib : "(auto)");
  ng_line_end(&l, "effective configuration");
  ng_cfg.log_level = saved;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void child_after_fork(void) {
  ng_log_after_fork();
  ng_cuda_after_fork();
  ng_watch_after_fork();
  ng_reg_reset_after_fork();
  ng_stats_reset();
}

static void init_once(void) {
  ng_parse_env(&ng_cfg);
  for (int i = 0; i < nbad; i++) ng_log_msg(NG_LOG_WARN, -1, "config", "%s", bad[i]);
  if (ng_cfg.dump) ng_dump_config();
  pthread_atfork(NULL, NULL, child_after_fork);
}

void ng_init(void) { pthread_once(&once, init_once); }

/* NCCLGUARD_DUMP_CONFIG=1 prints the settings at load time, even before any NCCL call. */
__attribute__((constructor)) static void ng_load(void) {
  const char* v = secure_getenv("NCCLGUARD_DUMP_CONFIG");
  int on = 0;
  if (v && !parse_bool("NCCLGUARD_DUMP_CONFIG", v, &on) && on) ng_init();
  nbad = on ? nbad : 0;
}
