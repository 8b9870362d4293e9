/* The registry: communicators, windows and buffer registrations, in uthash tables behind one
 * mutex. Callers get copies (struct ng_commview); the lock is never held across a call into
 * NCCL or CUDA. Destroyed communicators stay as tombstones (bounded) so that PyTorch's
 * deregistration after ncclCommDestroy (docs/PYTORCH.md §3) is recognised. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"

/* uthash without its exit(): an insert that cannot allocate leaves the table as it was and sets
 * hash_oom (read under the lock), and the caller handles it like any other allocation failure. Its
 * memory comes through a failpoint. */
static int hash_oom;
#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) ng_calloc("registry.hash", 1, (sz))
#define uthash_nonfatal_oom(obj) (hash_oom = 1)
#include <uthash.h>

struct comm_ent {
  ncclComm_t comm;
  struct ng_commview v;
  int next[NG_NNEXT];
  struct ng_agree_res agree;
  int agree_in_use;  /* an agreement round of some thread holds `agree` (ng_reg_res_acquire) */
  int evict_pending; /* a tombstone evicted while in use: freed at release */
  int inflight;      /* calls ncclguard makes on it from threads of its own (the watchdog's revoke) */
  ncclComm_t chan;   /* its agreement channel (channel.c), NULL: none yet */
  int chan_lib;      /* the libnccl that made it (ng_tls.lib) */
  int chan_made;     /* a channel was made for it (stays set when the channel is taken: ng_reg_chan_take) */
  UT_hash_handle hh;
};
/* Each entry's generation (v.gen): a new communicator at the address of a destroyed one is another
 * entry, and a round, the watchdog or a first launch that outlived the old one acts on nothing. */
static uint64_t gen_next;
/* the entry for comm, if it is generation gen (0: whichever is there) */
static struct comm_ent* find_gen(ncclComm_t comm, uint64_t gen);

struct win_ent {
  ncclWindow_t win;
  ncclComm_t comm;
  void* buff;
  size_t size;
  int flags;
  int seq;
  int refs; /* registrations it serves: 1, plus the exact repeats ncclguard served from it */
  UT_hash_handle hh;
};

struct buf_ent {
  void* handle;
  ncclComm_t comm;
  void* buff;
  size_t size;
  UT_hash_handle hh;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct comm_ent* comms;
static struct win_ent* wins;
static struct buf_ent* bufs;

/* Tombstones: a ring of the most recent destroyed communicators; older ones are forgotten. */
#define NG_TOMBSTONES 4096
static ncclComm_t tomb_ring[NG_TOMBSTONES];
static unsigned tomb_next;

/* Agreement resources of destroyed communicators, reused by the next ones (agree.c). */
#define NG_POOL 256
struct pool_ent { int dev; struct ng_agree_res res; };
static struct pool_ent pool[NG_POOL];
static int npool;

/* Resources that did not fit into the pool: freed outside the lock (ng_reg_pool_drain), never dropped
 * (300 communicators alive at once, created and destroyed in cycles, grew the process by the
 * resources of every communicator past the pool's 256 per cycle: issue 19, measured on 1 x H200). */
static struct pool_ent* spill;
static int nspill, capspill;

/* With the lock held: into the pool, else onto the spill list (freed by the next drain). Resources of a
 * communicator whose device was never learnt (-1) are never handed out (ng_reg_pool_take): kept in the pool
 * they would hold its slots for good, so plain host memory is freed (res_free), and what lives in a CUDA
 * context ncclguard does not know (a stream, device memory, pinned staging) is kept apart (held). */
static struct ng_agree_res* held; /* of a device never learnt, with CUDA resources: kept, never handed out */
static int nheld, capheld;
static void pool_add_locked(int dev, const struct ng_agree_res* res) {
  if (!res->s && !res->buf && !res->host) return;
  if (npool < NG_POOL && dev >= 0) {
    pool[npool++] = (struct pool_ent){dev, *res};
    return;
  }
  if (dev < 0 && (res->s || res->buf || res->pinned)) {
    /* a stream, device memory or pinned staging of a context ncclguard does not know: not freed (res_free
     * could not), kept here, out of the pool's slots */
    if (nheld == capheld) {
      int cap = capheld ? 2 * capheld : 16;
      struct ng_agree_res* p = ng_realloc("registry.held", held, (size_t)cap * sizeof *p);
      if (!p) return; /* out of host memory: these few bytes are lost */
      held = p, capheld = cap;
    }
    held[nheld++] = *res;
    return;
  }
  if (nspill == capspill) {
    int cap = capspill ? 2 * capspill : 16;
    struct pool_ent* p = ng_realloc("registry.spill", spill, (size_t)cap * sizeof *p);
    if (!p) return; /* out of host memory: these few bytes are lost, not freed twice */
    spill = p, capspill = cap;
  }
  spill[nspill++] = (struct pool_ent){dev, *res};
}

/* Free one communicator's agreement resources: stream, device scratch, host staging. A stream with work
 * still queued (a round that timed out) is left as it is, with its buffers. */
static void res_free(int dev, const struct ng_agree_res* r) {
  if (dev < 0 || !ng_cuda_ok()) { /* no context to free them in: only plain host memory goes */
    if (!r->pinned) free(r->host);
    return;
  }
  ng_ctx saved;
  if (ng_cuda_push(dev, &saved)) return;
  if (r->s && ng_cuda_stream_done(r->s) != 1) {
    /* a round that timed out may still use them (its all-reduce waits for a peer that left) */
    ng_cuda_pop(saved);
    ng_log_msg(NG_LOG_INFO, dev, "agree", "agreement resources with work still queued are left allocated");
    return;
  }
  if (r->s) (void)ng_cuda_stream_destroy(r->s);
  if (r->buf) (void)ng_cuda_free(r->buf);
  if (r->pinned) (void)ng_cuda_host_free(r->host);
  else free(r->host);
  ng_cuda_pop(saved);
}

void ng_reg_pool_drain(void) {
  for (;;) {
    pthread_mutex_lock(&lock);
    if (!nspill) {
      pthread_mutex_unlock(&lock);
      return;
    }
    struct pool_ent e = spill[--nspill];
    pthread_mutex_unlock(&lock);
    res_free(e.dev, &e.res); /* a CUDA call: never under the registry lock */
  }
}

int ng_reg_pool_take(int dev, struct ng_agree_res* res) {
  int found = 0;
  pthread_mutex_lock(&lock);
  for (int i = npool - 1; i >= 0 && !found; i--) {
    if (pool[i].dev != dev || dev < 0) continue;
    *res = pool[i].res;
    pool[i] = pool[--npool];
    found = 1;
  }
  pthread_mutex_unlock(&lock);
  return found;
}

void ng_reg_pool_put(int dev, const struct ng_agree_res* res) {
  pthread_mutex_lock(&lock);
  pool_add_locked(dev, res);
  pthread_mutex_unlock(&lock);
}

uint64_t ng_fnv(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

const char* ng_state_name(int s) {
  static const char* n[] = {"initializing", "ready", "finalized", "destroyed", "revoked", "aborted"};
  return (unsigned)s < sizeof n / sizeof n[0] ? n[s] : "unknown";
}

static void free_ent(struct comm_ent* e) { free(e); }

static struct comm_ent* find(ncclComm_t comm) {
  struct comm_ent* e = NULL;
  HASH_FIND_PTR(comms, &comm, e);
  return e;
}
static struct comm_ent* find_gen(ncclComm_t comm, uint64_t gen) {
  struct comm_ent* e = find(comm);
  return e && (!gen || e->v.gen == gen) ? e : NULL;
}

int ng_reg_comm_add(ncclComm_t comm, uint64_t cid, uint64_t parent_cid, int rank, int nranks, int dev,
                    int blocking, int state) {
  struct comm_ent* fresh = ng_calloc("registry.comm", 1, sizeof *fresh);
  pthread_mutex_lock(&lock);
  struct comm_ent* old = find(comm);
  if (old) { /* a tombstone, or NCCL reused the address (an entry replaced without a tombstone: a destroy
                that failed, or one made through another copy of libnccl); dropped also when the new entry could
                not be allocated: a tombstone left at the address would make the new communicator look destroyed
                on this rank alone, refused without the round its peers run */
    HASH_DEL(comms, old);
    /* its agreement resources are released: to the pool now, or by the round that holds them, which
       finds its generation gone at its release */
    if (!old->agree_in_use) pool_add_locked(old->v.dev, &old->agree);
    free_ent(old);
  }
  if (!fresh) {
    pthread_mutex_unlock(&lock);
    ng_reg_pool_drain();
    return -1;
  }
  fresh->comm = comm;
  fresh->v = (struct ng_commview){.known = 1, .comm = comm, .cid = cid, .parent_cid = parent_cid, .rank = rank,
                                  .nranks = nranks, .dev = dev, .blocking = blocking, .state = state,
                                  .gen = ++gen_next};
  hash_oom = 0;
  HASH_ADD_PTR(comms, comm, fresh);
  int oom = hash_oom;
  pthread_mutex_unlock(&lock);
  if (oom) free_ent(fresh);
  ng_reg_pool_drain();
  return oom ? -1 : 0;
}

ncclComm_t ng_reg_chan(ncclComm_t comm, uint64_t gen) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  ncclComm_t c = e ? e->chan : NULL;
  pthread_mutex_unlock(&lock);
  return c;
}

int ng_reg_chan_set(ncclComm_t comm, uint64_t gen, ncclComm_t chan) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  int ok = e && !e->chan && !e->v.aborting && !ng_comm_gone(&e->v);
  if (ok) e->chan = chan, e->chan_lib = ng_cur_lib(), e->chan_made = 1;
  pthread_mutex_unlock(&lock);
  return ok ? 0 : -1;
}

int ng_reg_chan_made(ncclComm_t comm, uint64_t gen) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  int m = e && e->chan_made;
  pthread_mutex_unlock(&lock);
  return m;
}

ncclComm_t ng_reg_chan_take(ncclComm_t comm, uint64_t gen, int* lib) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  ncclComm_t c = e ? e->chan : NULL;
  if (e) e->chan = NULL, *lib = e->chan_lib;
  pthread_mutex_unlock(&lock);
  return c;
}


int ng_reg_comm_get(ncclComm_t comm, struct ng_commview* v) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  if (e) *v = e->v;
  else memset(v, 0, sizeof *v), v->comm = comm, v->dev = -1, v->rank = -1;
  pthread_mutex_unlock(&lock);
  return e != NULL;
}

void ng_reg_comm_set_state(ncclComm_t comm, int state) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  /* a tombstone's state never goes back: NCCL must not see a destroyed communicator again */
  if (e && !ng_comm_gone(&e->v)) e->v.state = state;
  pthread_mutex_unlock(&lock);
}

void ng_reg_comm_set_info(ncclComm_t comm, int rank, int nranks, int dev) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  if (e) {
    if (rank >= 0) e->v.rank = rank;
    if (nranks > 0) e->v.nranks = nranks;
    if (dev >= 0) e->v.dev = dev;
  }
  pthread_mutex_unlock(&lock);
}

int ng_reg_comm_next(ncclComm_t comm, int which) {
  int n = 0;
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  if (e) n = e->next[which]++;
  pthread_mutex_unlock(&lock);
  return n;
}

static void add_clamped(int* v, int d) { *v = *v + d < 0 ? 0 : *v + d; }

void ng_reg_comm_mark(ncclComm_t comm, int warmed, int devcomm_delta, int degraded_delta) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  if (e) {
    if (warmed) e->v.warmed = 1;
    add_clamped(&e->v.has_devcomm, devcomm_delta);
    add_clamped(&e->v.ndegraded, degraded_delta);
  }
  pthread_mutex_unlock(&lock);
}

int ng_reg_comm_set_broken(ncclComm_t comm, uint64_t gen, int reason) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  int first = e && !e->v.broken;
  if (first) e->v.broken = reason;
  pthread_mutex_unlock(&lock);
  return first;
}

void ng_reg_comm_guard_revoked(ncclComm_t comm, uint64_t gen) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  if (e) e->v.guard_revoked = 1;
  pthread_mutex_unlock(&lock);
}

void ng_reg_comm_set_aborting(ncclComm_t comm, int on) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  if (e) e->v.aborting = on;
  pthread_mutex_unlock(&lock);
}

void ng_reg_comm_set_suspended(ncclComm_t comm, int on) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  if (e) e->v.suspended = on;
  pthread_mutex_unlock(&lock);
}

void ng_reg_comm_set_cid(ncclComm_t comm, uint64_t cid) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  if (e) e->v.cid = cid;
  pthread_mutex_unlock(&lock);
}

void ng_reg_comm_stuck(ncclComm_t comm, uint64_t gen, int delta) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  if (e) e->v.stuck += delta;
  pthread_mutex_unlock(&lock);
}

/* ncclguard may still call NCCL on it: not being aborted or destroyed, not a tombstone */
static int alive(const struct comm_ent* e) { return !e->v.aborting && !ng_comm_gone(&e->v); }

int ng_reg_comm_enter(ncclComm_t comm, uint64_t gen) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  int ok = e && alive(e);
  if (ok) e->inflight++;
  pthread_mutex_unlock(&lock);
  return ok;
}

void ng_reg_comm_leave(ncclComm_t comm, uint64_t gen) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  if (e && e->inflight > 0) e->inflight--;
  pthread_mutex_unlock(&lock);
}

int ng_reg_comm_inflight(ncclComm_t comm) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  int n = e ? e->inflight : 0;
  pthread_mutex_unlock(&lock);
  return n;
}

int ng_reg_comm_usable(ncclComm_t comm, uint64_t gen) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  int ok = gen ? e && e->v.gen == gen && alive(e) : !e || alive(e);
  pthread_mutex_unlock(&lock);
  return ok;
}

int ng_reg_res_acquire(ncclComm_t comm, struct ng_agree_res* res, uint64_t* gen) {
  int r = 0;
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  memset(res, 0, sizeof *res);
  if (!e || e->agree_in_use) r = -1;
  else {
    e->agree_in_use = 1;
    *gen = e->v.gen;
    *res = e->agree;
    r = e->agree.s ? 1 : 0;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static void free_ent(struct comm_ent* e);
void ng_reg_res_release(ncclComm_t comm, uint64_t gen, int dev, const struct ng_agree_res* res) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find_gen(comm, gen);
  if (!e) pool_add_locked(dev, res); /* its communicator went (and another may live at its address) */
  else if (e->agree_in_use) {
    e->agree_in_use = 0;
    int gone = ng_comm_gone(&e->v);
    if (!gone) e->agree = *res;
    else pool_add_locked(e->v.dev, res); /* the pool hands out idle resources only (a device never
                                            learnt, -1: freed) */
    if (gone) memset(&e->agree, 0, sizeof e->agree);
    if (e->evict_pending) {
      HASH_DEL(comms, e);
      free_ent(e);
    }
  }
  pthread_mutex_unlock(&lock);
  ng_reg_pool_drain();
}

void ng_reg_comm_tombstone(ncclComm_t comm, int state) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  if (e) {
    /* The stream and scratch of the agreement lived in NCCL's context: the application's
     * context outlives the communicator, so they are simply left (a few bytes per comm). */
    e->v.state = state;
    e->v.nwindows = 0;
    /* Its agreement stream and scratch go to the pool for the next communicator on the device
     * (one stream and a few KB per communicator were leaked before: a thread per stream too). */
    /* A round in flight keeps them: ng_reg_res_release hands them on when it ends. */
    if (!e->agree_in_use) {
      /* (a device never learnt, -1: freed instead) */
      pool_add_locked(e->v.dev, &e->agree);
      memset(&e->agree, 0, sizeof e->agree); /* owned by the pool (or its spill list) now */
    }
    ncclComm_t evict = tomb_ring[tomb_next % NG_TOMBSTONES];
    tomb_ring[tomb_next++ % NG_TOMBSTONES] = comm;
    struct comm_ent* old = evict && evict != comm ? find(evict) : NULL;
    if (old && ng_comm_gone(&old->v)) {
      if (old->agree_in_use) old->evict_pending = 1;
      else {
        HASH_DEL(comms, old);
        free_ent(old);
      }
    }
  }
  struct win_ent *w, *tmp;
  HASH_ITER(hh, wins, w, tmp) {
    if (w->comm == comm) {
      HASH_DEL(wins, w);
      free(w);
      ng_stat_add(NG_ST_WINDOWS_LIVE, -1);
    }
  }
  struct buf_ent *b, *btmp;
  HASH_ITER(hh, bufs, b, btmp) {
    if (b->comm == comm) {
      HASH_DEL(bufs, b);
      free(b);
    }
  }
  pthread_mutex_unlock(&lock);
  ng_reg_pool_drain();
}

int ng_reg_win_add(ncclWindow_t win, ncclComm_t comm, void* buff, size_t size, int flags, int seq) {
  struct win_ent* w = ng_calloc("registry.win", 1, sizeof *w);
  if (!w) return -1;
  *w = (struct win_ent){.win = win, .comm = comm, .buff = buff, .size = size, .flags = flags, .seq = seq, .refs = 1};
  pthread_mutex_lock(&lock);
  struct win_ent* old = NULL;
  HASH_FIND_PTR(wins, &win, old);
  if (old) { /* NCCL reused a window pointer ncclguard still held (its deregistration not seen) */
    struct comm_ent* oe = find(old->comm);
    if (oe && oe->v.nwindows > 0) oe->v.nwindows--;
    if (oe) oe->v.wbytes -= oe->v.wbytes < old->size ? oe->v.wbytes : old->size;
    ng_stat_window_bytes(-(long)old->size);
    HASH_DEL(wins, old);
    free(old);
    ng_stat_add(NG_ST_WINDOWS_LIVE, -1);
  }
  hash_oom = 0;
  HASH_ADD_PTR(wins, win, w);
  int oom = hash_oom;
  struct comm_ent* e = find(comm);
  if (!oom) {
    ng_stat_add(NG_ST_WINDOWS_LIVE, 1);
    ng_stat_window_bytes((long)size);
  }
  if (!oom && e) e->v.nwindows++, e->v.wbytes += size;
  pthread_mutex_unlock(&lock);
  if (oom) free(w);
  return oom ? -1 : 0;
}

int ng_reg_win_in_range(ncclComm_t comm, uintptr_t lo, size_t n) {
  pthread_mutex_lock(&lock);
  struct win_ent *w, *tmp;
  int hit = 0;
  HASH_ITER(hh, wins, w, tmp) {
    if (w->comm == comm && (uintptr_t)w->buff - lo < n) {
      hit = 1;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return hit;
}

int ng_reg_win_find(ncclComm_t comm, const void* buff, size_t size, int flags, ncclWindow_t* win) {
  pthread_mutex_lock(&lock);
  struct win_ent *w, *tmp, *hit = NULL;
  HASH_ITER(hh, wins, w, tmp) {
    if (w->comm == comm && w->buff == buff && w->size == size && w->flags == flags) {
      hit = w;
      break;
    }
  }
  if (hit) *win = hit->win;
  pthread_mutex_unlock(&lock);
  return hit != NULL;
}

int ng_reg_win_ref(ncclWindow_t win, int delta) {
  pthread_mutex_lock(&lock);
  struct win_ent* w = NULL;
  HASH_FIND_PTR(wins, &win, w);
  int n = 0;
  if (w && (delta > 0 || w->refs > 1)) n = w->refs += delta;
  pthread_mutex_unlock(&lock);
  return n;
}

int ng_reg_win_del(ncclWindow_t win, int* seq, void** buff, size_t* size) {
  pthread_mutex_lock(&lock);
  struct win_ent* w = NULL;
  HASH_FIND_PTR(wins, &win, w);
  if (w) {
    *seq = w->seq, *buff = w->buff, *size = w->size;
    struct comm_ent* e = find(w->comm);
    if (e && e->v.nwindows > 0) e->v.nwindows--;
    if (e) e->v.wbytes -= e->v.wbytes < w->size ? e->v.wbytes : w->size;
    if (e && (double)e->v.wbytes <= ng_cfg.window_budget) e->v.over_budget = 0; /* a later crossing WARNs again */
    ng_stat_window_bytes(-(long)w->size);
    HASH_DEL(wins, w);
    free(w);
    ng_stat_add(NG_ST_WINDOWS_LIVE, -1);
  }
  pthread_mutex_unlock(&lock);
  return w != NULL;
}

int ng_reg_buf_add(void* handle, ncclComm_t comm, void* buff, size_t size) {
  struct buf_ent* b = ng_calloc("registry.buf", 1, sizeof *b);
  if (!b) return -1;
  *b = (struct buf_ent){.handle = handle, .comm = comm, .buff = buff, .size = size};
  pthread_mutex_lock(&lock);
  struct buf_ent* old = NULL;
  HASH_FIND_PTR(bufs, &handle, old);
  if (old) {
    HASH_DEL(bufs, old);
    free(old);
  }
  hash_oom = 0;
  HASH_ADD_PTR(bufs, handle, b);
  int oom = hash_oom;
  pthread_mutex_unlock(&lock);
  if (oom) free(b);
  return oom ? -1 : 0;
}

int ng_reg_buf_del(void* handle) {
  pthread_mutex_lock(&lock);
  struct buf_ent* b = NULL;
  HASH_FIND_PTR(bufs, &handle, b);
  if (b) {
    HASH_DEL(bufs, b);
    free(b);
  }
  pthread_mutex_unlock(&lock);
  return b != NULL;
}

int ng_reg_handle_kind(const void* h) {
  if (!h) return 0;
  pthread_mutex_lock(&lock);
  struct win_ent* w = NULL;
  struct buf_ent* b = NULL;
  ncclWindow_t wk = (ncclWindow_t)(uintptr_t)h;
  void* bk = (void*)(uintptr_t)h;
  HASH_FIND_PTR(wins, &wk, w);
  if (!w) HASH_FIND_PTR(bufs, &bk, b);
  pthread_mutex_unlock(&lock);
  return w ? NG_HANDLE_WINDOW : b ? NG_HANDLE_BUFFER : 0;
}

int ng_reg_budget_crossed(ncclComm_t comm, double budget, int* n, size_t* bytes) {
  pthread_mutex_lock(&lock);
  struct comm_ent* e = find(comm);
  int crossed = 0;
  *n = 0, *bytes = 0;
  if (e) {
    *n = e->v.nwindows, *bytes = e->v.wbytes;
    int over = budget > 0 && (double)e->v.wbytes > budget;
    crossed = over && !e->v.over_budget;
    e->v.over_budget = over;
  }
  pthread_mutex_unlock(&lock);
  return crossed;
}

static void** orphans;
static size_t norphans, caporphans;
static void keep_pinned(void* p) {
  if (!p) return;
  if (norphans == caporphans) {
    size_t cap = caporphans ? 2 * caporphans : 16;
    void** n = ng_realloc("registry.orphans", orphans, cap * sizeof *n);
    if (!n) return;
    orphans = n, caporphans = cap;
  }
  orphans[norphans++] = p;
}

/* fork(): prepare takes the lock, the parent releases it, so that a child never inherits it held by a
 * thread that does not exist there, or a table half-updated. */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_parent(void) { pthread_mutex_unlock(&lock); }
/* In a forked child the parent's communicators cannot be used (NCCL does not support it): start empty. */
static void fork_child(void) {
  pthread_mutex_unlock(&lock);
  pthread_mutex_init(&lock, NULL);
  /* The parent's streams are not the child's, and no CUDA work runs here: the host staging of
   * the agreement rounds can go. */
  struct comm_ent *e, *etmp;
  /* Pinned staging belongs to the parent's CUDA context, which the child cannot use: kept (listed
   * here, so it stays reachable), never freed in the child. */
  HASH_ITER(hh, comms, e, etmp) {
    HASH_DEL(comms, e);
    if (e->agree.pinned) keep_pinned(e->agree.host);
    else free(e->agree.host);
    free(e);
  }
  for (int i = 0; i < npool; i++) {
    if (pool[i].res.pinned) keep_pinned(pool[i].res.host);
    else free(pool[i].res.host);
  }
  for (int i = 0; i < nspill; i++) {
    if (spill[i].res.pinned) keep_pinned(spill[i].res.host);
    else free(spill[i].res.host);
  }
  nspill = 0;
  for (int i = 0; i < nheld; i++) {
    if (held[i].pinned) keep_pinned(held[i].host);
    else free(held[i].host);
  }
  nheld = 0;
  struct win_ent *w, *wtmp;
  HASH_ITER(hh, wins, w, wtmp) { HASH_DEL(wins, w); free(w); }
  struct buf_ent *b, *btmp;
  HASH_ITER(hh, bufs, b, btmp) { HASH_DEL(bufs, b); free(b); }
  memset(tomb_ring, 0, sizeof tomb_ring);
  tomb_next = 0;
  npool = 0; /* the parent's CUDA streams are not the child's */
}

NG_ON_FORK(NG_FORK_REGISTRY, fork_prepare, fork_parent, fork_child)
