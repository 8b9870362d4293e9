/* The tools' view of the table of variables (shim/vars.def): the library's rows (ng_vars[],
 * shim/vars.c) followed by the NG_PYVAR rows it leaves out (NCCLGUARD, the Python package's
 * switch), and how a default is shown. Shared by ncclguard-doctor and genvars; values are still
 * checked by the library's one reader (ng_var_check). */
#ifndef NCCLGUARD_VARINFO_H
#define NCCLGUARD_VARINFO_H

#include "vars.h"

/* The number of rows, and row i (0 <= i < ng_tab_count()): ng_vars[] first, in its order. */
int ng_tab_count(void);
const struct ng_var* ng_tab_var(int i);
/* The row of variable `name` (full name: "NCCLGUARD_LOG", "NCCLGUARD"), or NULL. */
const struct ng_var* ng_tab_find(const char* name);
/* Who reads it: "lib" (the library), "run" (ncclguard-run and its Python hook), "python" (the
 * Python package). */
const char* ng_tab_reader(const struct ng_var* v);
/* The default as text: "warn", "600", or what an unset variable means ("(auto)"). */
const char* ng_tab_default(const struct ng_var* v, char* buf, size_t n);
/* A default in parentheses ("(auto)") says there is no fixed value: its description ("the libnccl
 * the process loads") into buf, else NULL. */
const char* ng_tab_default_desc(const struct ng_var* v, char* buf, size_t n);
/* "(default warn)", or "(default: DESCRIPTION)" for a described one. */
const char* ng_tab_default_note(const struct ng_var* v, char* buf, size_t n);

#endif
