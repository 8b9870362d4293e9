/* ncclguard's identity, compiled afresh at every build from VERSION and the git revision. */
#include "guard.h"

#ifndef NG_VERSION
#define NG_VERSION "unknown"
#define NG_REVISION "unknown"
#endif

const char* ng_version(void) { return "ncclguard " NG_VERSION " (" NG_REVISION ")"; }
