/* gentables: writes what is generated from ncclguard's tables (shim/logschema.def, shim/reasons.def,
 * shim/decisions.def, tools/catalogue.def):
 *   gentables --python          tools/python/ncclguard_hook/_schema.py (the Python hook's key list and types)
 *   gentables --doc             docs/LOG.md (the log format, every key, every reason)
 *   gentables --nccl-doc FILE   FILE (docs/NCCL.md) with the catalogue's table between its markers
 *   gentables --catalogue-tests the tests the catalogue names, "t_SCRIPT NAME" a line
 * `make tables` rewrites the generated files; tests/t_tools_report.sh and tests/t_docs.sh fail when a
 * committed copy is stale. The catalogue modes first check its rows and exit 1 naming a bad one. */
#include <stdio.h>
#include <string.h>

static const struct {
  const char *name, *type, *writer, *doc;
} keys[] = {
#define NG_LOGKEY(name, type, writer, doc) {#name, #type, #writer, doc},
#include "../shim/logschema.def"
#undef NG_LOGKEY
};
#define NKEYS (sizeof keys / sizeof *keys)

static const struct {
  const char *name, *level, *advice;
  int hook;
} reasons[] = {
#define NG_REASON(id, name, level, advice) {name, #level, advice, 0},
#define NG_HOOK_REASON(name, level, advice) {name, #level, advice, 1},
#include "../shim/reasons.def"
#undef NG_REASON
#undef NG_HOOK_REASON
};
#define NREASONS (sizeof reasons / sizeof *reasons)

static const struct {
  const char *name, *meaning;
} decisions[] = {
#define NG_DECISION(id, name, meaning) {name, meaning},
#include "../shim/decisions.def"
#undef NG_DECISION
};
#define NDECISIONS (sizeof decisions / sizeof *decisions)

enum { GUARDED, CLEAR, OUT };
static const struct {
  const char *id, *url;
  int from, to, sm;
  const char *unless, *note;
  int verdict;
  const char *tests, *versions, *symptom, *guard, *fix;
} reports[] = {
#define NG_REPORT(id, url, from, to, sm, unless, note, verdict, tests, versions, symptom, guard, fix) \
  {id, url, from, to, sm, unless, note, verdict, tests, versions, symptom, guard, fix},
#include "catalogue.def"
#undef NG_REPORT
};
#define NREPORTS (sizeof reports / sizeof *reports)
static const char *const verdict_name[] = {"guarded", "made clear", "out of reach"};

static void py_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    putchar(*s);
  }
  putchar('"');
}

static void python(void) {
  printf("# Generated from shim/logschema.def and shim/reasons.def by tools/gentables.c (make tables): do not edit.\n"
         "\"\"\"The log schema and the reasons, as the library writes them (docs/LOG.md).\"\"\"\n\n"
         "SCHEMA = %d\n\n"
         "# (name, type, writer) in the order a line holds them; a name ending in '_' is a prefix\n"
         "KEYS = (\n",
         NG_LOG_SCHEMA);
  for (size_t i = 0; i < NKEYS; i++) {
    printf("    (");
    py_str(keys[i].name);
    printf(", ");
    py_str(keys[i].type);
    printf(", ");
    py_str(keys[i].writer);
    printf("),\n");
  }
  printf(")\n\n# (name, level, writer): lib for the library's reasons, hook for the Python hook's\nREASONS = (\n");
  for (size_t i = 0; i < NREASONS; i++) {
    printf("    (");
    py_str(reasons[i].name);
    printf(", ");
    py_str(reasons[i].level);
    printf(", \"%s\"),\n", reasons[i].hook ? "hook" : "lib");
  }
  printf(")\n");
}

/* a table cell: '|' escaped */
static void md(const char *s) {
  for (; *s; s++) {
    if (*s == '|') putchar('\\');
    putchar(*s);
  }
}

static void doc(void) {
  printf("# ncclguard's log\n\n"
         "<!-- Generated from shim/logschema.def and shim/reasons.def by tools/gentables.c (make tables): do not\n"
         "     edit; tests/t_tools_report.sh fails when this file is stale. -->\n\n"
         "Schema version **%d**. One line per event, written with one `write(2)` by the library (`shim/log.c`)\n"
         "or the Python start-up hook (`tools/python/ncclguard_hook/_log.py`) to `NCCLGUARD_LOG_FILE` or stderr;\n"
         "`ncclguard-report` reads both formats, mixed. Two formats (`NCCLGUARD_LOG_FORMAT`):\n\n"
         "    host:pid:tid [dev] NCCLGUARD LEVEL key=value key=value ... msg=\"free text\"\n"
         "    {\"ts\":1764440000.100000,\"host\":\"gpu7\",\"pid\":6000,\"tid\":6000,\"dev\":0,\"level\":\"INFO\",\"fn\":...,\"msg\":...}\n\n"
         "**Header.** The writer that creates a log file begins it with a header line, `fn=log schema=%d`\n"
         "(JSON: `\"fn\":\"log\",\"schema\":%d`), whose message names the writer's version. A file appended to\n"
         "keeps its first header; standard error has none (its lines are this schema's). A reader that meets\n"
         "a newer schema says so and reads the keys it knows.\n\n"
         "**Order and types.** Keys come in the order of the table below, where present (a line holds only\n"
         "the keys of its event); `msg` is last. Types: `str` (text: bare, or double-quoted with `\\\"` `\\\\`\n"
         "`\\n` `\\xNN` escapes when empty or holding a space, tab, quote or `=`; JSON: a string), `int`, `float`\n"
         "(one decimal; JSON numbers), `ptr` (`0x...`, `0x0` for NULL; JSON: a string, or null), `hex64`\n"
         "(16 hex digits), `bool` (text `1`, JSON `true`), `any` (str or int). A line longer than 3 KiB ends\n"
         "after its last complete key with `truncated`; a value cut short ends in `...` inside its quotes.\n\n"
         "**Writers.** `prefix`: the fixed start of a line (text `host:pid:tid [dev] NCCLGUARD LEVEL`; `ts`\n"
         "only in JSON); `lib`: libncclguard.so; `hook`: the Python hook; `both`.\n\n"
         "**Terms.** An *agreement round* is the small all-reduce in which the ranks decide a registration\n"
         "together; a *revoked* communicator is one NCCL has made unusable (`ncclCommRevoke`, 2.28.7+), so that\n"
         "nothing pairs with an abandoned round: [behaviour.md](behaviour.md#terms).\n\n"
         "## Keys\n\n| key | type | writer | meaning |\n| --- | --- | --- | --- |\n",
         NG_LOG_SCHEMA, NG_LOG_SCHEMA, NG_LOG_SCHEMA);
  for (size_t i = 0; i < NKEYS; i++) {
    const char *n = keys[i].name;
    printf("| `%s%s` | %s | %s | ", n, n[strlen(n) - 1] == '_' ? "*" : "", keys[i].type, keys[i].writer);
    md(keys[i].doc);
    printf(" |\n");
  }
  printf("\n## Decisions\n\n`decision=` says what ncclguard did with the call (shim/decisions.def).\n\n"
         "| decision | meaning |\n| --- | --- |\n");
  for (size_t i = 0; i < NDECISIONS; i++) {
    printf("| `%s` | ", decisions[i].name);
    md(decisions[i].meaning);
    printf(" |\n");
  }
  printf("\n## Reasons\n\n"
         "`reason=` says why a call ended as it did; `peer_<reason>` when another rank had it (the agreement\n"
         "makes every rank take the same decision). Level: WARN when the registration was degraded or\n"
         "refused for it, INFO when nothing went wrong. The advice is what the library's messages and\n"
         "`ncclguard-report`'s diagnosis say.\n\n"
         "| reason | level | writer | advice |\n| --- | --- | --- | --- |\n");
  for (size_t i = 0; i < NREASONS; i++) {
    printf("| `%s` | %s | %s | ", reasons[i].name, reasons[i].level, reasons[i].hook ? "hook" : "lib");
    md(reasons[i].advice);
    printf(" |\n");
  }
}

/* a version code as text: 23007 -> "2.30.7" */
static const char *vstr(int code, char *buf, size_t n) {
  snprintf(buf, n, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
  return buf;
}

/* the catalogue's rows are well formed: the id names the link (owner/repo#N and
 * https://github.com/owner/repo/{issues,pull}/N), the version range is a range, a row that guards or
 * makes clear names its tests, the text has no '|'; 0, or 1 with the first bad row named */
static int catalogue_check(void) {
  for (size_t i = 0; i < NREPORTS; i++) {
    const char *id = reports[i].id, *hash = strchr(id, '#'), *why = NULL;
    char want_i[300], want_p[300];
    if (!hash) why = "the id is not owner/repo#N";
    else {
      snprintf(want_i, sizeof want_i, "https://github.com/%.*s/issues/%s", (int)(hash - id), id, hash + 1);
      snprintf(want_p, sizeof want_p, "https://github.com/%.*s/pull/%s", (int)(hash - id), id, hash + 1);
      if (strcmp(reports[i].url, want_i) && strcmp(reports[i].url, want_p)) why = "the link does not name the id";
    }
    if (!why && reports[i].to && reports[i].from >= reports[i].to) why = "from is not below to";
    if (!why && !reports[i].from && (reports[i].to || reports[i].sm || reports[i].unless || reports[i].note))
      why = "a row the doctor never names (from 0) has doctor conditions";
    if (!why && reports[i].verdict != OUT && !reports[i].tests[0]) why = "guarded or made clear, but no test named";
    if (!why && reports[i].verdict == OUT && reports[i].tests[0]) why = "out of reach, but a test named";
    const char *texts[] = {reports[i].versions, reports[i].symptom, reports[i].guard, reports[i].fix, reports[i].tests};
    for (size_t t = 0; !why && t < sizeof texts / sizeof *texts; t++)
      if (strchr(texts[t], '|') || strchr(texts[t], '\n')) why = "a text holds '|' or a newline";
    for (size_t j = 0; !why && j < i; j++)
      if (!strcmp(reports[j].id, id)) why = "listed twice";
    if (why) {
      fprintf(stderr, "gentables: tools/catalogue.def: %s: %s\n", id, why);
      return 1;
    }
  }
  return 0;
}

static void catalogue_tests(void) {
  for (size_t i = 0; i < NREPORTS; i++) {
    const char *p = reports[i].tests;
    while (*p) {
      size_t n = strcspn(p, ",");
      while (n && p[n - 1] == ' ') n--;
      printf("%.*s\n", (int)n, p);
      p += strcspn(p, ",");
      while (*p == ',' || *p == ' ') p++;
    }
  }
}

/* the catalogue as a Markdown table */
static void catalogue_table(void) {
  char a[32], b[32];
  printf("| report | NCCL versions | without ncclguard | ncclguard | test | workaround |\n"
         "| --- | --- | --- | --- | --- | --- |\n");
  for (size_t i = 0; i < NREPORTS; i++) {
    printf("| [%s](%s) | ", reports[i].id, reports[i].url);
    md(reports[i].versions);
    if (reports[i].from) {
      printf(". The doctor names it for NCCL %s", vstr(reports[i].from, a, sizeof a));
      if (reports[i].to) printf(" up to, not including, %s", vstr(reports[i].to, b, sizeof b));
      else printf(" and later");
      if (reports[i].sm) printf(", on a GPU of SM %d.%d", reports[i].sm / 10, reports[i].sm % 10);
      if (reports[i].unless) printf(", unless `%s`", reports[i].unless);
    }
    printf(" | ");
    md(reports[i].symptom);
    printf(" | **%s**: ", verdict_name[reports[i].verdict]);
    md(reports[i].guard);
    printf(" | ");
    const char *p = reports[i].tests;
    if (!*p) printf("-");
    while (*p) {
      size_t n = strcspn(p, ",");
      while (n && p[n - 1] == ' ') n--;
      printf("`%.*s`", (int)n, p);
      p += strcspn(p, ",");
      while (*p == ',' || *p == ' ') p++;
      if (*p) printf(", ");
    }
    printf(" | ");
    if (reports[i].fix[0]) md(reports[i].fix);
    else printf("-");
    printf(" |\n");
  }
}

/* FILE with the lines between its catalogue markers replaced by the table */
static int nccl_doc(const char *path) {
  static const char begin[] = "<!-- catalogue:begin", end[] = "<!-- catalogue:end -->";
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    return 1;
  }
  char line[65536];
  int state = 0; /* 0 before, 1 inside, 2 after */
  while (fgets(line, sizeof line, f)) {
    if (state == 1) {
      if (strncmp(line, end, sizeof end - 1)) continue;
      catalogue_table();
      state = 2;
    }
    fputs(line, stdout);
    if (state == 0 && !strncmp(line, begin, sizeof begin - 1)) state = 1;
  }
  fclose(f);
  if (state != 2) {
    fprintf(stderr, "gentables: %s: no '%s ... -->' and '%s' lines around the catalogue\n", path, begin, end);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--python")) python();
  else if (argc == 2 && !strcmp(argv[1], "--doc")) doc();
  else if (argc == 3 && !strcmp(argv[1], "--nccl-doc")) {
    if (catalogue_check() || nccl_doc(argv[2])) return 1;
  } else if (argc == 2 && !strcmp(argv[1], "--catalogue-tests")) {
    if (catalogue_check()) return 1;
    catalogue_tests();
  } else {
    fprintf(stderr, "Usage: gentables --python | --doc | --nccl-doc FILE | --catalogue-tests\n");
    return 2;
  }
  return fflush(stdout) ? 1 : 0;
}
