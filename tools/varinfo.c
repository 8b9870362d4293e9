/* The tools' view of the table of variables: tools/varinfo.h. */
#define _GNU_SOURCE
#include "varinfo.h"

#include <stdio.h>
#include <string.h>

/* The NG_PYVAR rows: booleans, named in full, read by the Python package alone. */
static const struct ng_var py_vars[] = {
#define NG_VAR(name, kind, field, def, lo, hi, choices, opts, reader, help)
#define NG_RUNOPT(opts, help)
#define NG_PYVAR(name, unset, help) {name, NG_KIND_BOOL, 0, 0, 0, 0, unset, 0, 0, "", "", help},
#include "vars.def"
};
static const int n_py_vars = (int)(sizeof py_vars / sizeof py_vars[0]);

static int is_py(const struct ng_var* v) { return v >= py_vars && v < py_vars + n_py_vars; }

int ng_tab_count(void) { return ng_nvars + n_py_vars; }

const struct ng_var* ng_tab_var(int i) {
  if (i < 0 || i >= ng_tab_count()) return NULL;
  return i < ng_nvars ? &ng_vars[i] : &py_vars[i - ng_nvars];
}

const struct ng_var* ng_tab_find(const char* name) {
  const struct ng_var* v = ng_var_find(name);
  for (int i = 0; !v && i < n_py_vars; i++)
    if (!strcmp(py_vars[i].name, name)) v = &py_vars[i];
  return v;
}

const char* ng_tab_reader(const struct ng_var* v) { return v->lib ? "lib" : is_py(v) ? "python" : "run"; }

const char* ng_tab_default(const struct ng_var* v, char* buf, size_t n) {
  if (v->def_text) {
    snprintf(buf, n, "%s", v->def_text);
    return buf;
  }
  return ng_var_default(v, buf, n);
}

/* Defaults in parentheses described better than by their own words. */
static const struct {
  const char *name, *what;
} described[] = {
    {"NCCLGUARD_NCCL_LIB", "the libnccl the process loads"},
};

const char* ng_tab_default_desc(const struct ng_var* v, char* buf, size_t n) {
  char d[PATH_MAX];
  ng_tab_default(v, d, sizeof d);
  size_t len = strlen(d);
  if (len < 2 || d[0] != '(' || d[len - 1] != ')') return NULL;
  for (size_t i = 0; i < sizeof described / sizeof *described; i++)
    if (!strcmp(v->name, described[i].name)) {
      snprintf(buf, n, "%s", described[i].what);
      return buf;
    }
  snprintf(buf, n, "%.*s", (int)(len - 2), d + 1);
  return buf;
}

const char* ng_tab_default_note(const struct ng_var* v, char* buf, size_t n) {
  char d[PATH_MAX], w[PATH_MAX];
  if (ng_tab_default_desc(v, w, sizeof w)) snprintf(buf, n, "(default: %s)", w);
  else snprintf(buf, n, "(default %s)", ng_tab_default(v, d, sizeof d));
  return buf;
}
