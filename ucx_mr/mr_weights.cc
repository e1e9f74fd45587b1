/*
 * ucx_mr striping weights: the per (peer, plane) estimator of weights.h wired
 * to the links, the split of whole small messages, the log line, the getter.
 *
 *   deliver (receiver)  each plane's first and last arrival of a message (timing_note)
 *   kAck                carries each plane's delivery span and finish (ack_post),
 *                       aux = kAckSpans, with kAckVague for a vague message
 *                       (fields a kAck did not use: an older peer sends 0
 *                       there and is not measured); planes 0-3
 *   kAck (sender)       bytes each plane carried, its span and finish -> the
 *                       estimator (dr_weights_message: timed planes by their span,
 *                       the others balanced by finish against a timed one)
 *   weights_tick        every kTickUs, per peer that moved data: samples,
 *                       growth, shares -> Link::weight (what dr_stripe_split gets)
 *   declare_down /      the link's share goes / comes back cautiously
 *   readmit
 *
 * Per peer, not per process: a slow link to one node re-weights only the
 * transfers to that node. Modes equal and fixed (coll_dualrail_weights, or
 * dr_mr_set_weights for one peer) skip the estimator and keep their ratios
 * over the live planes.
 */
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "mr_internal.hpp"

namespace dualrail {
namespace mr {

/* Updates every 25 ms of wall time: a few samples per second even on a slow plane, cheap
 * (one pass over the peers that moved data), and fast enough that a plane cut to a tenth
 * is re-weighted within a few hundred milliseconds. */
constexpr uint64_t kTickUs = 25000;
/* A link's share moving by this factor since its last line is worth a line... */
constexpr double kLogFactor = 2.0;
/* ...at most one per link this often (a flapping rate must not flood the log). */
constexpr uint64_t kLogEveryUs = 1000000;
/* aux of a kAck whose total/offset carry delivery spans ("DS"), in its lower 16 bits; the
 * upper ones flag a message whose spans are vague (dr_weights_span_vague; an older peer
 * sends none). */
constexpr uint32_t kAckSpans = 0x4453;
constexpr uint32_t kAckVague = 1u << 16;
/* Span unit: 16 bits of 32 us reach 2.1 s (longer spans saturate: a rate underestimated on
 * a plane that slow anyway) at 1 % resolution for a 3 ms span (a 256 KiB segment at
 * 700 Mbit/s). */
constexpr uint64_t kSpanUnitUs = 32;
/* Bytes after a plane's first segment that make its span worth a sample. The first segment
 * is not timed (it may have waited behind an earlier message, and it takes most of a shaper's
 * burst: the lab's tbf lets 4 ms worth, at least 64 KiB, through at once); below this the
 * span is a few milliseconds, the order of a loaded receiver's progress jitter. */
constexpr uint64_t kMinTimedBytes = 128 * 1024;
/* How long after a link of the peer came back every sample counts (the climb of a
 * re-admitted plane: 2-3 s on the lab)... */
constexpr uint64_t kVagueQuietUs = 5000000;
/* ...and after a link's learned rate moved (dr_weights_rate_moved: a plane cut or raised,
 * which the estimator follows in about a second with every span; leaving vague ones out
 * after the restore of perf/unequal_planes.sh took its climb from 2.1-2.4 s to 2.9-3.0 s in
 * some runs). A move while unsettled extends the time: the climb goes on. */
constexpr uint64_t kMovedQuietUs = 2000000;

void Mr::weights_init(Peer *p)
{
    const int n = (int)planes.size();
    for (int i = 0; i < n; ++i) {
        Link *l = p->links[i].get();
        dr_weights_link_init(&l->est);
    }
    dr_wlink_t est[DR_MAX_PLANES];
    for (int i = 0; i < n; ++i) {
        est[i] = p->links[i]->est;
    }
    dr_weights_fixed_shares(est, n, wmode == DR_WEIGHTS_FIXED ? wratios : nullptr);
    uint32_t w[DR_MAX_PLANES];
    dr_weights_to_u32(est, n, w);
    for (int i = 0; i < n; ++i) {
        Link *l = p->links[i].get();
        l->est.share = est[i].share;
        l->logged_share = est[i].share;
        l->weight = w[i];
    }
    planes_changed(p);
}

/* The estimator works on a contiguous array; the links keep their own copy. */
static void gather(Peer *p, int n, dr_wlink_t *est)
{
    for (int i = 0; i < n; ++i) {
        est[i] = p->links[i]->est;
    }
}

static void scatter(Peer *p, int n, const dr_wlink_t *est)
{
    uint32_t w[DR_MAX_PLANES];
    dr_weights_to_u32(est, n, w);
    for (int i = 0; i < n; ++i) {
        p->links[i]->est = est[i];
        p->links[i]->weight = w[i];
    }
    Mr::planes_changed(p);
}

void Mr::weights_apply(Peer *p, uint64_t now)
{
    const int n = (int)planes.size();
    if (wmode != DR_WEIGHTS_ADAPTIVE || p->w_fixed) {
        return;
    }
    /* One line per link whose share moved by kLogFactor since its last line, naming the
     * best other plane it is compared with (what a user checks against the fabric). */
    for (int i = 0; i < n; ++i) {
        Link *l = p->links[i].get();
        const double rate = l->est.rate;
        if (l->state != DR_LINK_UP || rate <= 0 || l->est.share <= 0) {
            continue;
        }
        const double f = l->logged_share > 0 ? l->est.share / l->logged_share : kLogFactor;
        if ((f < kLogFactor && f > 1 / kLogFactor) ||
            (l->logged_at != 0 && now - l->logged_at < kLogEveryUs)) {
            continue;
        }
        int ref = -1;
        for (int j = 0; j < n; ++j) {
            const Link *o = p->links[j].get();
            if (j != i && o->state == DR_LINK_UP && o->est.rate > 0 &&
                (ref < 0 || o->est.rate > p->links[ref]->est.rate)) {
                ref = j;
            }
        }
        if (ref < 0) {
            continue;
        }
        log(DR_LOG_WARN, "peer %u plane %d (%s) delivering %.2fx plane %d: weight %.2f", p->id, i,
            planes[i]->device.c_str(), rate / p->links[ref]->est.rate, ref, l->est.share);
        l->logged_share = l->est.share;
        l->logged_at = now;
    }
}

void Mr::weights_tick(uint64_t now)
{
    if (now - w_last_tick < kTickUs) {
        return;
    }
    w_last_tick = now;
    const int n = (int)planes.size();
    /* A peer whose links took bytes in this tick stays active until here (Mr::settled). An
     * idle peer has nothing to update; its first tick after a pause spans the pause, so its
     * samples age by the pause at once, as they did tick by tick when every peer was
     * visited. */
    for (size_t pi = 0; pi < active.size(); ++pi) {
        Peer *p = active[pi];
        ++work.peer_visits;
        if (!p->known) {
            continue;
        }
        bool moved = false;
        for (int i = 0; i < n; ++i) {
            moved |= p->links[i]->est.tick_bytes != 0;
        }
        const uint64_t tick = p->w_last != 0 ? now - p->w_last : kTickUs;
        p->w_last = now;
        if (!moved || wmode != DR_WEIGHTS_ADAPTIVE || p->w_fixed) {
            for (int i = 0; i < n; ++i) {
                p->links[i]->est.tick_bytes = 0;
                p->links[i]->est.tick_busy_us = 0;
                p->links[i]->est.tick_timed = 0;
            }
            continue;
        }
        dr_wlink_t est[DR_MAX_PLANES];
        gather(p, n, est);
        const int changed = dr_weights_update(est, n, tick);
        /* A link's rate that moved unsettles the peer for kMovedQuietUs (weights_settled):
         * its vague spans count again meanwhile. */
        for (int i = 0; i < n; ++i) {
            if (dr_weights_rate_moved(p->links[i]->est.rate, est[i].rate)) {
                p->w_moved_at = now;
                break;
            }
        }
        scatter(p, n, est);
        if (changed) {
            if (cfg.verbose >= 2) {
                char line[320];
                int len = 0;
                for (int i = 0; i < n && len < (int)sizeof(line); ++i) {
                    const dr_wlink_t &e = p->links[i]->est;
                    len += snprintf(line + len, sizeof(line) - (size_t)len,
                                    "%s plane %d %.1f MB/s share %.3f", i ? "," : "", i,
                                    e.rate / 1e6, e.share);
                }
                log(DR_LOG_DEBUG, "peer %u weights:%s", p->id, line);
            }
            weights_apply(p, now);
        }
    }
}

/* A link went down or came back (its state already changed): re-split the peer's messages. */
void Mr::weights_link_changed(Link *l)
{
    Peer *p = peers[l->peer].get();
    const int n = (int)planes.size();
    dr_wlink_t est[DR_MAX_PLANES];
    gather(p, n, est);
    if (l->state == DR_LINK_UP) {
        dr_weights_link_readmit(&est[l->plane], est, n);
    } else {
        dr_weights_link_down(&est[l->plane]);
    }
    if (wmode != DR_WEIGHTS_ADAPTIVE || p->w_fixed) {
        dr_weights_fixed_shares(est, n,
                                p->w_fixed                  ? p->w_ratios
                                : wmode == DR_WEIGHTS_FIXED ? wratios
                                                            : nullptr);
    } else {
        dr_weights_reshare(est, n);
    }
    scatter(p, n, est);
    l->logged_share = l->est.share;
}

void Mr::timing_note(RecvTiming &t, int plane, uint64_t len, uint64_t at)
{
    if (len == 0 || plane >= DR_MAX_PLANES) {
        return;
    }
    if (t.first[plane] == 0) {
        t.first[plane] = at;
        t.first_late[plane] = poll_gap;
    }
    if (at > t.last[plane]) {
        t.last[plane] = at;
        t.last_late[plane] = poll_gap;
    }
}

/*
 * The acknowledgement of a complete receive, with per plane (the first four) two times in
 * kSpanUnitUs units, 16 bits each:
 *   total   the delivery span: from the plane's first segment of the message to its last.
 *           A stripe's segments are all queued at once and a plane delivers them in order,
 *           so after the first they arrive back to back, paced by the plane: the span is
 *           how long the plane took for all but its first segment (whose start is not seen
 *           here: it may have waited behind an earlier message);
 *   offset  the finish: from the message's first arrival on any plane to the plane's last.
 * A message with a vague span (an end stamped by a progress call that came long after the
 * one before: dr_weights_span_vague) says so (kAckVague): its sender may leave it out
 * (weights_on_ack).
 */
void Mr::ack_post(Link *l, const Req *r)
{
    const RecvTiming &t = r->timing;
    uint64_t start = 0;
    for (int i = 0; i < (int)planes.size() && i < 4; ++i) {
        if (t.first[i] != 0 && (start == 0 || t.first[i] < start)) {
            start = t.first[i];
        }
    }
    auto pack = [](uint64_t us) {
        const uint64_t units = (us + kSpanUnitUs / 2) / kSpanUnitUs;
        return units < 1 ? 1 : units > 0xffff ? 0xffff : units;
    };
    uint64_t spans = 0, finish = 0;
    bool vague = false;
    for (int i = 0; i < (int)planes.size() && i < 4; ++i) {
        if (t.first[i] == 0) {
            continue;
        }
        if (t.last[i] > t.first[i]) {
            spans |= pack(t.last[i] - t.first[i]) << (16 * i);
            vague = vague ||
                    dr_weights_span_vague(t.first_late[i], t.last_late[i], t.last[i] - t.first[i]);
        }
        finish |= pack(t.last[i] - start) << (16 * i);
    }
    const uint32_t aux = kAckSpans | (vague ? kAckVague : 0);
    ctrl.push_back(Ctrl{
        l,
        WireHdr{kAck, (uint8_t)l->plane, kWireVersion, self, r->msg_id, aux, r->key, spans, finish},
        AckList{}});
}

/* The peer's links are all up, none came back within kVagueQuietUs and no learned rate moved
 * within kMovedQuietUs: vague samples may be left out. A re-admitted plane climbs from its
 * cautious start by samples, and leaving the vague ones out held it below 0.9x of two planes
 * for 3.6-3.7 s after the heal (perf/failover_timeline.sh, two runs) against 2.1 s with
 * them; a plane cut from 500 to 250 Mbit/s under weights_degrade's 4 MiB loop, where most
 * spans are vague, was followed 2.8-4.7 s later against 0.3-1.1 s. */
bool Mr::weights_settled(const Peer *p) const
{
    for (size_t i = 0; i < planes.size(); ++i) {
        const Link *l = p->links[i].get();
        if (l->state != DR_LINK_UP ||
            (l->readmitted_at != 0 && clock - l->readmitted_at < kVagueQuietUs)) {
            return false;
        }
    }
    return p->w_moved_at == 0 || clock - p->w_moved_at >= kMovedQuietUs;
}

/* The sender's side: what each plane carried after its first segment, over its span, and
 * which plane finished last. Only messages that went as first sent (a re-routed segment's
 * plane is not the one timed). */
void Mr::weights_on_ack(Peer *p, const Req *r, const WireHdr &h)
{
    if ((h.aux & 0xffff) != kAckSpans || wmode != DR_WEIGHTS_ADAPTIVE || p->w_fixed ||
        r->len <= cfg.min_stripe) {
        return;
    }
    uint64_t bytes[DR_MAX_PLANES] = {}, first[DR_MAX_PLANES] = {};
    for (const Seg &s : r->segs) {
        if (s.attempt != 0) {
            return;
        }
        if (bytes[s.plane] == 0) {
            first[s.plane] = s.length; /* segments leave a plane in this order */
        }
        bytes[s.plane] += s.length;
    }
    const int n = std::min((int)planes.size(), 4);
    uint64_t timed[DR_MAX_PLANES] = {}, span[DR_MAX_PLANES] = {}, finish[DR_MAX_PLANES] = {};
    for (int i = 0; i < n; ++i) {
        if (bytes[i] == 0 || p->links[i]->state != DR_LINK_UP) {
            bytes[i] = 0;
            continue;
        }
        span[i] = ((h.total >> (16 * i)) & 0xffff) * kSpanUnitUs;
        finish[i] = ((h.offset >> (16 * i)) & 0xffff) * kSpanUnitUs;
        /* Timed only past kMinTimedBytes: a span of a short stripe is a few milliseconds,
         * and the receiver's progress jitter is of that order. A plane whose stripes stay
         * shorter is balanced by its finish against a timed one (dr_weights_message). */
        const uint64_t t = bytes[i] - first[i];
        timed[i] = t >= kMinTimedBytes ? t : 0;
    }
    /* A vague message is left out while the peer's links are settled (weights_settled),
     * where every plane that carried it is timed: a plane balanced by finishes (too short a
     * stripe, as a slow plane's, or one climbing back) samples a median of several of them,
     * and waiting for clean ones delayed its climb. */
    const bool vague = (h.aux & kAckVague) != 0;
    bool all_timed = true;
    for (int i = 0; i < n; ++i) {
        all_timed = all_timed && (bytes[i] == 0 || timed[i] != 0);
    }
    ++work.span_acks;
    work.vague_acks += (uint64_t)vague;
    if (vague && all_timed && weights_settled(p)) {
        ++work.vague_skipped;
        return;
    }
    /* The estimator takes the peer's links as one array (what is noted per link is copied
     * back; shares and integer weights change only in weights_tick). */
    dr_wlink_t est[DR_MAX_PLANES];
    for (int i = 0; i < n; ++i) {
        est[i] = p->links[i]->est;
    }
    dr_weights_message(est, n, bytes, timed, span, finish, clock);
    for (int i = 0; i < n; ++i) {
        p->links[i]->est = est[i];
    }
}

} // namespace mr
} // namespace dualrail

using namespace dualrail::mr;

extern "C" dr_status_t dr_mr_link_weight(const dr_mr_t *mr, uint32_t peer, int plane, double *share,
                                         double *rate)
{
    Guard g(mr);
    if (mr == nullptr || plane < 0 || plane >= (int)mr->planes.size() || peer >= mr->peers.size() ||
        !mr->peers[peer]) {
        return DR_ERR_INVALID;
    }
    const Link *l = mr->peers[peer]->links[plane].get();
    if (share != nullptr) {
        *share = l->state == DR_LINK_UP ? l->est.share : 0;
    }
    if (rate != nullptr) {
        *rate = l->est.rate;
    }
    return DR_OK;
}
