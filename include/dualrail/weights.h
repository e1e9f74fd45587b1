/*
 * Striping weights: how much of each message each plane to a peer carries,
 * learned from what each plane delivers. Pure functions over plain structs
 * (no allocation, no lock, no clock of their own: the caller passes the
 * time), so that the estimator is unit-tested with synthetic time and bytes.
 *
 * What is measured. A send segment handed to UCX either completes at once
 * (the bytes went into the plane's socket or NIC queue) or waits behind the
 * ones already queued there: then the plane is *backlogged*, and its
 * completions come at the pace the plane drains, i.e. its delivered rate.
 * Only backlogged time counts: a plane that is idle because the message gave
 * it little work would otherwise look slow. Per link:
 *
 *   sample   bytes completed while backlogged / backlogged time, taken once
 *            enough has accumulated (kSampleSegs completions, or a long busy
 *            time: a plane that stops completing decays towards zero)
 *   rate     EWMA of the samples; a slowdown is followed faster than a
 *            speed-up (a slow plane delays the whole message, a fast one
 *            only wastes a little)
 *   growth   a plane that carried data without ever backlogging while another
 *            plane of the same peer was backlogged has spare capacity that a
 *            sample cannot show (its bytes were absorbed at once): its rate is
 *            raised by a bounded factor per update until it backlogs and is
 *            measured again
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

/* No live plane's weight falls below 1/DR_WEIGHTS_TRICKLE of the best one's: it keeps
 * carrying a few hundred bytes of each MiB (measured, and kept alive for the watchdog).
 * Small, because a floor above a plane's real proportion makes every message wait for it:
 * at 1/256 a plane delivering 1/256 of the best costs nothing, one delivering 1/512 at
 * most half of the best plane's rate. */
#define DR_WEIGHTS_TRICKLE 256
/* A re-admitted plane restarts at 1/DR_WEIGHTS_READMIT of the best plane's rate: cautious
 * (a plane that just came back may fail again), yet few growth steps from an equal share. */
#define DR_WEIGHTS_READMIT 32
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

/* One (peer, plane) link's estimator state. Zero-initialise, or dr_weights_link_init. */
typedef struct dr_wlink {
    double rate;           /* delivered bytes/s; 0: not measured yet */
    double share;          /* applied share of each message, 0..1 (0: down) */
    int up;                /* the link is in service */
    int busy;              /* backlogged now */
    uint64_t mark_us;      /* start of the current backlogged stretch, or its last credit */
    uint64_t acc_bytes;    /* since the last sample: bytes completed while backlogged */
    uint64_t acc_busy_us;  /*   backlogged time */
    uint32_t acc_segs;     /*   completions while backlogged */
    uint64_t tick_bytes;   /* since the last update: every byte completed */
    uint64_t tick_busy_us; /*   backlogged time */
    uint32_t samples;      /* samples taken since (re-)admission */
    uint32_t spare;        /* updates in a row with spare capacity (see growth) */
    uint32_t drift;        /* updates in a row its share was off by a little (see dead band) */
} dr_wlink_t;

void dr_weights_link_init(dr_wlink_t *l);

/* A segment handed to the link is waiting (not completed at once): the link backlogs. */
void dr_weights_link_pending(dr_wlink_t *l, uint64_t now_us);

/*
 * A segment of `bytes` completed on the link; pending_left: segments of the
 * link still waiting after this one (0 ends the backlogged stretch).
 */
void dr_weights_link_done(dr_wlink_t *l, uint64_t bytes, uint64_t now_us, uint32_t pending_left);

/* The link went down: it carries nothing and its measurements stop. */
void dr_weights_link_down(dr_wlink_t *l);

/*
 * The link came back (re-admission): it starts at the trickle below the best
 * of the other links' rates (others: the peer's links, this one included and
 * skipped), and earns its share back.
 */
void dr_weights_link_readmit(dr_wlink_t *l, const dr_wlink_t *others, int n);

/*
 * Update the n links of one peer at now_us, tick_us after the previous update:
 * fold the running backlogged stretches in, take samples, grow unmeasured
 * links with spare capacity, recompute shares. Returns 1 when the applied
 * shares changed (the caller re-derives integer weights), else 0.
 */
int dr_weights_update(dr_wlink_t *links, int n, uint64_t now_us, uint64_t tick_us);

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

#ifdef __cplusplus
}
#endif

#endif
