/* gentables: writes what is generated from ncclguard's tables (shim/logschema.def, shim/reasons.def,
 * shim/decisions.def):
 *   gentables --python   tools/python/ncclguard_hook/_schema.py (the Python hook's key list and types)
 *   gentables --doc      docs/LOG.md (the log format, every key, every reason)
 * `make tables` rewrites both; tests/t_tools_report.sh fails when a committed copy is stale. */
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

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--python")) python();
  else if (argc == 2 && !strcmp(argv[1], "--doc")) doc();
  else {
    fprintf(stderr, "Usage: gentables --python | --doc\n");
    return 2;
  }
  return fflush(stdout) ? 1 : 0;
}
