/* libFuzzer harness: log-path expansion, ng_expand_path (shim/log.c). Input: 2 bytes of output
 * capacity (0..4351), 1 byte choosing how RANK is set, then the pattern. The output buffer is
 * exactly `cap` bytes on the heap (AddressSanitizer sees any byte written past it). Oracle: an
 * independent expansion into a large buffer; ng_expand_path must succeed exactly when the result
 * fits in cap (with its NUL) and then produce the same string, and fail (-1) otherwise. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guard.h"

#define CHECK(c)                                                                   \
  do {                                                                             \
    if (!(c)) {                                                                    \
      fprintf(stderr, "fuzz_path: invariant failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                     \
    }                                                                              \
  } while (0)

static char host[64];

static void ref_expand(const char* pat, const char* rank, char* out) {
  size_t o = 0;
  for (const char* p = pat; *p; p++) {
    char tmp[80];
    const char* add = tmp;
    if (*p == '%' && p[1]) {
      p++;
      if (*p == 'h') add = host;
      else if (*p == 'p') snprintf(tmp, sizeof tmp, "%d", (int)getpid());
      else if (*p == 'r') {
        if (rank) add = rank;
        else snprintf(tmp, sizeof tmp, "p%d", (int)getpid());
      } else if (*p == '%') add = "%";
      else snprintf(tmp, sizeof tmp, "%%%c", *p);
    } else {
      tmp[0] = *p, tmp[1] = 0;
    }
    size_t n = strlen(add);
    memcpy(out + o, add, n);
    o += n;
  }
  out[o] = 0;
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc, (void)argv;
  static const char* launcher[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID",
                                   "MV2_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof launcher / sizeof launcher[0]; i++) unsetenv(launcher[i]);
  if (gethostname(host, sizeof host - 1)) strcpy(host, "unknown");
  char* dot = strchr(host, '.');
  if (dot) *dot = 0;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3 || size > 8192) return 0;
  size_t cap = ((size_t)data[0] | (size_t)data[1] << 8) % 4352;
  /* RANK: unset, a valid rank, or junk the expansion must ignore */
  static const char* ranks[] = {NULL, "0", "7", "1073741823", "1073741824", "-1", "3x", "", " 5"};
  const char* rank = ranks[data[2] % (sizeof ranks / sizeof ranks[0])];
  if (rank) setenv("RANK", rank, 1);
  else unsetenv("RANK");
  /* strtol's rules: leading blanks are accepted (" 5" is rank 5) */
  const char* valid = !rank ? NULL : !strcmp(rank, " 5") ? "5"
                      : (!strcmp(rank, "0") || !strcmp(rank, "7") || !strcmp(rank, "1073741823")) ? rank : NULL;
  char* pat = malloc(size - 2);
  memcpy(pat, data + 3, size - 3);
  pat[size - 3] = 0;
  char* want = malloc(strlen(pat) * 80 + 1);
  ref_expand(pat, valid, want);
  char* out = malloc(cap ? cap : 1);
  int rc = cap ? ng_expand_path(pat, out, cap) : ng_expand_path(pat, out + 1, 0); /* cap 0: any write overflows */
  if (strlen(want) + 1 <= cap) {
    CHECK(rc == 0);
    CHECK(!strcmp(out, want));
  } else {
    CHECK(rc == -1);
  }
  free(out);
  free(want);
  free(pat);
  return 0;
}
