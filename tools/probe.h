/* ncclguard-doctor --probe (tools/probe.c): the known failures measured on this node, NCCL alone and
 * with ncclguard. Takes the doctor's whole command line; returns the exit status (0 nothing worse
 * with ncclguard, 1 a REGRESSION, 2 could not probe or a usage error). */
#ifndef NG_TOOLS_PROBE_H
#define NG_TOOLS_PROBE_H
int ng_probe_main(int argc, char **argv);
#endif
