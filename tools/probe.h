/* ncclguard-doctor --probe (tools/probe.c): the known failures measured on this node, NCCL alone and
 * with ncclguard. Takes the doctor's whole command line; returns the exit status (0 nothing worse
 * with ncclguard, 1 a REGRESSION, 2 could not probe or a usage error). */
#ifndef NG_TOOLS_PROBE_H
#define NG_TOOLS_PROBE_H
int ng_probe_main(int argc, char **argv);
#include <stddef.h>
/* Runs argv in a process group of its own with LD_PRELOAD unset, stdin and stderr on /dev/null, its stdout
 * read into buf (cap bytes, NUL-terminated) for at most timeout_s; the group is killed at the end. Returns the
 * bytes read; *status the wait status (-1: not started), *timed_out 1 when the time ran out. */
size_t ng_run_capture(char *const argv[], int timeout_s, char *buf, size_t cap, int *status, int *timed_out);
#endif
