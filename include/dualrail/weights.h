/*
 * Striping weights: how much of each message each plane to a peer carries,
 * learned from what each plane delivers. Pure functions over plain structs
 * (no allocation, no lock, no clock of their own: the caller passes the
 * time), so that the estimator is unit-tested with synthetic time and bytes.
 *
 * What is measured. The receiver of a message notes each plane's first and
 * last arrival and returns, in its acknowledgement, per plane the span from
 * its first segment to its last and its finish (from the message's first
 * arrival on any plane). Every stripe is queued at once and a plane delivers
 * it in order, so after the first segment the rest arrive back to back, paced
 * by the plane: bytes after the first / span is what the plane delivers (send
 * completions would not do: the sockets absorb a stripe at once, and between
 * the ring's messages they drain). Per link:
 *
 *   sample   the median of the messages' rates over at least 60 ms of spans (and
 *            4 messages), 16 messages or 250 ms (a receiver that was descheduled reads some
 *            arrivals as closer than they were: the median ignores those),
 *            folded into an EWMA, a slowdown faster than a speed-up
 *   balance  a plane whose stripes are too short to time (their span is a few
 *            milliseconds, the order of the receiver's progress jitter) is
 *            steered by finishes against the timed plane beside it (its
 *            reference): over 8 messages, the median of their split (bytes over
 *            the reference's) and of how much earlier than the reference it
 *            finished (in the reference's stripe times); one step of 5 % from
 *            that split towards finishing together, applied at once (the size
 *            of a finish difference is mostly the queue of the plane that is
 *            behind, so the step is nearly one by its sign); two samples more
 *            than 2 stripe times early: growing steps (25 %, 56 %, 95 %, 2x); a
 *            plane lagging by more than a whole stripe time holds the queue and,
 *            delivering under 0.6 of its split's rate, is taken at what it
 *            delivered per second (at most halved); one at its cautious start
 *            finishing early by half a stripe time grows x1.5. Its rate is a
 *            ratio to the reference's, so a misread reference does not move it
 *   growth   with no timed plane beside it: a plane finishing in half the
 *            others' time has spare capacity: raised 15 % per step
 *   lag      such a plane finishing well after the others is over-weighted:
 *            lowered by its lag per step
 *   share    rate / sum of the live planes' rates, so that every plane finishes
 *            its stripe at the same time: a far slower plane keeps a trickle (its
 *            own small proportion, so it stays measured, never holds the message
 *            up, and can come back), never less than the best rate /
 *            DR_WEIGHTS_TRICKLE; a new share is applied only when it moves by more
 *            than a dead band (no chasing of noise)
 *   re-admission  a plane back from a failure restarts at DR_WEIGHTS_READMIT below
 *            the best one and earns its share through growth and samples
 */
#ifndef DUALRAIL_WEIGHTS_H
#define DUALRAIL_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "dualrail/planes.h"
#include "dualrail/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default) /* the API of libdualrail_ucx_mr.so (built hidden) */

/* No live plane's weight falls below 1/DR_WEIGHTS_TRICKLE of the best one's: it keeps
 * carrying a few hundred bytes of each MiB (measured, and kept alive for the watchdog).
 * Small, because a floor above a plane's real proportion makes every message wait for it:
 * at 1/256 a plane delivering 1/256 of the best costs nothing, one delivering 1/512 at
 * most half of the best plane's rate. */
#define DR_WEIGHTS_TRICKLE 256
/* A re-admitted plane restarts at 1/DR_WEIGHTS_READMIT of the best plane's rate: cautious
 * (a plane that just came back may fail again), yet few growth steps from an equal share. */
#define DR_WEIGHTS_READMIT 16
/* Integer weights handed to dr_stripe_split: shares scaled to this sum. */
#define DR_WEIGHTS_SCALE 65536u

typedef enum dr_weights_mode {
    DR_WEIGHTS_ADAPTIVE = 0, /* learned per (peer, plane) */
    DR_WEIGHTS_EQUAL = 1,    /* every live plane the same */
    DR_WEIGHTS_FIXED = 2     /* the ratios given, for every peer */
} dr_weights_mode_t;

/*
 * Parse a weights setting: "adaptive", "equal", or ratios "r0:r1[:...]" (one
 * positive integer per plane, at most 1000000 each, e.g. "2:1"). nplanes is
 * the context's plane count (ratios must name exactly that many). On success
 * fills *mode and, for ratios, ratios[0..nplanes-1]; otherwise err says why
 * (naming the value).
 */
dr_status_t dr_weights_parse(const char *text, int nplanes, dr_weights_mode_t *mode,
                             uint32_t *ratios, char *err, size_t errlen);

/* A delivery span is a sample only when the moments that bound it are known to within
 * 1/DR_WEIGHTS_SPAN_SLACK of it together (dr_weights_span_vague). */
#define DR_WEIGHTS_SPAN_SLACK 8

/*
 * Whether a delivery span of span_us is too vague to be a sample: the receiver stamps an
 * arrival when it progresses, so each end may be late by as long as it was away before
 * (first_late_us, last_late_us: the time since its progress call before the one that saw
 * the arrival). 1 when together they exceed span_us / DR_WEIGHTS_SPAN_SLACK, 0 otherwise
 * (and for span_us 0: nothing timed). Under the rings that reduce, a receiver reducing a
 * segment between progress calls reads a sixth of the spans vaguely, and they spread four
 * times more than the others; counted, they swung the shares of two equal planes enough to
 * cost the 16 MiB reduce-scatter a tenth of its bandwidth (Mr::weights_on_ack leaves them
 * out while the peer's links are settled).
 */
int dr_weights_span_vague(uint64_t first_late_us, uint64_t last_late_us, uint64_t span_us);

/* A link's learned rate moving by more than this fraction in one update is a change of the
 * plane, not noise (dr_weights_rate_moved). */
#define DR_WEIGHTS_MOVED 0.1

/*
 * Whether a link's learned rate moved from `before` to `after` (bytes/s) by more than
 * DR_WEIGHTS_MOVED of `before`: 1, or 0 (and 0 where nothing was learned before). A sample
 * moves a settled rate by 0.35 of its gap down or 0.25 up, so this is a sample 29-40 % off:
 * the median of several messages on an unchanged plane stays well inside that.
 */
int dr_weights_rate_moved(double before, double after);

/* One (peer, plane) link's estimator state. Zero-initialise, or dr_weights_link_init. */
typedef struct dr_wlink {
    double rate;           /* delivered bytes/s; 0: not measured yet */
    double share;          /* applied share of each message, 0..1 (0: down) */
    int up;                /* the link is in service */
    uint64_t acc_busy_us;  /* since the last sample: the time messages took (spans) */
    uint32_t acc_msgs;     /*   messages (their rates in msg_rate, the first 16) */
    uint64_t acc_age_us;   /*   update time since the first of them */
    uint64_t tick_bytes;   /* since the last update: bytes delivered */
    uint64_t tick_timed;   /*   of those, timed (a sample is on its way) */
    uint64_t tick_busy_us; /*   finishes (time from each message's start to its last byte) */
    double msg_rate[16];   /* this sample's per-message rates (timed bytes / span) */
    double bal_split[16];  /* dr_weights_message: per message, its bytes over the reference's, */
    double bal_err[16];    /*   and how much earlier than the reference it finished */
    uint32_t bal_msgs;     /*   messages noted since the last balance sample */
    uint64_t bal_age_us;   /*   update time since the first of them */
    uint64_t bal_bytes;    /*   their bytes after the first message's */
    uint64_t bal_first_us; /*   when the first and the last of them were acknowledged */
    uint64_t bal_last_us;
    double bal_ratio; /* balanced: rate = bal_ratio x the reference's (0: not balanced) */
    int bal_ref;      /*   the reference link */
    uint32_t bal_far; /*   balance samples in a row that found it far too early */
    uint32_t samples; /* samples taken since (re-)admission */
    uint32_t spare;   /* updates in a row with spare capacity (see growth) */
    uint32_t lag;     /* updates in a row it finished well after the others */
    uint32_t drift;   /* updates in a row its share was off by a little (see dead band) */
} dr_wlink_t;

void dr_weights_link_init(dr_wlink_t *l);

/*
 * The link delivered `timed` bytes of a message in span_us, as its receiver saw
 * them arrive back to back (span_us 0: none could be timed), and finished its
 * stripe of `bytes` finish_us after the message started (growth's spare-capacity
 * test compares the links' finishes).
 */
void dr_weights_link_delivered(dr_wlink_t *l, uint64_t bytes, uint64_t timed, uint64_t span_us,
                               uint64_t finish_us);

/*
 * One message's acknowledgement, arrived at now_us, for the n links of its peer (the message
 * was split over them): per link the bytes it carried (0: none, or not to be counted), of
 * those the timed bytes and their span (0: untimed), and its finish (from the message's
 * first arrival on any link). Notes each link's delivery (dr_weights_link_delivered) and,
 * for every other link that carried bytes untimed, its split and finish against the timed link
 * that carried the most bytes, its reference (none: nothing more; growth and lag steer untimed
 * links then).
 */
void dr_weights_message(dr_wlink_t *links, int n, const uint64_t *bytes, const uint64_t *timed,
                        const uint64_t *span_us, const uint64_t *finish_us, uint64_t now_us);

/* The link went down: it carries nothing and its measurements stop. */
void dr_weights_link_down(dr_wlink_t *l);

/*
 * The link came back (re-admission): it starts at the trickle below the best
 * of the other links' rates (others: the peer's links, this one included and
 * skipped), and earns its share back.
 */
void dr_weights_link_readmit(dr_wlink_t *l, const dr_wlink_t *others, int n);

/*
 * Update the n links of one peer, tick_us after the previous update: take
 * samples, grow unmeasured links with spare capacity, recompute shares. Returns 1 when the applied
 * shares changed (the caller re-derives integer weights), else 0.
 */
int dr_weights_update(dr_wlink_t *links, int n, uint64_t tick_us);

/* Shares recomputed from the current rates at once (no sample, no dead band): for a link
 * that went down or came back. */
void dr_weights_reshare(dr_wlink_t *links, int n);

/*
 * Shares of the live links from fixed ratios (or equal when ratios is NULL),
 * down links 0. For the equal and fixed modes and for dr_mr_set_weights.
 */
void dr_weights_fixed_shares(dr_wlink_t *links, int n, const uint32_t *ratios);

/* Integer weights for dr_stripe_split from the applied shares (>= 1 for a live link). */
void dr_weights_to_u32(const dr_wlink_t *links, int n, uint32_t *out);

/*
 * What the estimator would settle at for links delivering rates[0..n-1]
 * bytes/s (all live): the trickle floor applied, shares into shares[].
 * dualrail-check prints these for the rates it measured.
 */
void dr_weights_shares_for_rates(const double *rates, int n, double *shares);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
