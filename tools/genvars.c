/* genvars: writes what the other languages need of the table of variables (shim/vars.def):
 *   genvars --sh            the shell fragment ncclguard-run is built with (its options, their
 *                           validation data and its --help text)
 *   genvars --py            tools/python/ncclguard_hook/_vars.py (read by _config.py)
 *   genvars --readme FILE   FILE with the tables between the "<!-- vars:... -->" markers generated
 *                           (make docs writes docs/configuration.md back; tests/t_config.sh compares)
 * Reads the table through tools/varinfo.h (the library's rows and the NG_PYVAR ones).
 * Built and run by the build (tools/tools.mk); not installed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "varinfo.h" /* the table (shim/vars.def) as the tools see it */

static const char* kind_name[] = {"BOOL", "ENUM", "INT", "NUM", "PATH", "OPT"};

/* each word of an OPTIONS string: names ("-l|--log-level"), and either a metavar or a fixed value */
struct opt {
  char names[128];
  char metavar[128]; /* "" for a flag */
  char fixed[128];   /* the value a flag sets */
};

static int next_opt(const char** p, struct opt* o) {
  while (**p == ' ') (*p)++;
  if (!**p) return 0;
  size_t len = strcspn(*p, " ");
  char w[128];
  snprintf(w, sizeof w, "%.*s", (int)len, *p);
  *p += len;
  memset(o, 0, sizeof *o);
  char* eq = strchr(w, '=');
  char* colon = strchr(w, ':');
  if (eq) { *eq = 0; snprintf(o->metavar, sizeof o->metavar, "%s", eq + 1); }
  else if (colon) { *colon = 0; snprintf(o->fixed, sizeof o->fixed, "%s", colon + 1); }
  snprintf(o->names, sizeof o->names, "%s", w);
  return 1;
}

/* "-l|--log-level" + "LEVEL" -> "-l, --log-level LEVEL" (or "    --json" without a short name) */
static void opt_label(const struct opt* o, int indent_long, char* buf, size_t n) {
  char names[128];
  snprintf(names, sizeof names, "%s", o->names);
  for (char* c = names; *c; c++)
    if (*c == '|') *c = ',';
  const char* sp = strchr(names, ',') ? "" : indent_long ? "    " : "";
  char withspace[160] = "";
  size_t k = 0;
  for (const char* c = names; *c && k + 2 < sizeof withspace; c++) {
    withspace[k++] = *c;
    if (*c == ',') withspace[k++] = ' ';
  }
  withspace[k] = 0;
  snprintf(buf, n, "%s%s%s%s", sp, withspace, o->metavar[0] ? " " : "", o->metavar);
}

/* single-quoted for sh */
static void sh_quote(FILE* f, const char* s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputs("'\\''", f);
    else fputc(*s, f);
  }
  fputc('\'', f);
}

static void py_str(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* `text` wrapped at 78 columns, each line indented by `indent` (the first one already is, when
 * `inline_first`) */
static void wrapped(FILE* f, const char* text, int indent, int inline_first) {
  const int width = 78;
  int col = indent;
  if (!inline_first) fprintf(f, "%*s", indent, "");
  const char* p = text;
  while (*p) {
    size_t len = strcspn(p, " ");
    if (col > indent && col + 1 + (int)len > width) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', f);
      col++;
    }
    fprintf(f, "%.*s", (int)len, p);
    col += (int)len;
    p += len;
    while (*p == ' ') p++;
  }
  fputc('\n', f);
}

/* ---- ncclguard-run's fragment ---- */

static void help_line(FILE* f, const char* label, const char* first) {
  if (strlen(label) + 2 <= 24) fprintf(f, "  %-24s%s\n", label, first);
  else fprintf(f, "  %s\n%26s%s\n", label, "", first);
}

static void gen_sh(FILE* f) {
  char a[160], b[64], dn[PATH_MAX + 16];
  fprintf(f, "# ---- generated from shim/vars.def by genvars --sh: do not edit ----\n");
  fprintf(f, "ng_vars_table=1\n");
  fprintf(f, "ng_bool_true="); sh_quote(f, NG_BOOL_TRUE);
  fprintf(f, " ng_bool_false="); sh_quote(f, NG_BOOL_FALSE);
  fprintf(f, "\nng_int_re="); sh_quote(f, NG_INT_RE);
  fprintf(f, " ng_num_re="); sh_quote(f, NG_NUM_RE);
  fprintf(f, " ng_path_max=%d\n", PATH_MAX);
  /* ng_option OPT: the table's option OPT: ng_name, ng_takes (1: a value follows), ng_fixed */
  fprintf(f, "ng_option() {\n  ng_fixed=\n  case \"$1\" in\n");
  for (int i = 0; i < ng_tab_count(); i++) {
    const struct ng_var* v = ng_tab_var(i);
    if (!v->name) continue;
    const char* p = v->options;
    struct opt o;
    while (next_opt(&p, &o)) {
      fprintf(f, "    %s) ng_name=%s ng_takes=%d", o.names, v->name, o.metavar[0] ? 1 : 0);
      if (!o.metavar[0]) { fprintf(f, " ng_fixed="); sh_quote(f, o.fixed); }
      fprintf(f, " ;;\n");
    }
  }
  fprintf(f, "    *) return 1 ;;\n  esac\n}\n");
  /* ng_spec NAME: ng_kind, ng_choices, ng_min, ng_max, ng_expect of variable NAME */
  fprintf(f, "ng_spec() {\n  ng_choices= ng_min= ng_max=\n  case \"$1\" in\n");
  for (int i = 0; i < ng_tab_count(); i++) {
    const struct ng_var* v = ng_tab_var(i);
    if (!v->name) continue;
    fprintf(f, "    %s) ng_kind=%s", v->name, kind_name[v->kind]);
    if (v->kind == NG_KIND_ENUM) { fprintf(f, " ng_choices="); sh_quote(f, v->choices); }
    if (v->kind == NG_KIND_INT || v->kind == NG_KIND_NUM)
      fprintf(f, " ng_min=%s ng_max=%s", ng_var_num(v->min, a, sizeof a), ng_var_num(v->max, b, sizeof b));
    fprintf(f, " ng_expect="); sh_quote(f, ng_var_expect(v, a, sizeof a));
    fprintf(f, " ;;\n");
  }
  fprintf(f, "    *) return 1 ;;\n  esac\n}\n");
  /* every variable's name, for the closest one to an unknown name */
  fprintf(f, "ng_var_names='");
  for (int i = 0, k = 0; i < ng_tab_count(); i++)
    if (ng_tab_var(i)->name) fprintf(f, "%s%s", k++ ? " " : "", ng_tab_var(i)->name);
  fprintf(f, "'\n");
  /* the options part of --help */
  fprintf(f, "ng_usage_options() {\n  cat <<'NG_EOF'\n");
  for (int i = 0; i < ng_tab_count(); i++) {
    const struct ng_var* v = ng_tab_var(i);
    const char* p = v->options;
    struct opt o;
    int first = 1;
    while (next_opt(&p, &o)) {
      char label[320], head[320];
      opt_label(&o, 1, label, sizeof label);
      if (!v->name) {
        if (strlen(label) + 2 <= 24) fprintf(f, "  %-24s", label);
        else fprintf(f, "  %s\n%26s", label, "");
        wrapped(f, v->help, 26, 1);
        continue;
      }
      if (o.metavar[0])
        snprintf(head, sizeof head, "%s: %s %s", v->name, ng_var_values(v, a, sizeof a), ng_tab_default_note(v, dn, sizeof dn));
      else snprintf(head, sizeof head, "%s=%s", v->name, o.fixed);
      help_line(f, label, head);
      if (first) wrapped(f, v->help, 26, 0);
      first = 0;
    }
  }
  fprintf(f, "\nVariables without an option (set them in the environment; ncclguard-doctor --vars\nlists every variable):\n");
  for (int i = 0; i < ng_tab_count(); i++) {
    const struct ng_var* v = ng_tab_var(i);
    if (!v->name || v->options[0]) continue;
    char head[320];
    snprintf(head, sizeof head, "%s: %s %s", v->name, ng_var_values(v, a, sizeof a), ng_tab_default_note(v, dn, sizeof dn));
    fprintf(f, "  %s\n", head);
  }
  fprintf(f, "NG_EOF\n}\n# ---- end of the generated part ----\n");
}

/* ---- the Python hook's table ---- */

static void py_words(FILE* f, const char* list) {
  char w[64];
  fputc('(', f);
  for (int i = 0; *ng_var_word(list, i, w, sizeof w); i++) {
    py_str(f, w);
    fputs(", ", f);
  }
  fputc(')', f);
}

static void gen_py(FILE* f) {
  char a[160], b[PATH_MAX];
  fprintf(f, "# Generated from shim/vars.def by genvars --py (make): do not edit. Read by _config.py.\n");
  fprintf(f, "BOOL_TRUE = "); py_words(f, NG_BOOL_TRUE);
  fprintf(f, "\nBOOL_FALSE = "); py_words(f, NG_BOOL_FALSE);
  fprintf(f, "\nINT_RE = "); py_str(f, NG_INT_RE);
  fprintf(f, "\nNUM_RE = "); py_str(f, NG_NUM_RE);
  fprintf(f, "\nBAD_VALUE_FMT = "); py_str(f, NG_BAD_VALUE_FMT);
  fprintf(f, "\nREFUSED_VALUE_FMT = "); py_str(f, NG_REFUSED_VALUE_FMT);
  fprintf(f, "\nREFUSED_VAR_FMT = "); py_str(f, NG_REFUSED_VAR_FMT);
  fprintf(f, "\nPATH_MAX = %d\n", PATH_MAX);
  fprintf(f, "# name: (kind, default as text (in parentheses: what unset means), min, max, choices,\n"
             "#        what a valid value looks like)\nVARS = {\n");
  for (int i = 0; i < ng_tab_count(); i++) {
    const struct ng_var* v = ng_tab_var(i);
    if (!v->name) continue;
    fprintf(f, "    ");
    py_str(f, v->name);
    fprintf(f, ": (\"%s\", ", kind_name[v->kind]);
    py_str(f, ng_tab_default(v, b, sizeof b));
    fprintf(f, ", %s, ", ng_var_num(v->min, a, sizeof a));
    fprintf(f, "%s, ", ng_var_num(v->max, a, sizeof a));
    py_words(f, v->kind == NG_KIND_ENUM ? v->choices : "");
    fprintf(f, ", ");
    py_str(f, ng_var_expect(v, a, sizeof a));
    fprintf(f, "),\n");
  }
  fprintf(f, "}\n");
}

/* ---- README ---- */

static void md_cell(FILE* f, const char* s) {
  for (; *s; s++) {
    if (*s == '|') fputs("\\|", f);
    else fputc(*s, f);
  }
}

/* "off|warn" -> "`off`, `warn`" */
static void md_words(FILE* f, const char* list, const char* def) {
  char w[64];
  for (int i = 0; *ng_var_word(list, i, w, sizeof w); i++)
    fprintf(f, "%s`%s`%s", i ? ", " : "", w, def && !strcmp(w, def) ? " (default)" : "");
}

static void md_values(FILE* f, const struct ng_var* v) {
  char a[160], b[64];
  if (v->kind == NG_KIND_ENUM) md_words(f, v->choices, ng_var_default(v, b, sizeof b));
  else if (v->kind == NG_KIND_BOOL) fprintf(f, "boolean");
  else md_cell(f, ng_var_values(v, a, sizeof a));
}

static void md_options(FILE* f) {
  fprintf(f, "| option | variable | values |\n| --- | --- | --- |\n");
  for (int i = 0; i < ng_tab_count(); i++) {
    const struct ng_var* v = ng_tab_var(i);
    const char* p = v->options;
    struct opt o;
    while (next_opt(&p, &o)) {
      char label[320];
      opt_label(&o, 0, label, sizeof label);
      fprintf(f, "| `%s` | ", label);
      if (!v->name) {
        fprintf(f, "| ");
        md_cell(f, v->help);
      } else if (o.metavar[0]) {
        fprintf(f, "`%s` | ", v->name);
        md_values(f, v);
        if (v->kind != NG_KIND_ENUM) {
          char dn[PATH_MAX + 16];
          fprintf(f, " ");
          md_cell(f, ng_tab_default_note(v, dn, sizeof dn));
        }
      } else {
        fprintf(f, "`%s=%s` | ", v->name, o.fixed);
      }
      fprintf(f, " |\n");
    }
  }
}

static void md_config(FILE* f) {
  char a[160], b[PATH_MAX];
  const struct ng_var* any_bool = NULL;
  for (int i = 0; i < ng_tab_count() && !any_bool; i++)
    if (ng_tab_var(i)->kind == NG_KIND_BOOL) any_bool = ng_tab_var(i);
  fprintf(f, "Booleans accept %s, in any case; integers and numbers are decimal, without blanks.\n",
          any_bool ? ng_var_expect(any_bool, a, sizeof a) : "-");
  fprintf(f, "The library reads those marked lib, ncclguard-run and its Python hook those marked run, the Python\n"
             "package (pip) those marked python.\n\n");
  fprintf(f, "| variable | values | default | read by | meaning |\n| --- | --- | --- | --- | --- |\n");
  for (int i = 0; i < ng_tab_count(); i++) {
    const struct ng_var* v = ng_tab_var(i);
    if (!v->name) continue;
    fprintf(f, "| `%s` | ", v->name);
    md_values(f, v);
    fprintf(f, " | ");
    md_cell(f, ng_tab_default_desc(v, b, sizeof b) ? b : ng_tab_default(v, b, sizeof b));
    fprintf(f, " | %s | ", ng_tab_reader(v));
    md_cell(f, v->help);
    fprintf(f, " |\n");
  }
}

/* FILE with each "<!-- vars:NAME -->" ... "<!-- vars:end -->" block generated */
static int gen_readme(const char* path) {
  FILE* in = fopen(path, "r");
  if (!in) { perror(path); return 1; }
  char line[8192];
  int skipping = 0, blocks = 0;
  while (fgets(line, sizeof line, in)) {
    if (skipping) {
      if (!strncmp(line, "<!-- vars:end -->", 17)) { fputs(line, stdout); skipping = 0; }
      continue;
    }
    fputs(line, stdout);
    if (!strncmp(line, "<!-- vars:options ", 18)) { md_options(stdout); skipping = 1; blocks++; }
    else if (!strncmp(line, "<!-- vars:config ", 17)) { md_config(stdout); skipping = 1; blocks++; }
  }
  fclose(in);
  if (skipping || blocks != 2) {
    fprintf(stderr, "genvars: %s: expected the two blocks <!-- vars:options ... --> and <!-- vars:config ... -->, each closed by <!-- vars:end -->\n", path);
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && !strcmp(argv[1], "--sh")) gen_sh(stdout);
  else if (argc == 2 && !strcmp(argv[1], "--py")) gen_py(stdout);
  else if (argc == 3 && !strcmp(argv[1], "--readme")) return gen_readme(argv[2]);
  else {
    fprintf(stderr, "usage: genvars --sh | --py | --readme FILE\n");
    return 2;
  }
  return ferror(stdout) ? 1 : 0;
}
