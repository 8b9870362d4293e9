/* Unit tests of the registration policy's phases (shim/policy.c) with a stubbed agreement.
 *
 * The policy's source is included here, so that its static phases (decide(), phase_vote, phase_go,
 * phase_outcome, ...) are callable (the shape of NCCL's plugin example tests, which include the
 * plugin's .c). The program links every other object of the library except agree.o: everything
 * agree.c exports is stubbed below. ng_agree is scripted: each case says what the other ranks put
 * into a round (max-reduced into this rank's vote, as the real all-reduce does) or how the round
 * fails; the stub records what this rank sent. NCCL itself is the fake NCCL (tests/fake), reached
 * through ncclguard's NG_CALL/ng_real as in the library; this rank is rank 1 of 4 on a one-rank
 * fake communicator (the registry says 4 ranks: the peers exist only in the scripted rounds).
 *
 * Every case runs in a forked child: the loaded NCCL's version is read once per process (fake and
 * ncclguard alike), and each case starts from a fresh registry and configuration.
 * Usage: policy_test DIR [CASE-SUBSTRING]   (DIR receives each case's log file)
 * Prints "ok policy-unit-NAME" or "FAIL policy-unit-NAME: why" per case; exit 1 if any failed. */
#include "../../shim/policy.c"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

/* The fake runtime and the fake NCCL's own entry points (pnccl*: past ncclguard's wrappers, which this
 * program links too). */
int cudaSetDevice(int dev);
int cudaMalloc(void** p, size_t n);
ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t pncclMemAlloc(void** p, size_t n);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- the stubbed agreement (everything agree.c exports) ------------------------------------- */
#define MAXROUNDS 16
struct round {
  char what[40];
  int n;
  struct ng_vote sent[4]; /* this rank's votes as it sent them */
};
static struct round rounds[MAXROUNDS];
static int nrounds;
/* The other ranks of the round `what`: adds their votes (max) to v[0..n) or sets a failed status;
 * returns what ng_agree returns. NULL: the peers vote exactly like this rank. */
static ncclResult_t (*peers)(const char* what, struct ng_vote* v, int n);
static int can_revoke = 1;                   /* ng_can_revoke() */
static ncclResult_t ready_result = ncclSuccess; /* ng_wait_ready() */
static int watchdog_fires;                   /* ng_watch_disarm() */
static int gave_up, watches_armed;

static int status_reason_of(int s) {
  return s == NG_AGREE_TIMEOUT ? NG_R_TIMEOUT : s == NG_AGREE_STEP ? NG_R_OUT_OF_STEP
         : s == NG_AGREE_ABORTED ? NG_R_COMM_DESTROYED : NG_R_AGREE_FAILED;
}

ncclResult_t ng_agree(struct ng_vote* votes, int n, const char* what) {
  if (n <= 0) return ncclSuccess;
  struct round* r = &rounds[nrounds < MAXROUNDS ? nrounds++ : MAXROUNDS - 1];
  snprintf(r->what, sizeof r->what, "%s", what);
  r->n = n;
  memcpy(r->sent, votes, (size_t)(n < 4 ? n : 4) * sizeof *votes);
  for (int i = 0; i < n; i++) votes[i].status = NG_AGREE_OK, votes[i].one_host = 1;
  ncclResult_t res = peers ? peers(what, votes, n) : ncclSuccess;
  for (int i = 0; i < n; i++) /* as agree.c: a failed round leaves its communicator broken */
    if (votes[i].status != NG_AGREE_OK) ng_reg_comm_set_broken(votes[i].comm, 0, status_reason_of(votes[i].status));
  return res;
}
ncclResult_t ng_agree_after(struct ng_vote* votes, int n, const char* what) { return ng_agree(votes, n, what); }
double ng_late_grace_us(void) { return 0; }
int ng_can_revoke(void) { return can_revoke; }
void ng_give_up(ncclComm_t comm, uint64_t gen, int dev, int reason, const char* cause) {
  (void)dev, (void)cause;
  gave_up++;
  ng_reg_comm_set_broken(comm, gen, reason);
}
ncclResult_t ng_wait_ready_until(ncclComm_t comm, int dev, double deadline) {
  (void)comm, (void)dev, (void)deadline;
  return ready_result;
}
ncclResult_t ng_wait_ready(ncclComm_t comm, int dev) { return ng_wait_ready_until(comm, dev, 0); }
double ng_deadline(void) { return ng_now_us() + 1e6; }
void ng_watch_arm(struct watch* w, ncclComm_t comm, int dev, double deadline, const char* what, int seq,
                  int reached) {
  (void)what, (void)seq, (void)reached;
  *w = (struct watch){.comm = comm, .dev = dev, .deadline = deadline};
  watches_armed++;
}
int ng_watch_disarm(struct watch* w) {
  (void)w;
  return watchdog_fires;
}
void ng_stop_comm(ncclComm_t comm, uint64_t gen, int dev, int reason, const char* why) {
  (void)dev, (void)why;
  gave_up++;
  ng_reg_comm_set_broken(comm, gen, reason);
}
/* the warm-up at a communicator's creation (agree.c): nothing to script */
void ng_warmup(const ncclComm_t* comms, int n, const char* what) { (void)comms, (void)n, (void)what; }

/* ---- what the peers say ---------------------------------------------------------------------- */
#define RANK 1
#define NRANKS 4
static void vmax(struct ng_vote* v, int k, int32_t x) {
  if (v->v[k] < x) v->v[k] = x;
}
/* rank `rank` has an argument reason (counts on any path) */
static void peer_reason(struct ng_vote* v, int reason, int rank) {
  vmax(v, reason, 1);
  vmax(v, NG_VOTE_FIRST_BAD, NRANKS - rank);
}
/* rank `rank`'s preflight found `reason` (counts only on the symmetric path) */
static void peer_fact(struct ng_vote* v, int reason, int rank) {
  v->v[NG_VOTE_FACTS] |= (int32_t)(1u << reason);
  vmax(v, NG_VOTE_FACTS_FIRST_BAD, NRANKS - rank);
}
static int is(const char* what, const char* w) { return !strcmp(what, w); }

/* ---- the cases' harness --------------------------------------------------------------------- */
static char fail_msg[1024];
static int failed;
static void failf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char* fmt, ...) {
  if (failed++) return; /* the first failure is the one reported */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fail_msg, sizeof fail_msg, fmt, ap);
  va_end(ap);
}
#define CHECK(cond, ...)                        \
  do {                                          \
    if (!(cond)) failf(__VA_ARGS__);            \
  } while (0)
#define CHECK_INT(got, want, what)                                                         \
  do {                                                                                     \
    long long g_ = (long long)(got), w_ = (long long)(want);                               \
    if (g_ != w_) failf("%s: got %lld, want %lld (line %d)", what, g_, w_, __LINE__);      \
  } while (0)
#define CHECK_STR(got, want, what)                                                              \
  do {                                                                                          \
    const char *g_ = (got), *w_ = (want);                                                       \
    if (strcmp(g_, w_)) failf("%s: got %s, want %s (line %d)", what, g_, w_, __LINE__);         \
  } while (0)

static ncclComm_t comm; /* the fake's one-rank communicator, rank RANK of NRANKS for ncclguard */
static void* vbuf;      /* 2 MiB from ncclMemAlloc (VMM) */
static ncclWindow_t win;
static const char* logpath;
#define SENTINEL ((ncclWindow_t)(uintptr_t)0x5e17)

static void setup(void) {
  CHECK_INT(cudaSetDevice(0), 0, "cudaSetDevice");
  CHECK_INT(pncclCommInitAll(&comm, 1, NULL), ncclSuccess, "fake ncclCommInitAll");
  ng_reg_comm_add(comm, 0xc1d, 0, RANK, NRANKS, 0, 1, NG_COMM_READY);
  CHECK_INT(pncclMemAlloc(&vbuf, 2u << 20), ncclSuccess, "fake ncclMemAlloc");
}

static struct ng_regreq req(void* buff, size_t size, ncclWindow_t* w) {
  return (struct ng_regreq){.comm = comm, .buff = buff, .size = size, .win = w, .flags = 1, .t0 = ng_now_us()};
}

static int decision_is(const struct ng_regreq* r, int d, ncclResult_t res, int reason_agreed, int reason_local) {
  if (r->decision == d && r->result == res && r->agreed_reason == reason_agreed && r->local_reason == reason_local)
    return 1;
  failf("decision=%s result=%s agreed=%s local=%s; want decision=%s result=%s agreed=%s local=%s",
        ng_decision_name(r->decision), ng_result_name(r->result), ng_reason_name(r->agreed_reason),
        ng_reason_name(r->local_reason), ng_decision_name(d), ng_result_name(res), ng_reason_name(reason_agreed),
        ng_reason_name(reason_local));
  return 0;
}

/* the rounds run, as "registration,registration outcome" */
static const char* round_list(void) {
  static char s[MAXROUNDS * (sizeof rounds[0].what + 1)];
  size_t l = 0;
  for (int i = 0; i < nrounds; i++) {
    if (i) s[l++] = ',';
    size_t k = strnlen(rounds[i].what, sizeof rounds[i].what - 1);
    memcpy(s + l, rounds[i].what, k);
    l += k;
  }
  s[l] = 0;
  return s;
}

/* 1 if the log has a line containing every one of the NULL-terminated fragments */
static int log_has(const char* first, ...) {
  FILE* f = fopen(logpath, "r");
  if (!f) return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    va_list ap;
    va_start(ap, first);
    found = 1;
    for (const char* s = first; s; s = va_arg(ap, const char*))
      if (!strstr(line, s)) found = 0;
    va_end(ap);
  }
  fclose(f);
  return found;
}

/* a live window of the fake NCCL is deregistered now (1), or was already (0: NCCL refuses it) */
static int live_window(ncclWindow_t w) { return w && pncclCommWindowDeregister(comm, w) == ncclSuccess; }

static struct ng_commview view(void) {
  struct ng_commview v;
  ng_reg_comm_get(comm, &v);
  return v;
}

/* ---- decide(), from reduced votes ------------------------------------------------------------ */
/* A request of this rank after preflight: clean arguments, no fact, every rank's rules say symmetric. */
static struct ng_regreq decide_req(void) {
  struct ng_regreq r = req(vbuf, 4096, &win);
  r.cv.known = 1, r.cv.rank = RANK, r.cv.nranks = NRANKS, r.cv.dev = 0;
  r.rules.sym = NG_SYM_YES;
  r.first_bad_rank = -1;
  r.decision = NG_D_REGISTER;
  win = SENTINEL;
  return r;
}
static void decide_with(struct ng_regreq* r, void (*peer)(struct ng_vote*), int one_host) {
  struct ng_vote vt;
  vote_fill(&vt, r);
  vt.status = NG_AGREE_OK;
  vt.one_host = one_host;
  if (peer) peer(&vt);
  decide(r, &vt);
}
static void p_rank2_not_vmm(struct ng_vote* v) { peer_fact(v, NG_R_NOT_VMM, 2); vmax(v, NG_VOTE_SYM_YES, 1); }
static void p_rank2_not_vmm_rank3_unknown(struct ng_vote* v) { p_rank2_not_vmm(v); vmax(v, NG_VOTE_SYM_UNKNOWN, 1); }
static void p_rank2_not_vmm_rank3_no(struct ng_vote* v) { p_rank2_not_vmm(v); vmax(v, NG_VOTE_SYM_NO, 1); }
static void p_rank2_not_vmm_one_node(struct ng_vote* v) { p_rank2_not_vmm(v); vmax(v, NG_VOTE_ONE_NODE, 1); }
static void p_rank3_null_win(struct ng_vote* v) { peer_reason(v, NG_R_NULL_WIN, 3); }
static void p_rank3_null_buff(struct ng_vote* v) { peer_reason(v, NG_R_NULL_BUFF, 3); }
static void p_rank0_zero_size(struct ng_vote* v) { peer_reason(v, NG_R_ZERO_SIZE, 0); }
static void p_rank3_null_buff_unknown(struct ng_vote* v) { p_rank3_null_buff(v); vmax(v, NG_VOTE_SYM_UNKNOWN, 1); }
static void p_two_facts(struct ng_vote* v) {
  peer_fact(v, NG_R_OUT_OF_RANGE, 3);
  peer_fact(v, NG_R_MISALIGNED, 2);
  vmax(v, NG_VOTE_SYM_YES, 1);
}

/* a peer's allocation twice this rank's (the vote's max of each piece and of the 4 KiB units); arg 1: a
 * third rank could not read its size (SIZE_UNKNOWN), so sizes are not compared and NCCL decides */
static int peer_size_unknown;
static void p_bigger_alloc(struct ng_vote* v) {
  vmax(v, NG_VOTE_SYM_YES, 1);
  uint64_t big = (uint64_t)4 << 20;
  for (int p = 0; p < 3; p++) vmax(v, NG_VOTE_SIZE_P0 + p, (int32_t)((big >> (22 * p)) & 0x3fffff));
  vmax(v, NG_VOTE_SIZE_4K, (int32_t)(big / 4096));
  if (peer_size_unknown) vmax(v, NG_VOTE_SIZE_UNKNOWN, 1);
}
static void t_decide_layout(int arg) {
  peer_size_unknown = arg;
  struct ng_regreq r = decide_req();
  r.alloc_size = (size_t)2 << 20;
  decide_with(&r, p_bigger_alloc, 1);
  if (arg) {
    decision_is(&r, NG_D_REGISTER, ncclSuccess, NG_R_OK, NG_R_OK);
  } else {
    decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_LAYOUT_MISMATCH, NG_R_LAYOUT_MISMATCH);
    CHECK(win == NULL, "*win %p, want NULL", (void*)win);
  }
}

static void t_decide_peer_fact_degrades(int arg) {
  (void)arg;
  struct ng_regreq r = decide_req();
  decide_with(&r, p_rank2_not_vmm, 1);
  decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_NOT_VMM, NG_R_OK);
  CHECK_INT(r.first_bad_rank, 2, "bad_rank");
  CHECK(win == NULL, "*win not set to NULL on degrade: %p", (void*)win);
  /* (counted once the batch's outcome is final, ng_policy_register: a rollback may still take it back) */
  CHECK_INT(view().ndegraded, 0, "NULL windows counted by decide()");
}

static void t_decide_own_fact(int arg) {
  (void)arg;
  struct ng_regreq r = decide_req();
  r.facts = 1u << NG_R_NOT_VMM; /* this rank's preflight */
  decide_with(&r, p_rank2_not_vmm, 1);
  decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_NOT_VMM, NG_R_NOT_VMM);
  CHECK_INT(r.first_bad_rank, RANK, "bad_rank (the lowest rank with the fact)");
}

static void t_decide_lowest_reason(int arg) {
  (void)arg;
  struct ng_regreq r = decide_req();
  decide_with(&r, p_two_facts, 1);
  /* MISALIGNED < OUT_OF_RANGE in the table; the first bad rank is the lowest with any fact */
  decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_MISALIGNED, NG_R_OK);
  CHECK_INT(r.first_bad_rank, 2, "bad_rank");
}

static void t_decide_unknown_never_degrades(int arg) {
  (void)arg;
  struct ng_regreq r = decide_req();
  decide_with(&r, p_rank2_not_vmm_rank3_unknown, 1); /* one rank cannot tell */
  decision_is(&r, NG_D_REGISTER, ncclSuccess, NG_R_OK, NG_R_OK);
  CHECK(win == SENTINEL, "*win written: %p", (void*)win);
  r = decide_req();
  r.rules.sym = NG_SYM_UNKNOWN; /* this rank cannot tell, its own fact included */
  r.facts = 1u << NG_R_NOT_VMM;
  decide_with(&r, p_rank2_not_vmm, 1);
  decision_is(&r, NG_D_REGISTER, ncclSuccess, NG_R_OK, NG_R_OK);
  r = decide_req();
  decide_with(&r, p_rank2_not_vmm_rank3_no, 1); /* one rank says no symmetric path, the others yes: NCCL would */
  /* answer that rank alone (NULL or local window) while its peers wait in the exchange; NULL everywhere */
  decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_NULL_WINDOW, NG_R_OK);
  CHECK(win == NULL, "*win %p, want NULL", (void*)win);
  r = decide_req();
  decide_with(&r, p_rank2_not_vmm_one_node, 0); /* symmetric only on one host, ranks on several */
  decision_is(&r, NG_D_REGISTER, ncclSuccess, NG_R_OK, NG_R_OK);
  r = decide_req();
  decide_with(&r, p_rank2_not_vmm_one_node, 1); /* ... all on one host: the fact counts */
  decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_NOT_VMM, NG_R_OK);
  CHECK_INT(view().ndegraded, 0, "NULL windows counted by decide() (ng_policy_register counts them at its end)");
}

/* 2.28.3: one rank's rules say no symmetric path, another's yes on one host (NG_VOTE_ONE_NODE). All on one host:
 * the split NCCL would hang on, a NULL window everywhere; on several hosts NCCL has symmetric support nowhere
 * (init.cc at v2.28.3-1: nNodes == 1) and registers locally on every rank: passed to NCCL. */
static void p_rank3_no_one_node(struct ng_vote* v) { vmax(v, NG_VOTE_SYM_YES, 1), vmax(v, NG_VOTE_SYM_NO, 1), vmax(v, NG_VOTE_ONE_NODE, 1); }
static void t_decide_split_one_node(int arg) {
  (void)arg;
  struct ng_regreq r = decide_req();
  r.rules.one_node = 1;
  decide_with(&r, p_rank3_no_one_node, 1);
  decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_NULL_WINDOW, NG_R_OK);
  CHECK(win == NULL, "*win %p, want NULL", (void*)win);
  r = decide_req();
  r.rules.one_node = 1;
  decide_with(&r, p_rank3_no_one_node, 0);
  decision_is(&r, NG_D_REGISTER, ncclSuccess, NG_R_OK, NG_R_OK);
  CHECK(win == SENTINEL, "*win written: %p", (void*)win);
}

static void t_decide_null_win_error(int arg) {
  (void)arg;
  struct ng_regreq r = decide_req();
  decide_with(&r, p_rank3_null_win, 1);
  decision_is(&r, NG_D_ERROR, ncclInvalidArgument, NG_R_NULL_WIN, NG_R_OK);
  CHECK_INT(r.first_bad_rank, 3, "bad_rank");
  CHECK(win == SENTINEL, "*win written on an error: %p", (void*)win);
  r = decide_req(); /* the rank with the NULL win itself */
  r.win = NULL;
  r.arg_reason = NG_R_NULL_WIN;
  decide_with(&r, NULL, 1);
  decision_is(&r, NG_D_ERROR, ncclInvalidArgument, NG_R_NULL_WIN, NG_R_NULL_WIN);
  CHECK_INT(r.first_bad_rank, RANK, "bad_rank");
  r = decide_req(); /* whatever the rules say, with on_failure=degrade */
  r.rules.sym = NG_SYM_UNKNOWN;
  decide_with(&r, p_rank3_null_win, 1);
  decision_is(&r, NG_D_ERROR, ncclInvalidArgument, NG_R_NULL_WIN, NG_R_OK);
  CHECK_INT(view().ndegraded, 0, "degraded windows");
}

/* arg: the NCCL version the fake reports (read through ng_nccl_version) */
static void t_decide_null_buff(int version) {
  CHECK_INT(ng_nccl_version(), version, "ng_nccl_version (FAKE_NCCL_VERSION)");
  int d = version >= 22900 ? NG_D_ERROR : NG_D_DEGRADE;
  ncclResult_t res = version >= 22900 ? ncclInvalidArgument : ncclSuccess;
  struct ng_regreq r = decide_req();
  decide_with(&r, p_rank3_null_buff, 1);
  decision_is(&r, d, res, NG_R_NULL_BUFF, NG_R_OK);
  CHECK_INT(r.first_bad_rank, 3, "bad_rank");
  r = decide_req();
  decide_with(&r, p_rank0_zero_size, 1);
  decision_is(&r, d, res, NG_R_ZERO_SIZE, NG_R_OK);
  CHECK_INT(r.first_bad_rank, 0, "bad_rank");
  r = decide_req(); /* an argument reason counts on any path, even where a rank cannot tell */
  decide_with(&r, p_rank3_null_buff_unknown, 1);
  decision_is(&r, d, res, NG_R_NULL_BUFF, NG_R_OK);
  r = decide_req(); /* this rank's own NULL buffer */
  r.buff = NULL, r.arg_reason = NG_R_NULL_BUFF;
  decide_with(&r, NULL, 1);
  decision_is(&r, d, res, NG_R_NULL_BUFF, NG_R_NULL_BUFF);
  CHECK(d == NG_D_DEGRADE ? win == NULL : win == SENTINEL, "*win %p after %s", (void*)win, ng_decision_name(d));
}

static void t_decide_has_devcomm(int arg) {
  (void)arg;
  struct ng_regreq r = decide_req();
  r.cv.has_devcomm = 1;
  decide_with(&r, p_rank2_not_vmm, 1);
  decision_is(&r, NG_D_ERROR, ncclInvalidUsage, NG_R_NOT_VMM, NG_R_OK);
  CHECK(win == SENTINEL, "*win written: %p", (void*)win);
  CHECK_INT(view().ndegraded, 0, "degraded windows");
}

static void t_decide_on_failure_error(int arg) {
  (void)arg;
  ng_cfg.on_failure = NG_FAIL_ERROR;
  struct ng_regreq r = decide_req();
  decide_with(&r, p_rank2_not_vmm, 1);
  decision_is(&r, NG_D_ERROR, ncclInvalidArgument, NG_R_NOT_VMM, NG_R_OK);
  CHECK(win == SENTINEL, "*win written: %p", (void*)win);
  CHECK_INT(view().ndegraded, 0, "degraded windows");
}

static void t_vote_fill(int arg) {
  (void)arg;
  struct ng_regreq r = decide_req();
  struct ng_vote vt;
  vote_fill(&vt, &r);
  CHECK_INT(vt.v[NG_VOTE_FIRST_BAD], 0, "clean: FIRST_BAD");
  CHECK_INT(vt.v[NG_VOTE_SYM_YES], 1, "SYM_YES");
  CHECK_INT(vt.v[NG_VOTE_SYM_NO] + vt.v[NG_VOTE_SYM_UNKNOWN] + vt.v[NG_VOTE_FACTS], 0, "SYM_NO+UNKNOWN+FACTS");
  r.arg_reason = NG_R_ZERO_SIZE;
  r.facts = 1u << NG_R_MISALIGNED;
  r.rules.sym = NG_SYM_NO;
  vote_fill(&vt, &r);
  CHECK_INT(vt.v[NG_R_ZERO_SIZE], 1, "argument reason flag");
  CHECK_INT(vt.v[NG_VOTE_FIRST_BAD], NRANKS - RANK, "FIRST_BAD (nranks - rank)");
  CHECK_INT(vt.v[NG_VOTE_FACTS], 1u << NG_R_MISALIGNED, "FACTS");
  CHECK_INT(vt.v[NG_VOTE_FACTS_FIRST_BAD], NRANKS - RANK, "FACTS_FIRST_BAD");
  CHECK_INT(vt.v[NG_VOTE_SYM_NO], 1, "SYM_NO");
}

/* ---- the whole batch: ng_policy_register with scripted rounds --------------------------------- */
static ncclResult_t register_one_req(struct ng_regreq* r) { return ng_policy_register(r, 1); }

static ncclResult_t pr_rank2_not_vmm(const char* what, struct ng_vote* v, int n) {
  (void)n;
  if (is(what, "registration")) p_rank2_not_vmm(v);
  return ncclSuccess;
}

static void t_register_normal(int arg) {
  can_revoke = arg != 0;
  /* arg 2: NCCL's registration took more than half of NCCLGUARD_TIMEOUT here (a tiny timeout makes
   * any registration that slow): the same rounds (whether a round runs never depends on a rank's own
   * timing: a slow rank alone in a round would pair with its peers' next collective) */
  if (arg == 2) ng_cfg.timeout_s = 1e-7;
  win = NULL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  CHECK_INT(register_one_req(&r), ncclSuccess, "ng_policy_register");
  decision_is(&r, NG_D_REGISTER, ncclSuccess, NG_R_OK, NG_R_OK);
  CHECK(win != NULL, "no window from NCCL");
  /* every version, every path: the vote, the go round without revoke, the outcome round */
  char want[96];
  snprintf(want, sizeof want, "registration%s,registration outcome", arg ? "" : ",registration go");
  CHECK_STR(round_list(), want, "rounds");
  CHECK_INT(rounds[0].sent[0].v[NG_VOTE_FIRST_BAD], 0, "vote: FIRST_BAD of a clean rank");
  CHECK_INT(rounds[nrounds - 1].sent[0].v[NG_VOTE_FAILED], 0, "outcome vote of a rank where NCCL succeeded");
  CHECK_INT(watches_armed, can_revoke ? 1 : 0, "watchdogs armed around NCCL's registration (none where NCCL cannot revoke)");
  CHECK(log_has("fn=ncclCommWindowRegister", "cid=0000000000000c1d", "rank=1", "nranks=4", "decision=register reason=ok",
                (char*)NULL), "no 'decision=register reason=ok' line in %s", logpath);
  CHECK(live_window(win), "the window is not live in NCCL");
}

static void t_register_peer_fact(int arg) {
  can_revoke = arg;
  peers = pr_rank2_not_vmm;
  win = SENTINEL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  CHECK_INT(register_one_req(&r), ncclSuccess, "ng_policy_register");
  decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_NOT_VMM, NG_R_OK);
  CHECK(win == NULL, "*win %p, want NULL", (void*)win);
  /* nothing registers: no go round (even without revoke), no NCCL call, no outcome round */
  CHECK_STR(round_list(), "registration", "rounds");
  CHECK_INT(watches_armed, 0, "watchdogs armed (NCCL called?)");
  CHECK(log_has("fn=ncclCommWindowRegister", "result=ncclSuccess", "decision=degrade reason=peer_not_vmm bad_rank=2",
                "another rank", (char*)NULL), "no 'decision=degrade reason=peer_not_vmm bad_rank=2' line in %s", logpath);
}

static ncclResult_t pr_rank3_null_win(const char* what, struct ng_vote* v, int n) {
  (void)n;
  if (is(what, "registration")) p_rank3_null_win(v);
  return ncclSuccess;
}
static void t_register_peer_null_win(int arg) {
  (void)arg;
  peers = pr_rank3_null_win;
  win = SENTINEL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  CHECK_INT(register_one_req(&r), ncclInvalidArgument, "ng_policy_register");
  decision_is(&r, NG_D_ERROR, ncclInvalidArgument, NG_R_NULL_WIN, NG_R_OK);
  CHECK(log_has("decision=error reason=peer_null_win bad_rank=3", (char*)NULL), "no peer_null_win line in %s",
        logpath);
}

/* this rank's NULL buffer, through the whole policy (arg: the NCCL version) */
static void t_register_null_buff(int version) {
  win = SENTINEL;
  struct ng_regreq r = req(NULL, 1u << 20, &win);
  CHECK_INT(ng_check_reg_args(&r), NG_R_OK, "ng_check_reg_args");
  CHECK_INT(r.arg_reason, NG_R_NULL_BUFF, "arg_reason");
  ncclResult_t want = version >= 22900 ? ncclInvalidArgument : ncclSuccess;
  CHECK_INT(register_one_req(&r), want, "ng_policy_register");
  decision_is(&r, version >= 22900 ? NG_D_ERROR : NG_D_DEGRADE, want, NG_R_NULL_BUFF, NG_R_NULL_BUFF);
  CHECK_INT(rounds[0].sent[0].v[NG_R_NULL_BUFF], 1, "the vote carries the NULL buffer");
  CHECK_STR(round_list(), "registration", "rounds");
  CHECK(log_has(version >= 22900 ? "decision=error reason=null_buff bad_rank=1" : "decision=degrade reason=null_buff bad_rank=1",
                (char*)NULL), "no null_buff line in %s", logpath);
}

/* a vote round that fails: arg is the status */
static int fail_status;
static ncclResult_t fail_result;
static ncclResult_t pr_vote_fails(const char* what, struct ng_vote* v, int n) {
  if (!is(what, "registration")) return ncclSuccess;
  for (int i = 0; i < n; i++) v[i].status = fail_status;
  return fail_result;
}
static void t_vote_fails(int status) {
  peers = pr_vote_fails;
  fail_status = status;
  /* what agree.c returns for each status; FAILED also with a round that returned success */
  fail_result = status == NG_AGREE_TIMEOUT ? ncclSystemError : status == NG_AGREE_FAILED ? ncclSuccess
                : ncclInvalidUsage;
  int reason = status_reason_of(status);
  win = SENTINEL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  ncclResult_t want = fail_result == ncclSuccess ? ncclInternalError : fail_result;
  CHECK_INT(register_one_req(&r), want, "ng_policy_register");
  decision_is(&r, NG_D_ERROR, want, reason, reason);
  CHECK(win == NULL, "an error left *win set: %p", (void*)win);
  CHECK_STR(round_list(), "registration", "rounds (no go, no outcome)");
  CHECK_INT(watches_armed, 0, "NCCL's registration was called");
  CHECK_INT(view().broken, reason, "the communicator is broken");
  char want_line[96];
  snprintf(want_line, sizeof want_line, "decision=error reason=%s", ng_reason_name(reason));
  /* a failed agreement all-reduce (status FAILED) has its own reason, agree_failed: not NCCL's registration */
  CHECK(log_has(want_line, "not registered", (char*)NULL), "no '%s' line in %s", want_line, logpath);
  /* the next registration on it is refused without a round */
  nrounds = 0;
  struct ng_regreq r2 = req(vbuf, 1u << 20, &win);
  CHECK_INT(register_one_req(&r2), ncclInvalidArgument, "the next registration");
  decision_is(&r2, NG_D_ERROR, ncclInvalidArgument, NG_R_COMM_BROKEN, NG_R_COMM_BROKEN);
  CHECK_INT(nrounds, 0, "rounds on a broken communicator");
}

/* the go round (no revoke): arg 0 it fails (timeout), 1 nothing registers */
static ncclResult_t pr_go_times_out(const char* what, struct ng_vote* v, int n) {
  if (!is(what, "registration go")) return ncclSuccess;
  for (int i = 0; i < n; i++) v[i].status = NG_AGREE_TIMEOUT;
  return ncclSystemError;
}
static void t_go_round_fails(int arg) {
  (void)arg;
  can_revoke = 0;
  peers = pr_go_times_out;
  win = SENTINEL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  CHECK_INT(register_one_req(&r), ncclSystemError, "ng_policy_register");
  decision_is(&r, NG_D_ERROR, ncclSystemError, NG_R_TIMEOUT, NG_R_TIMEOUT);
  CHECK_STR(round_list(), "registration,registration go", "rounds");
  CHECK_INT(watches_armed, 0, "NCCL's registration was called after a failed go round");
  CHECK(win == NULL, "an error left *win set: %p", (void*)win);
}

/* the outcome round: NCCL failed on another rank with `f` (1: ncclInvalidArgument, 2 + r: result r).
 * Run at 2.27, where every rank runs the outcome round (2.28.7 - 2.30.x: NCCL's final barrier makes
 * "succeeded here, failed on another rank" impossible on the symmetric path, register-normal) */
static int32_t outcome_failed;
static ncclWindow_t seen_win;
static ncclResult_t pr_outcome(const char* what, struct ng_vote* v, int n) {
  (void)n;
  if (!is(what, "registration outcome")) return ncclSuccess;
  seen_win = win; /* what NCCL wrote for this rank */
  vmax(&v[0], NG_VOTE_FAILED, outcome_failed);
  if (outcome_failed < 0) {
    v[0].status = NG_AGREE_TIMEOUT;
    return ncclSystemError;
  }
  return ncclSuccess;
}
/* the outcome round: NCCL answered success with a NULL window on another rank, a window here: dropped
 * again here, every rank NULL (arg 1: NCCLGUARD_NULL_WINDOW=error, the same error everywhere) */
static ncclResult_t pr_null_peer(const char* what, struct ng_vote* v, int n) {
  (void)n;
  if (!is(what, "registration outcome")) return ncclSuccess;
  seen_win = win;
  vmax(&v[0], NG_VOTE_NULL_WIN, 1);
  return ncclSuccess;
}
static void t_outcome_null_peer(int arg) {
  if (arg) ng_cfg.null_window = NG_NULLWIN_ERROR;
  peers = pr_null_peer;
  win = NULL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  ncclResult_t res = register_one_req(&r);
  CHECK(seen_win != NULL, "NCCL gave this rank no window before the outcome round");
  CHECK(!live_window(seen_win), "this rank's window is still registered in NCCL (not deregistered)");
  CHECK_INT(rounds[nrounds - 1].sent[0].v[NG_VOTE_REAL_WIN], 1, "this rank's outcome vote: a window here");
  CHECK(win == NULL, "*win %p, want NULL", (void*)win);
  CHECK_INT(res, arg ? ncclInvalidUsage : ncclSuccess, "ng_policy_register");
  CHECK(log_has("reason=peer_null_window", arg ? "decision=error" : "deregistered again", (char*)NULL),
        "no peer_null_window line in %s", logpath);
}

static void t_outcome_peer_failed(int arg) {
  peers = pr_outcome;
  outcome_failed = arg;
  win = NULL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  ncclResult_t res = register_one_req(&r);
  CHECK(seen_win != NULL, "NCCL gave this rank no window before the outcome round");
  /* an agreed failure: every rank drops its window; the round's own failure (arg -1, the race of the last
   * round): the window stays inside NCCL, as on the peers whose round completed, and none is handed out */
  if (arg >= 0) CHECK(!live_window(seen_win), "this rank's window is still registered in NCCL (not deregistered)");
  else CHECK(live_window(seen_win), "this rank's window was deregistered after a failed last round (its peers keep theirs)");
  CHECK_INT(rounds[nrounds - 1].sent[0].v[NG_VOTE_FAILED], 0, "this rank's outcome vote");
  if (arg == 1) { /* invalid argument somewhere: degrade like every rank */
    CHECK_INT(res, ncclSuccess, "ng_policy_register");
    decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_NCCL_ERROR, NG_R_OK);
    CHECK(win == NULL, "*win %p, want NULL", (void*)win);
    CHECK_INT(view().ndegraded, 1, "degraded windows");
    CHECK(log_has("decision=degrade reason=peer_nccl_error", (char*)NULL), "no peer_nccl_error degrade in %s", logpath);
  } else if (arg > 1) { /* any other NCCL error: the same error on every rank, not hidden by a degrade */
    ncclResult_t worst = (ncclResult_t)(arg - 2);
    CHECK_INT(res, worst, "ng_policy_register");
    decision_is(&r, NG_D_ERROR, worst, NG_R_NCCL_ERROR, NG_R_OK);
    CHECK_INT(view().ndegraded, 0, "degraded windows");
    CHECK(log_has("decision=error reason=peer_nccl_error", (char*)NULL), "no peer_nccl_error error in %s", logpath);
  } else { /* the outcome round itself timed out */
    CHECK_INT(res, ncclSystemError, "ng_policy_register");
    decision_is(&r, NG_D_ERROR, ncclSystemError, NG_R_TIMEOUT, NG_R_TIMEOUT);
    CHECK_INT(view().broken, NG_R_TIMEOUT, "the communicator is broken");
    CHECK(win == NULL, "*win %p, want NULL (an error hands out no window)", (void*)win);
  }
}

/* NCCL fails on this rank (preflight off, so the buffer reaches the fake NCCL): arg 0 a misaligned
 * offset (ncclInvalidArgument, 2.28), 1 a cudaMalloc buffer (ncclUnhandledCudaError) */
static void t_outcome_local_failure(int arg) {
  ng_cfg.preflight = 0;
  peers = pr_outcome;
  outcome_failed = 0; /* the peers succeeded */
  void* buf = vbuf;
  size_t off = 0;
  if (arg) CHECK_INT(cudaMalloc(&buf, 1u << 20), 0, "cudaMalloc");
  else off = 1024;
  win = NULL;
  struct ng_regreq r = req((char*)buf + off, 64u << 10, &win);
  ncclResult_t res = register_one_req(&r);
  /* every rank runs the outcome round, also on 2.28.9's symmetric path: this rank's failure is voted,
   * and its peers (whose NCCL succeeded) deregister and fall back with it */
  CHECK_STR(round_list(), "registration,registration outcome", "rounds");
  CHECK(rounds[nrounds - 1].sent[0].v[NG_VOTE_FAILED] != 0, "the outcome vote carries this rank's failure");
  if (!arg) {
    CHECK_INT(res, ncclSuccess, "ng_policy_register");
    decision_is(&r, NG_D_DEGRADE, ncclSuccess, NG_R_NCCL_ERROR, NG_R_NCCL_ERROR);
    CHECK(log_has("decision=degrade reason=nccl_error", (char*)NULL), "no nccl_error degrade in %s", logpath);
  } else {
    CHECK_INT(res, ncclUnhandledCudaError, "ng_policy_register");
    decision_is(&r, NG_D_ERROR, ncclUnhandledCudaError, NG_R_NCCL_ERROR, NG_R_NCCL_ERROR);
    CHECK_INT(view().ndegraded, 0, "degraded windows");
  }
  CHECK(log_has("fn=ncclCommWindowRegister", "NCCL failed to register", (char*)NULL), "no 'NCCL failed' line");
}

static void t_register_has_devcomm(int arg) {
  (void)arg;
  ng_reg_comm_mark(comm, 0, 1, 0); /* a live device communicator */
  peers = pr_rank2_not_vmm;
  win = SENTINEL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  CHECK_INT(register_one_req(&r), ncclInvalidUsage, "ng_policy_register");
  decision_is(&r, NG_D_ERROR, ncclInvalidUsage, NG_R_NOT_VMM, NG_R_OK);
  CHECK(win == NULL, "an error left *win set: %p", (void*)win);
  CHECK(log_has("decision=error reason=peer_not_vmm", "device communicator", (char*)NULL),
        "no devcomm error line in %s", logpath);
}

static void t_register_on_failure_error(int arg) {
  (void)arg;
  ng_cfg.on_failure = NG_FAIL_ERROR;
  peers = pr_rank2_not_vmm;
  win = SENTINEL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  CHECK_INT(register_one_req(&r), ncclInvalidArgument, "ng_policy_register");
  decision_is(&r, NG_D_ERROR, ncclInvalidArgument, NG_R_NOT_VMM, NG_R_OK);
  CHECK(log_has("decision=error reason=peer_not_vmm bad_rank=2", "refused on every rank", (char*)NULL),
        "no error line in %s", logpath);
}

/* prepare: the ready-wait fails (arg: its result) or the communicator is broken (arg 0) */
static void t_prepare(int arg) {
  if (arg) ready_result = (ncclResult_t)arg;
  else ng_reg_comm_set_broken(comm, 0, NG_R_OUT_OF_STEP);
  win = SENTINEL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  ncclResult_t res = register_one_req(&r);
  int reason = !arg ? NG_R_COMM_BROKEN : arg == ncclSystemError ? NG_R_TIMEOUT : NG_R_NOT_READY;
  ncclResult_t want = arg ? (ncclResult_t)arg : ncclInvalidArgument;
  CHECK_INT(res, want, "ng_policy_register");
  decision_is(&r, NG_D_ERROR, want, reason, reason);
  CHECK_INT(nrounds, 0, "rounds after a failed prepare");
}

/* NCCL's registration outlived its deadline: the watchdog revoked the communicator */
static void t_watchdog_fired(int arg) {
  (void)arg;
  watchdog_fires = 1;
  win = NULL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  CHECK_INT(register_one_req(&r), ncclSystemError, "ng_policy_register");
  decision_is(&r, NG_D_ERROR, ncclSystemError, NG_R_TIMEOUT, NG_R_TIMEOUT);
  CHECK(!live_window(win), "the window NCCL gave is still live (leaked)");
  CHECK_STR(round_list(), "registration", "rounds (no outcome after a timed-out registration)");
}

/* a batch of two registrations on the communicator (a group's queue): two steps, one registration each, in
 * the order of the calls (a peer that registers them one at a time runs the same rounds); the peer's fact is
 * about the first one only */
static int nth_vote;
static ncclResult_t pr_first_of_two(const char* what, struct ng_vote* v, int n) {
  if (!is(what, "registration") || n != 1) return ncclSuccess;
  if (nth_vote++ == 0) p_rank2_not_vmm(&v[0]);
  else vmax(&v[0], NG_VOTE_SYM_YES, 1);
  return ncclSuccess;
}
static void t_batch(int arg) {
  (void)arg;
  peers = pr_first_of_two;
  nth_vote = 0;
  ncclWindow_t w[2] = {SENTINEL, NULL};
  struct ng_regreq r[2] = {req(vbuf, 1u << 20, &w[0]), req((char*)vbuf + (1u << 20), 1u << 20, &w[1])};
  CHECK_INT(ng_policy_register(r, 2), ncclSuccess, "ng_policy_register");
  decision_is(&r[0], NG_D_DEGRADE, ncclSuccess, NG_R_NOT_VMM, NG_R_OK);
  decision_is(&r[1], NG_D_REGISTER, ncclSuccess, NG_R_OK, NG_R_OK);
  CHECK(w[0] == NULL && w[1] != NULL, "windows %p %p, want NULL and a window", (void*)w[0], (void*)w[1]);
  CHECK_STR(round_list(), "registration,registration,registration outcome", "rounds (a step per registration)");
  CHECK_INT(rounds[0].n, 1, "votes in the first step's round");
  CHECK_INT(rounds[1].n, 1, "votes in the second step's round");
  CHECK_INT(rounds[2].n, 1, "votes in the outcome round (only what registered)");
  CHECK_INT(r[0].seq + 1, r[1].seq, "sequence numbers");
  CHECK(live_window(w[1]), "the second window is not live");
}

/* no warm-up at a registration (the warm-up runs when a communicator becomes ready, agree.c): arg 0 auto,
 * 1 always; either way the registration's rounds alone */
static void t_warmup(int arg) {
  if (arg) ng_cfg.warmup = NG_WARMUP_ALWAYS;
  win = NULL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  ncclResult_t res = register_one_req(&r);
  CHECK_STR(round_list(), "registration,registration outcome", "rounds (no warm-up round at a registration)");
  CHECK_INT(res, ncclSuccess, "ng_policy_register");
  CHECK(!log_has("fn=warmup", (char*)NULL), "a warm-up line at a registration");
}

/* A communicator's identity is its registry entry's generation: a new communicator at the address of a
 * destroyed one is another entry, and what a round, the watchdog or a stuck launch of the old one does
 * later (release its resources, mark it stuck or broken, count a call in flight) never reaches the new
 * one. The registry alone, with an address of our own (NCCL reusing the old one's memory). */
static void t_generation(int arg) {
  (void)arg;
  ncclComm_t x = (ncclComm_t)(uintptr_t)0x7e57000;
  CHECK_INT(ng_reg_comm_add(x, 0xa, 0, 0, 2, 0, 1, NG_COMM_READY), 0, "add");
  struct ng_agree_res old, got;
  uint64_t g_old = 0, g_new = 0;
  CHECK_INT(ng_reg_res_acquire(x, &old, &g_old), 0, "the old round takes the (empty) resources");
  old.s = (ng_stream)(uintptr_t)0x51, old.cap = 1; /* (never used as a stream: the pool only keeps it) */
  ng_reg_comm_tombstone(x, NG_COMM_ABORTED); /* aborted during its round */
  CHECK_INT(ng_reg_comm_add(x, 0xb, 0, 0, 2, 0, 1, NG_COMM_READY), 0, "a new communicator at the same address");
  struct ng_commview v;
  ng_reg_comm_get(x, &v);
  CHECK(v.gen != g_old && v.gen != 0, "the new entry has a generation of its own (%llu, old %llu)",
        (unsigned long long)v.gen, (unsigned long long)g_old);
  CHECK_INT(ng_reg_res_acquire(x, &got, &g_new), 0, "the new communicator's round takes its resources");
  /* the old round ends now: its resources go to the pool, the new round keeps its own */
  ng_reg_res_release(x, g_old, 0, &old);
  struct ng_agree_res third;
  uint64_t g3;
  CHECK_INT(ng_reg_res_acquire(x, &third, &g3), -1, "the new round's resources are still held by it");
  ng_reg_comm_stuck(x, g_old, +1);
  CHECK_INT(ng_reg_comm_set_broken(x, g_old, NG_R_TIMEOUT), 0, "the old generation's give-up");
  CHECK_INT(ng_reg_comm_enter(x, g_old), 0, "a call of the old generation in flight");
  CHECK_INT(ng_reg_comm_usable(x, g_old), 0, "the old generation is not usable");
  CHECK_INT(ng_reg_comm_usable(x, g_new), 1, "the new one is");
  ng_reg_comm_get(x, &v);
  CHECK(!v.stuck && !v.broken, "the new communicator was marked by the old one's round (stuck %d, broken %d)", v.stuck,
        v.broken);
  ng_reg_res_release(x, g_new, 0, &got);
  struct ng_agree_res pooled;
  CHECK_INT(ng_reg_pool_take(0, &pooled), 1, "the old round's resources are in the pool");
  CHECK(pooled.s == old.s, "the pool holds the old round's stream");
}

/* The pool of agreement resources keeps its slots for communicators whose resources can be handed out
 * again: those of communicators whose device was never learnt (-1) are freed, so that after more of them
 * than the pool holds, a communicator on device 0 still leaves its resources there for the next one. */
static void t_pool_unknown_device(int arg) {
  (void)arg;
  for (int i = 0; i < 300; i++) {
    ncclComm_t x = (ncclComm_t)(uintptr_t)(0x7e590000 + 0x100 * (uintptr_t)i);
    CHECK_INT(ng_reg_comm_add(x, 0x100 + (uint64_t)i, 0, 0, 2, -1, 1, NG_COMM_READY), 0, "add (device unknown)");
    struct ng_agree_res r;
    uint64_t g = 0;
    CHECK_INT(ng_reg_res_acquire(x, &r, &g), 0, "its (empty) resources");
    r.host = malloc(16), r.cap = 4; /* plain host memory: freed without a context */
    ng_reg_res_release(x, g, -1, &r);
    ng_reg_comm_tombstone(x, NG_COMM_DESTROYED);
  }
  ncclComm_t y = (ncclComm_t)(uintptr_t)0x7e5f0000;
  CHECK_INT(ng_reg_comm_add(y, 0x999, 0, 0, 2, 0, 1, NG_COMM_READY), 0, "add (device 0)");
  struct ng_agree_res r, pooled = {0};
  uint64_t g = 0;
  CHECK_INT(ng_reg_res_acquire(y, &r, &g), 0, "its (empty) resources");
  r.host = malloc(16), r.cap = 4;
  int32_t* host = r.host;
  ng_reg_res_release(y, g, 0, &r);
  ng_reg_comm_tombstone(y, NG_COMM_DESTROYED);
  int taken = ng_reg_pool_take(0, &pooled);
  CHECK_INT(taken, 1, "device 0's resources are in the pool after 300 of an unknown device");
  CHECK(pooled.host == host, "the pool holds device 0's staging memory");
  if (taken) free(pooled.host);
}

/* NCCL's own NULL window (2.29+ without symmetric support): arg 0 warn, 1 NCCLGUARD_NULL_WINDOW=error */
static void t_null_window(int arg) {
  if (arg) ng_cfg.null_window = NG_NULLWIN_ERROR;
  win = SENTINEL;
  struct ng_regreq r = req(vbuf, 1u << 20, &win);
  ncclResult_t res = register_one_req(&r);
  CHECK(win == NULL, "the fake without symmetric support gave a window: %p", (void*)win);
  /* NCCL's NULL window here is said in the outcome round, so that a peer with a real window drops it
   * (meta-pytorch/torchcomms#4036: one answer on every rank) */
  CHECK_STR(round_list(), "registration,registration outcome", "rounds");
  CHECK_INT(rounds[nrounds - 1].sent[0].v[NG_VOTE_NULL_WIN], 1, "this rank's outcome vote: NCCL's NULL window here");
  CHECK_INT(rounds[nrounds - 1].sent[0].v[NG_VOTE_REAL_WIN], 0, "this rank's outcome vote: no window here");
  if (arg) {
    CHECK_INT(res, ncclInvalidUsage, "ng_policy_register");
    decision_is(&r, NG_D_ERROR, ncclInvalidUsage, NG_R_NULL_WINDOW, NG_R_NULL_WINDOW);
  } else {
    CHECK_INT(res, ncclSuccess, "ng_policy_register");
    decision_is(&r, NG_D_REGISTER, ncclSuccess, NG_R_NULL_WINDOW, NG_R_NULL_WINDOW);
  }
  /* the count follows the windows handed out: an error hands out none */
  CHECK_INT(view().ndegraded, arg ? 0 : 1, "NULL windows of the communicator");
}

/* ---- main ------------------------------------------------------------------------------------ */
struct tcase {
  const char* name;
  void (*fn)(int);
  int arg;
  int version;         /* FAKE_NCCL_VERSION */
  const char* env;     /* one more NAME=VALUE for the fake, or NULL */
};
static const struct tcase cases[] = {
    {"vote-fill", t_vote_fill, 0, 22809, NULL},
    {"pool-unknown-device-freed", t_pool_unknown_device, 0, 22809, NULL},
    {"decide-peer-fact-degrades", t_decide_peer_fact_degrades, 0, 22809, NULL},
    {"decide-own-fact", t_decide_own_fact, 0, 22809, NULL},
    {"decide-lowest-reason", t_decide_lowest_reason, 0, 22809, NULL},
    {"decide-unknown-never-degrades", t_decide_unknown_never_degrades, 0, 22809, NULL},
    {"decide-split-one-node-2.28.3", t_decide_split_one_node, 0, 22803, NULL},
    {"decide-layout-sizes-differ-degrades", t_decide_layout, 0, 22809, NULL},
    {"decide-layout-size-unknown-registers", t_decide_layout, 1, 22809, NULL},
    {"decide-null-win-error", t_decide_null_win_error, 0, 22809, NULL},
    {"decide-null-buff-2.27-degrades", t_decide_null_buff, 22703, 22703, NULL},
    {"decide-null-buff-2.28-degrades", t_decide_null_buff, 22809, 22809, NULL},
    {"decide-null-buff-2.29-invalid-argument", t_decide_null_buff, 22903, 22903, NULL},
    {"decide-null-buff-2.30-invalid-argument", t_decide_null_buff, 23007, 23007, NULL},
    {"decide-has-devcomm-error", t_decide_has_devcomm, 0, 22809, NULL},
    {"decide-on-failure-error", t_decide_on_failure_error, 0, 22809, NULL},
    {"register-normal-revoke", t_register_normal, 1, 22809, NULL},
    {"register-normal-go-round-without-revoke", t_register_normal, 0, 22809, NULL},
    {"register-normal-2.27-outcome-round", t_register_normal, 1, 22703, NULL},
    {"register-normal-2.30-outcome-round", t_register_normal, 1, 23007, NULL},
    {"registry-generation", t_generation, 0, 22809, NULL},
    {"register-normal-slow-nccl-outcome-round", t_register_normal, 2, 22809, NULL},
    {"register-peer-fact-degrades", t_register_peer_fact, 1, 22809, NULL},
    {"register-peer-fact-no-go-round", t_register_peer_fact, 0, 22809, NULL},
    {"register-peer-null-win-error", t_register_peer_null_win, 0, 22809, NULL},
    {"register-null-buff-2.28-degrades", t_register_null_buff, 22809, 22809, NULL},
    {"register-null-buff-2.29-invalid-argument", t_register_null_buff, 22903, 22903, NULL},
    {"vote-timeout", t_vote_fails, NG_AGREE_TIMEOUT, 22809, NULL},
    {"vote-out-of-step", t_vote_fails, NG_AGREE_STEP, 22809, NULL},
    {"vote-aborted", t_vote_fails, NG_AGREE_ABORTED, 22809, NULL},
    {"vote-failed", t_vote_fails, NG_AGREE_FAILED, 22809, NULL},
    {"go-round-timeout", t_go_round_fails, 0, 22809, NULL},
    {"outcome-peer-invalid-argument-degrades", t_outcome_peer_failed, 1, 22703, NULL},
    {"outcome-peer-cuda-error-errors", t_outcome_peer_failed, 2 + ncclUnhandledCudaError, 22703, NULL},
    {"outcome-peer-internal-error-errors", t_outcome_peer_failed, 2 + ncclInternalError, 22703, NULL},
    {"outcome-round-timeout", t_outcome_peer_failed, -1, 22703, NULL},
    {"outcome-null-window-on-a-peer-degrades", t_outcome_null_peer, 0, 22907, NULL},
    {"outcome-null-window-on-a-peer-error", t_outcome_null_peer, 1, 22907, NULL},
    {"outcome-local-invalid-argument", t_outcome_local_failure, 0, 22809, NULL},
    {"outcome-local-cuda-error", t_outcome_local_failure, 1, 22809, NULL},
    {"register-has-devcomm-error", t_register_has_devcomm, 0, 22809, NULL},
    {"register-on-failure-error", t_register_on_failure_error, 0, 22809, NULL},
    {"prepare-broken-comm", t_prepare, 0, 22809, NULL},
    {"prepare-ready-wait-timeout", t_prepare, ncclSystemError, 22809, NULL},
    {"prepare-not-ready", t_prepare, ncclInvalidUsage, 22809, NULL},
    {"register-watchdog-fired", t_watchdog_fired, 0, 22809, NULL},
    {"batch-of-two", t_batch, 0, 22809, NULL},
    {"warmup-auto", t_warmup, 0, 22809, NULL},
    {"warmup-always", t_warmup, 1, 22809, NULL},
    {"null-window-warn", t_null_window, 0, 22903, "FAKE_NCCL_NO_SYMMETRIC=1"},
    {"null-window-error", t_null_window, 1, 22903, "FAKE_NCCL_NO_SYMMETRIC=1"},
};

static int run_case(const struct tcase* c, const char* dir) {
  char name[128], path[4096];
  snprintf(name, sizeof name, "policy-unit-%s", c->name);
  snprintf(path, sizeof path, "%s/%s.log", dir, c->name);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    printf("FAIL %s: fork: %s\n", name, strerror(errno));
    return 1;
  }
  if (pid == 0) {
    char v[16];
    snprintf(v, sizeof v, "%d", c->version);
    setenv("FAKE_NCCL_VERSION", v, 1);
    if (c->env) putenv((char*)c->env);
    setenv("NCCLGUARD_LOG", "info", 1);
    setenv("NCCLGUARD_LOG_FILE", path, 1);
    unlink(path);
    logpath = path;
    ng_init();
    setup();
    if (!failed) c->fn(c->arg);
    if (failed) printf("FAIL %s: %s\n", name, fail_msg);
    else printf("ok %s\n", name);
    fflush(stdout);
    _exit(failed ? 1 : 0);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (WIFSIGNALED(st)) {
    printf("FAIL %s: killed by signal %d\n", name, WTERMSIG(st));
    return 1;
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) > 1) { /* a sanitizer's exit status: its report is on stderr */
    printf("FAIL %s: exit status %d\n", name, WEXITSTATUS(st));
    return 1;
  }
  return WEXITSTATUS(st) != 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR [CASE-SUBSTRING]\n", argv[0]);
    return 2;
  }
  int bad = 0, ran = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (argc > 2 && !strstr(cases[i].name, argv[2])) continue;
    bad += run_case(&cases[i], argv[1]);
    ran++;
  }
  if (!ran) {
    printf("FAIL policy-unit: no case matches %s\n", argc > 2 ? argv[2] : "");
    return 1;
  }
  return bad ? 1 : 0;
}
