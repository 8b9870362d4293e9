/* NCCLGUARD_* variables: read once with secure_getenv (setuid programs ignore them), validated by
 * the one reader of the table (vars.def, vars.c); a bad value or an unknown name warns (whatever the
 * level) and keeps the default: a library never exits, and failing NCCL's calls for a typo would stop
 * a job NCCL alone runs. ncclguard-run and the Python package refuse those at entry (NCCLGUARD_STRICT). */
#define _GNU_SOURCE
#include <sys/auxv.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "guard.h"

/* The defaults, from the table (a PATH's member stays empty: unset). */
#define NG_INIT_BOOL(field, def) .field = (def),
#define NG_INIT_ENUM(field, def) .field = (def),
#define NG_INIT_INT(field, def) .field = (def),
#define NG_INIT_NUM(field, def) .field = (def),
#define NG_INIT_PATH(field, def)
#define NG_INIT_LIB(kind, field, def) NG_INIT_##kind(field, def)
#define NG_INIT_RUN(kind, field, def)
struct ng_config ng_cfg = {
#define NG_VAR(name, kind, field, def, lo, hi, choices, opts, reader, help) NG_INIT_##reader(kind, field, def)
#define NG_RUNOPT(opts, help)
#include "vars.def"
};

/* Warnings about the configuration are collected here and logged once the level is known. */
static char bad[8][256];
static int nbad;

static void complain(const char* name, const char* val, const char* expect, const char* def) {
  if (nbad < 8) snprintf(bad[nbad++], sizeof bad[0], NG_BAD_VALUE_FMT, name, val, expect, def);
}

static const char* env(const char* name) { return secure_getenv(name); }

/* Calls f(name, len) for each NCCLGUARD_* name of the environment that is no variable of the table;
 * returns how many there are. None in a setuid program (secure_getenv's rule). */
static int unknown_names(void (*f)(const char* name, size_t len)) {
  static const char prefix[] = "NCCLGUARD_";
  int n = 0;
  if (getauxval(AT_SECURE)) return 0; /* secure mode (setuid, capabilities): the environment is not ours */
  for (char** e = environ; e && *e; e++) {
    if (strncmp(*e, prefix, sizeof prefix - 1)) continue;
    char name[128];
    size_t len = strcspn(*e, "=");
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, *e, len);
    name[len] = 0;
    if (ng_var_find(name)) continue;
    n++;
    if (f) f(name, len);
  }
  return n;
}

static void complain_unknown(const char* name, size_t len) {
  (void)len;
  if (nbad < 8) snprintf(bad[nbad++], sizeof bad[0], NG_UNKNOWN_VAR_FMT, name, ng_var_closest(name));
}

void ng_parse_env(struct ng_config* c) {
  ng_vars_parse(c, env, complain);
  unknown_names(complain_unknown);
}

void ng_dump_config(void) {
  struct ng_config shown = ng_cfg; /* the level as configured, before it is raised below */
  struct ng_line l;
  /* Printed whatever the level: the user asked for it. */
  int saved = ng_cfg.log_level;
  if (ng_cfg.log_level < NG_LOG_WARN) ng_cfg.log_level = NG_LOG_WARN;
  ng_line_begin(&l, NG_LOG_WARN, -1);
  ng_kv_str(&l, "fn", "config");
  for (int i = 0; i < ng_nvars; i++) {
    const struct ng_var* v = &ng_vars[i];
    char buf[PATH_MAX + 16];
    if (!v->lib) continue;
    if (v->kind == NG_KIND_INT) ng_kv_int(&l, v->name, *(const long*)(const void*)((const char*)&shown + v->off));
    else ng_kv_str(&l, v->name, ng_var_show(v, &shown, buf, sizeof buf));
  }
  ng_line_end(&l, "effective configuration");
  ng_cfg.log_level = saved;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_once(void) {
  ng_parse_env(&ng_cfg);
  /* Said whatever NCCLGUARD_LOG says (off too): a setting the user made is not taken, and the library
   * cannot refuse to run as ncclguard-run and the Python package do (NCCLGUARD_STRICT). */
  int saved = ng_cfg.log_level;
  if (nbad && ng_cfg.log_level < NG_LOG_WARN) ng_cfg.log_level = NG_LOG_WARN;
  for (int i = 0; i < nbad; i++) ng_log_msg(NG_LOG_WARN, -1, "config", "%s", bad[i]);
  ng_cfg.log_level = saved;
  if (ng_cfg.dump) ng_dump_config();
}

void ng_init(void) { pthread_once(&once, init_once); }

/* 1 when the environment's value of `name` is valid and true. */
static int env_true(const char* name) {
  const char* v = secure_getenv(name);
  struct ng_value on = {0, 0};
  return v && !ng_var_check(ng_var_find(name), v, &on) && on.i;
}

static void found_bad(const char* name, const char* val, const char* expect, const char* def) {
  (void)name, (void)val, (void)expect, (void)def;
  nbad++;
}

/* At load: NCCLGUARD_DUMP_CONFIG=1 prints the settings, and a value that is not valid or an
 * NCCLGUARD_* name that is no variable is said at once (one warning line each, with the default
 * used), not at the first NCCL call, which may never come or come hours later. Otherwise nothing is
 * done here: a process without NCCL stays untouched (one pass over the environment's names), and
 * NCCLGUARD_DISABLE=1 keeps it silent (unless NCCLGUARD_DUMP_CONFIG=1 asks). */
__attribute__((constructor)) static void ng_load(void) {
  int any = 0;
  for (char** e = environ; e && *e && !any; e++) any = !strncmp(*e, "NCCLGUARD_", 10);
  if (!any) return;
  if (env_true("NCCLGUARD_DUMP_CONFIG")) {
    ng_init();
    return;
  }
  if (env_true("NCCLGUARD_DISABLE")) return;
  struct ng_config scratch = ng_cfg;
  ng_vars_parse(&scratch, env, found_bad);
  int wrong = nbad > 0 || unknown_names(NULL) > 0;
  nbad = 0;
  if (wrong) ng_init();
}
