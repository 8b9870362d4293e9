/* ncclguard's identity, compiled afresh at every build from VERSION and the revision (Makefile). */
#include "guard.h"

#ifndef NG_VERSION
#define NG_VERSION "unknown"
#endif

#ifdef NG_REVISION
const char* ng_version(void) { return "ncclguard " NG_VERSION " (" NG_REVISION ")"; }
#else
const char* ng_version(void) { return "ncclguard " NG_VERSION; }
#endif
