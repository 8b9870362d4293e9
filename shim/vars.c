/* The table of NCCLGUARD_* variables (vars.def) as data, and the one reader of a value: shared by
 * the library, ncclguard-doctor and genvars (which writes the shell and Python readers). */
#define _GNU_SOURCE
#include "vars.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NG_OFF_LIB(field) offsetof(struct ng_config, field), sizeof(((struct ng_config*)0)->field)
#define NG_OFF_RUN(field) 0, 0
#define NG_DEF_BOOL(d) (d), NULL
#define NG_DEF_ENUM(d) (d), NULL
#define NG_DEF_INT(d) (d), NULL
#define NG_DEF_NUM(d) (d), NULL
#define NG_DEF_PATH(d) 0, (d)
#define NG_IS_LIB 1
#define NG_IS_RUN 0

const struct ng_var ng_vars[] = {
#define NG_VAR(name, kind, field, def, lo, hi, choices, opts, reader, help) \
  {"NCCLGUARD_" #name, NG_KIND_##kind, NG_IS_##reader, NG_OFF_##reader(field), NG_DEF_##kind(def), lo, hi, choices, opts, help},
#define NG_RUNOPT(opts, help) {NULL, NG_KIND_OPT, 0, 0, 0, 0, NULL, 0, 0, NULL, opts, help},
#include "vars.def"
};
const int ng_nvars = (int)(sizeof ng_vars / sizeof ng_vars[0]);

const struct ng_var* ng_var_find(const char* name) {
  for (int i = 0; i < ng_nvars; i++)
    if (ng_vars[i].name && !strcmp(ng_vars[i].name, name)) return &ng_vars[i];
  return NULL;
}

const char* ng_var_word(const char* list, int i, char* buf, size_t n) {
  const char* p = list;
  for (; i > 0 && p; i--) {
    p = strchr(p, '|');
    if (p) p++;
  }
  size_t len = p ? strcspn(p, "|") : 0;
  if (len >= n) len = n - 1;
  memcpy(buf, p ? p : "", len);
  buf[len] = 0;
  return buf;
}

/* index of `v` in the '|'-list (any case), or -1 */
static int word_index(const char* list, const char* v) {
  char w[64];
  for (int i = 0; *ng_var_word(list, i, w, sizeof w); i++)
    if (!strcasecmp(w, v)) return i;
  return -1;
}

static int matches(const char* re, const char* v) {
  regex_t r;
  if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB) != 0) return 0;
  int ok = regexec(&r, v, 0, NULL, 0) == 0;
  regfree(&r);
  return ok;
}

int ng_var_check(const struct ng_var* var, const char* v, struct ng_value* out) {
  struct ng_value x = {0, 0};
  char* end;
  switch (var->kind) {
    case NG_KIND_BOOL:
      if ((x.i = word_index(NG_BOOL_TRUE, v)) >= 0) x.i = 1;
      else if ((x.i = word_index(NG_BOOL_FALSE, v)) >= 0) x.i = 0;
      else return -1;
      break;
    case NG_KIND_ENUM:
      if ((x.i = word_index(var->choices, v)) < 0) return -1;
      break;
    case NG_KIND_INT:
      if (!matches(NG_INT_RE, v)) return -1;
      errno = 0;
      x.i = strtol(v, &end, 10);
      if (errno || *end || x.i < var->min || x.i > var->max) return -1;
      break;
    case NG_KIND_NUM:
      if (!matches(NG_NUM_RE, v)) return -1;
      errno = 0;
      x.d = strtod(v, &end);
      if (errno || *end || !(x.d >= var->min && x.d <= var->max)) return -1;
      break;
    case NG_KIND_PATH:
      if (strlen(v) >= PATH_MAX) return -1;
      break;
    default:
      return -1;
  }
  if (out) *out = x;
  return 0;
}

const char* ng_var_num(double x, char* buf, size_t n) {
  snprintf(buf, n, "%.15g", x);
  return buf;
}

const char* ng_var_expect(const struct ng_var* var, char* buf, size_t n) {
  char a[32], b[32];
  switch (var->kind) {
    case NG_KIND_BOOL: {
      /* "1/0, true/false, yes/no or on/off" from the two word lists */
      size_t len = 0;
      buf[0] = 0;
      for (int i = 0; *ng_var_word(NG_BOOL_TRUE, i, a, sizeof a); i++) {
        const char* sep = i == 0 ? "" : *ng_var_word(NG_BOOL_TRUE, i + 1, b, sizeof b) ? ", " : " or ";
        ng_var_word(NG_BOOL_FALSE, i, b, sizeof b);
        int k = snprintf(buf + len, len < n ? n - len : 0, "%s%s/%s", sep, a, b);
        if (k > 0) len += (size_t)k;
      }
      break;
    }
    case NG_KIND_ENUM: snprintf(buf, n, "%s", var->choices); break;
    case NG_KIND_INT:
      snprintf(buf, n, "an integer in [%s, %s]", ng_var_num(var->min, a, sizeof a), ng_var_num(var->max, b, sizeof b));
      break;
    case NG_KIND_NUM:
      snprintf(buf, n, "a number in [%s, %s]", ng_var_num(var->min, a, sizeof a), ng_var_num(var->max, b, sizeof b));
      break;
    case NG_KIND_PATH: snprintf(buf, n, "a path shorter than PATH_MAX"); break;
    default: snprintf(buf, n, "-"); break;
  }
  return buf;
}

const char* ng_var_values(const struct ng_var* var, char* buf, size_t n) {
  char a[32], b[32];
  switch (var->kind) {
    case NG_KIND_BOOL:
    case NG_KIND_ENUM: return ng_var_expect(var, buf, n);
    case NG_KIND_INT:
      snprintf(buf, n, "integer %s..%s", ng_var_num(var->min, a, sizeof a), ng_var_num(var->max, b, sizeof b));
      break;
    case NG_KIND_NUM:
      snprintf(buf, n, "number %s..%s", ng_var_num(var->min, a, sizeof a), ng_var_num(var->max, b, sizeof b));
      break;
    case NG_KIND_PATH: snprintf(buf, n, "path"); break;
    default: snprintf(buf, n, "-"); break;
  }
  return buf;
}

const char* ng_var_default(const struct ng_var* var, char* buf, size_t n) {
  switch (var->kind) {
    case NG_KIND_ENUM: return ng_var_word(var->choices, (int)var->def, buf, n);
    case NG_KIND_PATH: snprintf(buf, n, "%s", var->def_text); return buf;
    default: return ng_var_num(var->def, buf, n);
  }
}

void ng_vars_parse(void* cfg, const char* (*get)(const char*),
                   void (*bad)(const char* name, const char* value, const char* expect, const char* def)) {
  for (int i = 0; i < ng_nvars; i++) {
    const struct ng_var* var = &ng_vars[i];
    const char* v;
    struct ng_value x;
    if (!var->lib || !(v = get(var->name)) || (var->kind == NG_KIND_PATH && !*v)) continue;
    char* m = (char*)cfg + var->off;
    if (ng_var_check(var, v, &x) != 0 || (var->kind == NG_KIND_PATH && strlen(v) >= var->size)) {
      char e[128], d[128];
      bad(var->name, var->kind == NG_KIND_PATH ? "(too long)" : v, ng_var_expect(var, e, sizeof e),
          ng_var_default(var, d, sizeof d));
      continue;
    }
    switch (var->kind) {
      case NG_KIND_BOOL:
      case NG_KIND_ENUM: *(int*)(void*)m = (int)x.i; break;
      case NG_KIND_INT: *(long*)(void*)m = x.i; break;
      case NG_KIND_NUM: *(double*)(void*)m = x.d; break;
      case NG_KIND_PATH: memcpy(m, v, strlen(v) + 1); break;
    }
  }
}

const char* ng_var_show(const struct ng_var* var, const void* cfg, char* buf, size_t n) {
  const char* m = (const char*)cfg + var->off;
  switch (var->kind) {
    case NG_KIND_BOOL: snprintf(buf, n, "%d", *(const int*)(const void*)m); break;
    case NG_KIND_ENUM: ng_var_word(var->choices, *(const int*)(const void*)m, buf, n); break;
    case NG_KIND_INT: snprintf(buf, n, "%ld", *(const long*)(const void*)m); break;
    case NG_KIND_NUM: snprintf(buf, n, "%g", *(const double*)(const void*)m); break;
    case NG_KIND_PATH: snprintf(buf, n, "%s", *m ? m : var->def_text); break;
    default: buf[0] = 0;
  }
  return buf;
}

/* Levenshtein distance of a and b (any case), both at most 63 characters counted. */
static int distance(const char* a, const char* b) {
  int la = (int)strnlen(a, 63), lb = (int)strnlen(b, 63), row[64];
  for (int j = 0; j <= lb; j++) row[j] = j;
  for (int i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= lb; j++) {
      int up = row[j], cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
      int best = diag + cost;
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

const char* ng_var_closest(const char* name) {
  const char* best = NULL;
  int bd = 1 << 30;
  for (int i = 0; i < ng_nvars; i++) {
    if (!ng_vars[i].name) continue;
    int d = distance(name, ng_vars[i].name);
    if (d < bd) bd = d, best = ng_vars[i].name;
  }
  return best ? best : "-";
}
