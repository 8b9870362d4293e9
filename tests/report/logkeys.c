/* logkeys: writes, through the library's own writer (shim/log.c, built with -DNG_LOG_CHECK), one
 * line holding every key of the log schema (shim/logschema.def) with a value made from its row
 * (tests/report/roundtrip.py expects the same values), then a line too long to fit (truncated).
 * Usage: logkeys FILE text|json. Built and run by tests/t_tools_report.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"

struct ng_config ng_cfg;
const char* ng_version(void) { return "ncclguard test"; }
long ng_reg_live_windows(void) { return 0; }

static const struct {
  const char *name, *type, *writer;
} keys[] = {
#define NG_LOGKEY(name, type, writer, doc) {#name, #type, #writer},
#include "logschema.def"
#undef NG_LOGKEY
};

/* the string value of a str key: realistic where the report reads it */
static const char* str_value(const char* k, char* buf, size_t n) {
  if (!strcmp(k, "fn")) return "ncclCommWindowRegister";
  if (!strcmp(k, "decision")) return "error";
  if (!strcmp(k, "reason")) return "not_vmm";
  if (!strcmp(k, "result")) return "ncclInvalidArgument";
  snprintf(buf, n, "v_%s", k);
  return buf;
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  snprintf(ng_cfg.log_file, sizeof ng_cfg.log_file, "%s", argv[1]);
  ng_cfg.log_json = !strcmp(argv[2], "json");
  ng_cfg.log_level = NG_LOG_TRACE;
  struct ng_line l;
  ng_line_begin(&l, NG_LOG_WARN, 7);
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    const char *k = keys[i].name, *t = keys[i].type;
    char buf[64];
    if (!strcmp(keys[i].writer, "prefix") || !strcmp(k, "msg") || !strcmp(k, "truncated")) continue;
    if (!strcmp(t, "int")) ng_kv_int(&l, k, 1000 + (long long)i);
    else if (!strcmp(t, "float")) ng_kv_dbl(&l, k, (double)i + 0.5);
    else if (!strcmp(t, "ptr")) ng_kv_ptr(&l, k, (void*)(uintptr_t)(0x1000 + i));
    else if (!strcmp(t, "hex64")) ng_kv_u64hex(&l, k, 0x0123456789abc000ULL + i);
    else if (!strcmp(t, "any")) ng_kv_str(&l, "NCCLGUARD_TIMEOUT", "v_NCCLGUARD_");
    else ng_kv_str(&l, k, str_value(k, buf, sizeof buf));
  }
  ng_line_end(&l, "a \"quoted\" msg with = and \\ and a\nnewline");
  /* a line that does not fit: cut after its last complete key, marked truncated */
  static char big[5000];
  memset(big, 'x', sizeof big - 1);
  ng_line_begin(&l, NG_LOG_INFO, 7);
  ng_kv_str(&l, "fn", "ncclCommDestroy");
  ng_kv_dbl(&l, "us", 1.5);
  ng_kv_str(&l, "group", big);
  ng_kv_str(&l, "state", "after");
  ng_line_end(&l, "never written");
  return 0;
}
