/*
 * ucx_mr — a UCX multi-rail transport that survives the loss of a plane.
 *
 * One UCP context and worker per plane, each restricted to that plane's
 * device, so a failure on one plane fails only that plane's endpoints (a UCX
 * 1.13 endpoint bundles its lanes and fails as a whole). Endpoints are per
 * (peer, plane), created lazily in PEER error mode.
 *
 * A message is identified by a 64-bit key, split into stripes over the peer's
 * live planes by per-plane weights, and cut into segments. The receiver
 * places each segment by offset whatever plane it arrives on, drops
 * duplicates and acknowledges the whole message once; a send completes when
 * that acknowledgement arrives, so a segment lost on a dying plane is re-sent
 * on a surviving one before the send is reported done.
 *
 * Health: the UCX endpoint error callback, and a stall watchdog for silent
 * black holes (a plane that answers nothing while another plane to the same
 * peer answers is declared down). A downed (peer, plane) is probed in the
 * background with backoff and re-admitted when it answers.
 *
 * Threading. By default (thread_safe 0) a context is used by one thread at a
 * time, and takes no lock at all. With dr_mr_config_t.thread_safe set at
 * dr_mr_create, any number of threads may call every function below at once on
 * the same context, except dr_mr_create and dr_mr_destroy (no other call may
 * run during them):
 *   - each call holds the context's one mutex for its own duration only, so a
 *     call is short: progress polls the planes and returns, it never waits
 *     for a peer;
 *   - progress is shared: dr_mr_progress (and dr_mr_wait, which is a loop of
 *     test and progress, taking the lock anew each round) drives every plane
 *     for every thread; a request started by one thread is completed by
 *     whichever thread progresses next, and its owner sees it in dr_mr_test;
 *   - dr_mr_wait_event arms the planes under the lock and sleeps outside it;
 *     another thread's progress may take the events meanwhile (the sleep then
 *     ends at its timeout, at most 10 ms);
 *   - a request belongs to the thread that started it: only that thread tests,
 *     waits for, cancels or frees it;
 *   - dr_mr_last_error returns a copy private to the calling thread, of the
 *     context's last error (which another thread's request may have set);
 *   - the log callback runs with the lock held: it must not call into the
 *     context. UCX workers run in UCS_THREAD_MODE_SERIALIZED (the mutex
 *     serialises every UCX call), otherwise in UCS_THREAD_MODE_SINGLE.
 * Callers that wait for peers (coll/dualrail's algorithms) must not hold a
 * lock of their own across those waits: two processes running two
 * communicators' collectives in opposite orders would deadlock.
 * Nothing here knows about MPI.
 */
#ifndef DUALRAIL_UCX_MR_H
#define DUALRAIL_UCX_MR_H

#include <stddef.h>
#include <stdint.h>

#include "dualrail/planes.h"
#include "dualrail/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default) /* the API of libdualrail_ucx_mr.so (built hidden) */

typedef struct dr_mr dr_mr_t;
typedef struct dr_mr_req dr_mr_req_t;

/* Log levels passed to the log callback. */
enum { DR_LOG_WARN = 0, DR_LOG_INFO = 1, DR_LOG_DEBUG = 2 };

typedef void (*dr_mr_log_fn)(int level, const char *msg, void *arg);

typedef struct dr_mr_config {
    const char *planes;        /* plane list, see planes.h; required */
    const char *transports;    /* UCX_TLS for every plane context (default "^sm,self,cma") */
    uint64_t segment_size;     /* bytes per segment on the wire (default 256 KiB) */
    uint64_t min_stripe;       /* messages up to this size go whole to one plane (default 16 KiB) */
    uint32_t window;           /* segments in flight per (peer, plane) (default 8) */
    double stall_timeout;      /* s: a plane silent this long while another answers is down (0.5) */
    double probe_interval;     /* s: silence after which a busy plane is pinged (0.1) */
    double peer_timeout;       /* s: every plane silent this long: peer unreachable; 0 = never (30) */
    double readmit_min;        /* s: first re-admission probe after a failure (0.25) */
    double readmit_max;        /* s: backoff ceiling, for probes and for a flapping plane (1.5) */
    double flap_window;        /* s: failing again this soon after re-admission doubles the backoff (5) */
    int verbose;               /* 0: one warning per plane transition; 1: info; 2: debug */
    const char *name;          /* how log lines name this process (e.g. "rank 3"); default "mr" */
    dr_mr_log_fn log;          /* NULL: lines go to stderr */
    void *log_arg;
    uint64_t copy_max;         /* sends up to this size are copied and complete at once (16 KiB;
                                * lowered to min_stripe and segment_size if above them; 0: every
                                * send waits for its acknowledgement) */
    /* How messages are split over a peer's live planes (see dualrail/weights.h):
     * "adaptive" (default): per (peer, plane) in proportion to what each plane delivers,
     * a far slower plane keeping a trickle; "equal"; or fixed ratios, one per plane
     * ("2:1"). Anything else fails dr_mr_create with a reason naming the value. */
    const char *weights;
    /* Non-zero: several threads may use the context at once (see Threading above); every
     * call then takes the context's mutex. 0 (default): one thread at a time, no lock. */
    int thread_safe;
    /* Non-zero: the planes' UCP contexts are made with UCP_FEATURE_WAKEUP, and
     * dr_mr_wait_event sleeps until a plane has data. 0 (default): without it, and
     * dr_mr_wait_event naps (DR_MR_NAP_US at most) instead. With UCX 1.13 on TCP the feature
     * made every small exchange about 10 % slower (its interfaces' receive handlers are
     * wrapped, and their event descriptors registered with UCX's async thread): a waiter
     * that spins, as one rank per core does, pays that on every message, and a nap's
     * later wake-up only on the long waits that reach it. */
    int wakeup;
    /* Whole messages (up to 16 KiB: every one sent unstriped with the default min_stripe)
     * over a TCP connection of ucx_mr's own per (peer, plane), both ways, between the
     * planes' addresses, instead of UCP (README, ucx_mr,
     * The direct lane): 1 on every plane with an IPv4 address, 0 never, -1 (default) on
     * the planes whose device has no RDMA device behind it (where UCX itself would use
     * TCP). A peer without one on a plane gets UCP there. Appended: a program built
     * against the struct without it must be rebuilt. */
    int direct_lane;
} dr_mr_config_t;

/* Fill cfg with defaults (planes = NULL). */
void dr_mr_config_default(dr_mr_config_t *cfg);

/*
 * Create a context for process `self` (any id unique in the job, e.g. a rank).
 * On failure returns an error, *out stays NULL and err holds a one-line reason.
 */
dr_status_t dr_mr_create(const dr_mr_config_t *cfg, uint32_t self, dr_mr_t **out, char *err,
                         size_t errlen);
/* Receives still running are cancelled first: their buffers are not written again. */
void dr_mr_destroy(dr_mr_t *mr);

int dr_mr_num_planes(const dr_mr_t *mr);
/* The device this process uses on the plane ("ethA"). */
const char *dr_mr_plane_device(const dr_mr_t *mr, int plane);

/*
 * This process's address: every plane's packed worker address in one blob,
 * for out-of-band exchange. Valid until dr_mr_destroy.
 */
dr_status_t dr_mr_address(dr_mr_t *mr, const void **addr, size_t *len);

/*
 * Learn a peer's address blob. Endpoints are created on first use.
 * DR_ERR_PEER_MISMATCH when the peer's plane count differs (err says both).
 */
dr_status_t dr_mr_add_peer(dr_mr_t *mr, uint32_t peer, const void *addr, size_t len, char *err,
                           size_t errlen);

/*
 * Start sending len bytes to peer under key. buf must stay untouched until
 * the request completes. Keys must be unique among the messages between two
 * processes that are not yet complete at the receiver.
 *
 * A send of at most copy_max bytes (one segment on one plane) is copied and
 * the request is complete on return: ucx_mr keeps the copy until the peer
 * acknowledges it, and re-sends it on a live plane if its plane fails
 * meanwhile, exactly as for a longer send. Such a copy is lost only if every
 * plane to the peer fails first; the peer's receive then fails too (it cannot
 * complete), and dr_mr_last_error() names the peer. Longer sends complete when
 * the peer acknowledges them.
 */
dr_status_t dr_mr_isend(dr_mr_t *mr, uint32_t peer, uint64_t key, const void *buf, size_t len,
                        dr_mr_req_t **req);

/* Start receiving the message with key from peer into buf (capacity bytes). A message
 * that arrived whole before the receive is held (and acknowledged) and completes it even
 * when no plane to the peer is up any more (a peer that left after sending it). */
dr_status_t dr_mr_irecv(dr_mr_t *mr, uint32_t peer, uint64_t key, void *buf, size_t capacity,
                        dr_mr_req_t **req);

/*
 * A receive without a request: when the oldest message held under key from peer arrived
 * whole and fits capacity, copy it into buf, set *len and return DR_OK; it is then received
 * exactly as by dr_mr_irecv (acknowledged, a copy of it arriving later dropped). Otherwise
 * DR_INPROGRESS and nothing changes: nothing held, a message in pieces or too large (a
 * receive posted for it reports that). A waiter that calls it between dr_mr_progress calls
 * receives a small message in a fraction of a posted receive's work; for messages of up to
 * DR_MR_TAKE_MAX bytes (every message ucx_mr sends whole), which are held without an
 * allocation in steady state. DR_ERR_INVALID on bad arguments.
 */
#define DR_MR_TAKE_MAX 1952
dr_status_t dr_mr_take(dr_mr_t *mr, uint32_t peer, uint64_t key, void *buf, size_t capacity,
                       size_t *len);

/*
 * The longest message that a peer with this context's settings sends whole, so that
 * dr_mr_take can receive it: DR_MR_TAKE_MAX, or less where min_stripe or segment_size is
 * smaller (a longer message arrives in pieces, which only a posted receive takes). A caller
 * that waits for a message with dr_mr_take alone should post a receive for anything
 * longer. 0 for a NULL context.
 */
size_t dr_mr_take_max(const dr_mr_t *mr);

/*
 * dr_mr_take for a caller that waits for the message (calls this between dr_mr_progress
 * calls until it returns DR_OK): when nothing is held under key yet, the peer's next whole
 * message under key that fits capacity is copied straight into buf by the dr_mr_progress
 * call that receives it, instead of being held and then copied out again, and a later call
 * with the same key returns it (DR_OK, *len), received exactly as by dr_mr_take. One such
 * wait per peer at a time (a second waiter on the same peer gets dr_mr_take's behaviour).
 * From the first DR_INPROGRESS until a call returns DR_OK, ucx_mr may write buf: a caller
 * that stops waiting before that calls dr_mr_take_cancel, and only then reuses buf.
 * DR_ERR_INVALID on bad arguments (nothing waits then).
 */
dr_status_t dr_mr_take_wait(dr_mr_t *mr, uint32_t peer, uint64_t key, void *buf, size_t capacity,
                            size_t *len);

/*
 * Ends dr_mr_take_wait's wait for key from peer into buf: DR_OK with *len when the message
 * came into buf meanwhile (it is received: use it), DR_INPROGRESS when it did not (buf is
 * the caller's again; the message is held when it comes, for dr_mr_take or a posted
 * receive). DR_INPROGRESS too when no wait for key into buf is set (another caller's wait
 * is left alone). DR_ERR_INVALID on bad arguments.
 */
dr_status_t dr_mr_take_cancel(dr_mr_t *mr, uint32_t peer, uint64_t key, const void *buf,
                              size_t *len);

/* Drive every plane; returns non-zero when anything happened. Never blocks. */
int dr_mr_progress(dr_mr_t *mr);

/*
 * Sleep until a plane has something to progress, or timeout seconds pass
 * (capped at 10 ms so that health checks keep running). Returns at once when
 * events are already pending. For waiting loops that would otherwise spin:
 * several processes share a core in the lab, and the kernel's network stack
 * needs the CPU too. Call dr_mr_progress() afterwards. Without
 * dr_mr_config_t.wakeup: a nap of timeout, at most DR_MR_NAP_US microseconds.
 */
#define DR_MR_NAP_US 50
void dr_mr_wait_event(dr_mr_t *mr, double timeout);

/*
 * DR_INPROGRESS while running; otherwise the final status. *len (may be NULL)
 * gets the bytes received (receives) or sent (sends).
 */
dr_status_t dr_mr_test(dr_mr_t *mr, dr_mr_req_t *req, size_t *len);

/*
 * Progress until req completes or timeout seconds pass (timeout < 0: no
 * limit — the transfer itself cannot hang: a peer with no plane left fails it).
 * DR_ERR_TIMEOUT leaves the request running.
 */
dr_status_t dr_mr_wait(dr_mr_t *mr, dr_mr_req_t *req, double timeout, size_t *len);

/*
 * Cancel a running receive: it completes with DR_ERR_CANCELED and its buffer
 * is never written again. Running sends cannot be cancelled (UCX may still read
 * their buffer): DR_ERR_INVALID. A completed request (a copied send is one) is
 * left as it is (DR_OK).
 */
dr_status_t dr_mr_cancel(dr_mr_t *mr, dr_mr_req_t *req);

/* Release a completed request. */
void dr_mr_req_free(dr_mr_t *mr, dr_mr_req_t *req);

/*
 * dr_mr_test, and once the request is no longer running dr_mr_req_free in the same
 * call: DR_INPROGRESS leaves it as it is; any other status is its final one and req is
 * gone. What a waiter that is done with a request calls (one lock, one lookup).
 */
dr_status_t dr_mr_test_free(dr_mr_t *mr, dr_mr_req_t *req, size_t *len);

/*
 * Drop the messages held because no receive was posted for them (yet) whose key stale(key,
 * arg) calls stale (non-zero); returns how many segments went. For a caller that knows
 * which of its keys can never be received again: a collective that failed leaves its peers'
 * data and abort notices behind, and a later receive under the same key (a sequence
 * number that wrapped, a communicator id used again) would take them instead of its own
 * message. stale runs under the context's lock and must not call into it.
 */
size_t dr_mr_drop_unexpected(dr_mr_t *mr, int (*stale)(uint64_t key, void *arg), void *arg);

/* Why the last failed request failed: names the peer and every plane's state. */
const char *dr_mr_last_error(const dr_mr_t *mr);

/*
 * Fixed per-plane weights toward one peer (all planes; 0 keeps a plane idle): that
 * peer's split follows these ratios over its live planes from now on, whatever the
 * weights mode.
 */
dr_status_t dr_mr_set_weights(dr_mr_t *mr, uint32_t peer, const uint32_t *weights, int n);

/*
 * The current split toward a peer: *share (may be NULL) gets the fraction of each
 * message that plane carries (0..1, 0 when the link is down; the live planes' shares
 * sum to 1), *rate (may be NULL) the delivered rate the estimator learned in bytes/s
 * (0 until measured; adaptive mode only). DR_ERR_INVALID for an unknown peer or plane.
 */
dr_status_t dr_mr_link_weight(const dr_mr_t *mr, uint32_t peer, int plane, double *share,
                              double *rate);

typedef enum dr_link_state {
    DR_LINK_UP = 0,     /* in service */
    DR_LINK_DOWN = 1,   /* failed; probed in the background */
    DR_LINK_UNUSED = 2  /* never used yet (no endpoint) */
} dr_link_state_t;

dr_link_state_t dr_mr_link_state(const dr_mr_t *mr, uint32_t peer, int plane);

/* Counters of one plane, summed over peers. */
typedef struct dr_mr_plane_counters {
    uint64_t tx_bytes;          /* payload bytes handed to UCX on this plane */
    uint64_t rx_bytes;          /* payload bytes that arrived on this plane (duplicates included) */
    uint64_t tx_segments;
    uint64_t rx_segments;
    uint64_t errors;            /* (peer, plane) transitions to down */
    uint64_t reroutes;          /* segments moved off this plane after it failed */
    uint64_t readmissions;      /* (peer, plane) returns to service */
    uint64_t duplicates;        /* segments dropped as already received */
    uint64_t probes;            /* liveness pings and re-admission probes sent */
    uint64_t last_detect_us;    /* last failure: time from the last sign of life to down */
    uint64_t min_detect_us;     /* over all failures of this plane (0 when none) */
    uint64_t max_detect_us;
    uint64_t total_detect_us;   /* average = total_detect_us / errors */
    uint64_t tx_acks;           /* acknowledgement messages of their own (up to 15 acks each) */
    uint64_t piggybacked_acks;  /* acknowledgements carried by data segments (no message) */
    /* New endpoints that waited for UCX to read the end of a dead connection first (README,
     * ucx_mr, Re-admission), and of those the ones made anyway after 50 ms. Appended: a
     * program built against the struct without them must be rebuilt. */
    uint64_t endpoint_waits;
    uint64_t endpoint_waits_expired;
    /* The direct lane (dr_mr_config_t.direct_lane): whole messages sent and received on it,
     * and its connections that failed while their link was up (each took the link down,
     * as an endpoint error does). Appended as above. */
    uint64_t lane_tx;
    uint64_t lane_rx;
    uint64_t lane_failures;
} dr_mr_plane_stats_t;

dr_status_t dr_mr_plane_stats(const dr_mr_t *mr, int plane, dr_mr_plane_stats_t *out);

/*
 * The progress engine's work so far: dr_mr_progress calls, and the peers they looked at
 * (in the call itself, the acknowledgement flush, and the watchdog and weights it runs).
 * Only peers with a request listed, an acknowledgement owed, a plane down or fresh traffic
 * for the weights are looked at, so visits per call follow the peers in use, not the peers
 * registered (a job registers every rank of MPI_COMM_WORLD).
 */
typedef struct dr_mr_work_stats {
    uint64_t progress_calls;
    uint64_t peer_visits;
    /* copied sends kept in their peer's ring, without a request (the common small send);
     * the others took the general path (link busy, endpoint not made, ring slot held) */
    uint64_t flat_sends;
    /* messages received by dr_mr_take or dr_mr_take_wait, without a request */
    uint64_t takes;
    /* blocks of 2 KiB made for whole messages of 257..DR_MR_TAKE_MAX bytes (flat sends'
     * copies, early messages held): reused, so this follows how many were ever in use at
     * once, not the messages */
    uint64_t blocks;
    /* of the takes, the ones dr_mr_take_wait had copied into the waiter's buffer on arrival
     * (not held first) */
    uint64_t landed;
    /* acknowledgements of striped messages that carried delivery spans for the weights; of
     * those, the ones whose spans the receiver read vaguely (it was away between progress
     * calls: dr_weights_span_vague); and of those, the ones left out of the weights' samples
     * (every plane that carried the message timed, the peer's links all up, none back within
     * 5 s, no learned rate moved within 2 s) */
    uint64_t span_acks;
    uint64_t vague_acks;
    uint64_t vague_skipped;
} dr_mr_work_stats_t;

void dr_mr_work(const dr_mr_t *mr, dr_mr_work_stats_t *out);

/* Copied sends (see dr_mr_isend) whose peers have not acknowledged them yet. */
size_t dr_mr_unacked_copies(const dr_mr_t *mr);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
