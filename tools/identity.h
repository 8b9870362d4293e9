/* The tools' identity for --version: "X.Y.Z (revision)", from NG_VERSION and NG_REVISION, which the
 * Makefile sets from VERSION and git (or REVISION); no revision: none shown. */
#ifndef NG_TOOLS_IDENTITY_H
#define NG_TOOLS_IDENTITY_H
#ifndef NG_VERSION
#define NG_VERSION "unknown"
#endif
#ifdef NG_REVISION
#define NG_IDENTITY NG_VERSION " (" NG_REVISION ")"
#else
#define NG_IDENTITY NG_VERSION
#endif
#endif
