/* The NCCLGUARD_* variables (the table: vars.def): struct ng_config, the value grammar, and the
 * functions every reader of the table shares (vars.c): the library, ncclguard-doctor, genvars.
 * Needs libc alone. */
#ifndef NCCLGUARD_VARS_H
#define NCCLGUARD_VARS_H

#include <limits.h>
#include <stddef.h>

/* The value grammar, written once: genvars copies these into the shell and Python readers.
 * Words are compared without regard to case; numbers are POSIX extended regular expressions
 * matched against the whole value (no blank, no sign but an integer's '-', no hexadecimal). */
#define NG_BOOL_TRUE "1|true|yes|on"
#define NG_BOOL_FALSE "0|false|no|off"
#define NG_INT_RE "^-?[0-9]+$"
#define NG_NUM_RE "^([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"
/* The warning for a bad value: name, value, what is expected (ng_var_expect), the default used
 * (ng_var_default; a PATH's def_text). */
#define NG_BAD_VALUE_FMT "%s=%.60s is not valid (expected %s); using the default %s"
/* The warning for an NCCLGUARD_* name that is no variable: the name, the closest known name. */
#define NG_UNKNOWN_VAR_FMT "%.60s is not an ncclguard variable, ignored (did you mean %s?)"
/* The same two where the setting is refused rather than warned about (NCCLGUARD_STRICT: the Python
 * package; ncclguard-run writes its own, which also quotes the value). */
#define NG_REFUSED_VALUE_FMT "%s=%.60s is not valid (expected %s)"
#define NG_REFUSED_VAR_FMT "%.60s is not an ncclguard variable (did you mean %s?)"

/* The values of the ENUM variables, in the order of their CHOICES in vars.def. */
enum ng_level { NG_LOG_OFF = 0, NG_LOG_WARN = 1, NG_LOG_INFO = 2, NG_LOG_TRACE = 3 };
enum ng_on_failure { NG_FAIL_DEGRADE = 0, NG_FAIL_ERROR = 1 };
enum ng_warmup { NG_WARMUP_AUTO = 0, NG_WARMUP_ALWAYS = 1, NG_WARMUP_NEVER = 2 };
enum ng_nullwin { NG_NULLWIN_WARN = 0, NG_NULLWIN_ERROR = 1 };
enum ng_capture { NG_CAPTURE_DEGRADE = 0, NG_CAPTURE_RELAXED = 1 };

/* The C type of each kind's member. */
#define NG_CTYPE_BOOL int
#define NG_CTYPE_ENUM int
#define NG_CTYPE_INT long
#define NG_CTYPE_NUM double
#define NG_CTYPE_PATH char
#define NG_CDIM_BOOL
#define NG_CDIM_ENUM
#define NG_CDIM_INT
#define NG_CDIM_NUM
#define NG_CDIM_PATH [PATH_MAX]
#define NG_MEMBER_LIB(kind, field) NG_CTYPE_##kind field NG_CDIM_##kind;
#define NG_MEMBER_RUN(kind, field)

/* One member per variable the library reads (READER LIB), named by FIELD. */
struct ng_config {
#define NG_VAR(name, kind, field, def, lo, hi, choices, opts, reader, help) NG_MEMBER_##reader(kind, field)
#define NG_RUNOPT(opts, help)
#include "vars.def"
};

enum ng_kind { NG_KIND_BOOL, NG_KIND_ENUM, NG_KIND_INT, NG_KIND_NUM, NG_KIND_PATH, NG_KIND_OPT };

/* A row of the table. Rows of kind NG_KIND_OPT (name NULL) are options of ncclguard-run alone. */
struct ng_var {
  const char* name;     /* "NCCLGUARD_LOG" */
  int kind;             /* enum ng_kind */
  int lib;              /* read by the library (member of struct ng_config at `off`, `size` bytes) */
  size_t off, size;
  double def;           /* the default of every kind but PATH */
  const char* def_text; /* PATH: what an unset variable means */
  double min, max;      /* INT, NUM */
  const char* choices;  /* ENUM: "a|b|c" */
  const char* options;  /* ncclguard-run's options (vars.def) */
  const char* help;
};
extern const struct ng_var ng_vars[];
extern const int ng_nvars;

/* A parsed value: BOOL 0/1, ENUM the index of the choice, INT `i`, NUM `d`. */
struct ng_value {
  long i;
  double d;
};

/* The row of variable `name` (full name), or NULL. */
const struct ng_var* ng_var_find(const char* name);
/* 0 and *out when `v` is valid for `var`, else -1. A PATH is valid below PATH_MAX bytes. */
int ng_var_check(const struct ng_var* var, const char* v, struct ng_value* out);
/* What a valid value looks like: "1/0, true/false, yes/no or on/off", "off|warn|info|trace",
 * "an integer in [0, 100]", "a number in [0.001, 10000000]", "a path shorter than PATH_MAX". */
const char* ng_var_expect(const struct ng_var* var, char* buf, size_t n);
/* The accepted values in short (for tables): "off|warn|info|trace", "0..100", "1/0", "path". */
const char* ng_var_values(const struct ng_var* var, char* buf, size_t n);
/* The default as text: "warn", "3", "600", "1", or PATH's def_text. */
const char* ng_var_default(const struct ng_var* var, char* buf, size_t n);
/* Word `i` of a '|'-separated list into buf ("" when there is none). */
const char* ng_var_word(const char* list, int i, char* buf, size_t n);
/* A number of the table as text (%.15g). */
const char* ng_var_num(double x, char* buf, size_t n);

/* The library's configuration, parsed from `get` (secure_getenv in the library): every LIB
 * variable that is set and valid is stored in *cfg; each bad one calls bad(name, value, expected,
 * default). An empty PATH counts as unset. */
void ng_vars_parse(void* cfg, const char* (*get)(const char*),
                   void (*bad)(const char* name, const char* value, const char* expect, const char* def));
/* The variable of the table whose name is closest to `name` (edit distance, any case). */
const char* ng_var_closest(const char* name);
/* The member of `var` in cfg as text, for NCCLGUARD_DUMP_CONFIG (an unset PATH: its def_text). */
const char* ng_var_show(const struct ng_var* var, const void* cfg, char* buf, size_t n);

#endif
