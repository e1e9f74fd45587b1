/*
 * ucx_mr plane health: detection, re-routing, re-admission.
 *
 * Per (peer, plane) link:
 *
 *        endpoint error / stall / peer's kDown
 *   UP ─────────────────────────────────────────▶ DOWN
 *    ▲                                              │ probe after backoff:
 *    │          kPong answering our probe           │ fresh endpoint + kPing
 *    └──────────────────────────────────────────────┘ (no answer: backoff x2)
 *
 * Stall rule (silent black holes, which TCP reports only after minutes): a
 * busy link silent for probe_interval is pinged. It is declared down when it
 * stays silent for stall_timeout *after another plane of the same peer has
 * answered* and again at least half a stall period later — a peer that is merely
 * busy (not progressing) answers on no plane, or answered once and went quiet on
 * all, and so is never blamed on one. A link that is only slow keeps completing
 * sends and receiving data, which counts as progress.
 *
 * Every peer silent on all planes for peer_timeout fails the peer.
 */
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "health_rules.hpp"
#include "mr_internal.hpp"

namespace dualrail {
namespace mr {

/* A busy peer with no message finished for this long gets its state logged (info). */
constexpr uint64_t kStallDumpUs = 2000000;
/* A probe (fresh endpoint, ping, pong) on a healthy plane answers within milliseconds; one
 * still unanswered after this long went into a dead plane and is retried on a new
 * endpoint after the backoff. With the backoff ceiling (readmit_max, 1.5 s) this bounds
 * re-admission after a heal to about 2 s. */
constexpr uint64_t kProbeTimeoutUs = 500000;
/* Two sides' probes of one link this far apart do not cross (a probe's round trip on a
 * live plane takes milliseconds). */
constexpr uint64_t kProbeStaggerUs = 100000;
/*
 * A link whose endpoint has carried nothing yet is declared down by the stall rule only
 * after this many stall periods of silence. Its first ping makes the endpoint, and UCX's
 * wire-up takes several exchanges, each of which waits for the peer to progress that
 * plane: a peer that computes between short calls (an 8-byte allreduce every 0.3 s, on
 * the plane its small messages use) is back in MPI for microseconds at a time, and the
 * plane it never used needed more than a stall period to answer, while the small plane
 * answered at every call. Declared down, UCX 1.13 asserted in its re-admission and an
 * allreduce failed. A plane black-holed before it ever carried anything is still found,
 * 1.5 s later than others at the defaults.
 */
constexpr uint64_t kUnprovenStalls = 4;

uint64_t Mr::others_progress(const Peer *p, const Link *except) const
{
    uint64_t last = 0;
    for (size_t j = 0; j < planes.size(); ++j) {
        const Link *q = p->links[j].get();
        if (q != except && q->state == DR_LINK_UP) {
            last = std::max(last, q->last_progress);
        }
    }
    return last;
}

void Mr::note_progress(Link *l, uint64_t now)
{
    if (l->state != DR_LINK_UP) {
        return;
    }
    Peer *p = peers[l->peer].get();
    /* Only a link with a ping out cares (no ping out anywhere: the common case, no loop). */
    for (size_t i = 0; pings_out != 0 && i < planes.size(); ++i) {
        Link *o = p->links[i].get();
        if (o == l || o->state != DR_LINK_UP || !o->ping_out) {
            continue;
        }
        /* The first sign of life on another plane since o's ping, or the first after the
         * peer was quiet on every other plane for a whole stall period (it computed; we
         * may have been away ourselves, and no watchdog ran to void the old sign). */
        if (o->other_alive == 0 || age_us(now, others_progress(p, o)) > stall_us) {
            o->other_alive = now;
        }
    }
    l->last_progress = now;
    l->proven = true;
    set_ping_out(l, false);
    l->other_alive = 0;
}

/*
 * An acknowledgement proves that every segment of the message arrived, those on other
 * planes too: each plane that carried some is alive. A plane cut to a tenth of its rate
 * with a socket full at the old rate completes no send for a while (the kernel wakes a
 * writer only once a third of a large buffer has drained) and answers pings only behind
 * that backlog, yet delivers; its messages' acks (on any plane) keep it from being taken
 * for a black hole, which delivers nothing and so is acked nothing.
 */
void Mr::ack_progress(Peer *p, const Req *r, uint64_t now)
{
    bool carried[DR_MAX_PLANES] = {};
    for (const Seg &s : r->segs) {
        carried[s.plane] = true;
    }
    for (size_t i = 0; i < planes.size(); ++i) {
        if (carried[i]) {
            note_progress(p->links[i].get(), now);
        }
    }
}

/*
 * Two sides that lost a link at the same moment would probe it at the same moment too,
 * each creating a fresh UCX endpoint to the other; UCX 1.13 pairs or refuses such
 * crossing connections unreliably, and both probes can go unanswered on a healthy plane
 * (then 2 s more down). The side with the higher process id waits kProbeStaggerUs longer,
 * and a side that is probed while down probes back at once (answering already made its
 * endpoint, on the connection the peer opened).
 */
uint64_t Mr::probe_delay(const Link *l) const
{
    return self > l->peer ? l->backoff + kProbeStaggerUs : l->backoff;
}

/* A probe that failed or went unanswered: the next one after twice the backoff. */
void Mr::probe_again_later(Link *l, uint64_t now)
{
    l->probe_out = false;
    l->backoff = std::min(l->backoff * 2, readmit_max_us);
    l->next_probe = now + probe_delay(l);
}

void Mr::fail_peer(Peer *p)
{
    char head[384];
    snprintf(head, sizeof(head), "peer %u (%s): no plane left (", p->id,
             p->host.empty() ? "?" : p->host.c_str());
    last_error = head + peer_state_text(p) + ")";
    log(p->gone ? DR_LOG_INFO : DR_LOG_WARN, "%s", last_error.c_str());
    for (Req *r : p->sends) {
        if (!r->complete && !r->acked && r->status == DR_OK) {
            r->status = DR_ERR_PEER_UNREACHABLE;
        }
    }
    for (Req *r : p->recvs) {
        if (!r->complete) {
            r->status = DR_ERR_PEER_UNREACHABLE;
            r->complete = true; /* receives are copied out in callbacks: nothing to wait for */
        }
    }
}

void Mr::declare_down(Link *l, const std::string &why)
{
    if (l->state != DR_LINK_UP) {
        return;
    }
    const uint64_t now = now_us();
    Peer *p = peers[l->peer].get();
    Plane *pl = planes[l->plane].get();
    if (p->acks_in_n != 0) {
        acks_in_apply(p); /* what is acknowledged is not re-sent below */
    }
    if (p->flat_live != 0) {
        flat_to_reqs(p); /* re-routed below, or failed by fail_peer, as copied sends */
    }
    l->state = DR_LINK_DOWN;
    ++l->downs;
    planes_changed(peers[l->peer].get());
    activate(p); /* the watchdog probes it for re-admission */
    ++l->gen;
    l->reason = why;
    l->down_at = now;
    const uint64_t seen = std::max(l->last_progress, p->busy_since);
    const uint64_t detect = seen != 0 && now > seen ? now - seen : 0;
    pl->stats.last_detect_us = detect;
    if (pl->stats.errors == 0 || detect < pl->stats.min_detect_us) {
        pl->stats.min_detect_us = detect;
    }
    pl->stats.max_detect_us = std::max(pl->stats.max_detect_us, detect);
    pl->stats.total_detect_us += detect;
    ++pl->stats.errors;
    /* Anti-flap: failing again soon after coming back doubles the hold-down time. */
    if (l->readmitted_at != 0 && now - l->readmitted_at < flap_us) {
        l->backoff = std::min(std::max(l->backoff, readmit_min_us) * 2, readmit_max_us);
    } else {
        l->backoff = readmit_min_us;
    }
    l->next_probe = now + probe_delay(l);
    set_ping_out(l, false);
    l->probe_out = false;
    l->remote_down = false;
    l->inflight = 0; /* operations of the old generation no longer count */
    weights_link_changed(l);
    lane_close(l); /* the direct lane goes with the link (mr_lane.cc), before the sever */
    ep_close(l, true);
    const int left = live_planes(p);
    log(p->gone ? DR_LOG_INFO : DR_LOG_WARN,
        "peer %u (%s) plane %d (%s -> %s) down: %s; %d plane(s) left, retry in %.2f s",
        p->id, p->host.empty() ? "?" : p->host.c_str(), l->plane, pl->device.c_str(),
        p->devices.size() > (size_t)l->plane ? p->devices[l->plane].c_str() : "?", why.c_str(),
        left, (double)l->backoff / 1e6);
    if (left == 0) {
        l->queue.clear();
        fail_peer(p);
        return;
    }
    /* Re-route: every segment of an unacknowledged send that rode this plane goes again on
     * the live plane with the shortest queue; the receiver drops what it already has. */
    for (Req *r : p->sends) {
        if (r->complete || r->acked || r->status != DR_OK) {
            continue;
        }
        bool moved = false;
        for (uint32_t s = 0; s < r->segs.size(); ++s) {
            Seg &seg = r->segs[s];
            if (seg.plane != l->plane) {
                continue;
            }
            Link *best = nullptr;
            for (size_t i = 0; i < planes.size(); ++i) {
                Link *o = p->links[i].get();
                if (o->state == DR_LINK_UP && (best == nullptr || o->queue.size() < best->queue.size())) {
                    best = o;
                }
            }
            seg.plane = best->plane;
            ++seg.attempt;
            best->queue.push(SegRef{r, r->gen, s, seg.attempt});
            ++pl->stats.reroutes;
            moved = true;
        }
        if (!moved && !r->segs.empty()) {
            /* Nothing rode this plane, but its ack may have: re-send one segment to draw a
             * fresh ack on a live plane. */
            Seg &seg = r->segs[0];
            Link *o = nullptr;
            for (size_t i = 0; i < planes.size() && o == nullptr; ++i) {
                if (p->links[i]->state == DR_LINK_UP) {
                    o = p->links[i].get();
                }
            }
            seg.plane = o->plane;
            ++seg.attempt;
            o->queue.push(SegRef{r, r->gen, 0, seg.attempt});
        }
    }
    l->queue.clear();
    /* Tell the peer, on a live plane, so it stops using this plane before it notices itself. */
    for (size_t i = 0; i < planes.size() && !p->gone; ++i) {
        Link *o = p->links[i].get();
        if (o->state == DR_LINK_UP) {
            WireHdr h{kDown, (uint8_t)i, kWireVersion, self, 0, (uint32_t)l->plane, l->downs, 0, 0};
            ctrl.push_back(Ctrl{o, h, AckList{}});
            break;
        }
    }
}

void Mr::readmit(Link *l)
{
    Peer *p = peers[l->peer].get();
    const uint64_t now = now_us();
    l->state = DR_LINK_UP;
    planes_changed(p);
    ++l->gen;
    l->probe_out = false;
    set_ping_out(l, false);
    l->other_alive = 0;
    l->last_progress = now;
    l->proven = true; /* the pong came on the probe's endpoint */
    l->readmitted_at = now;
    l->inflight = 0;
    l->reason.clear();
    weights_link_changed(l); /* back at the trickle: it earns its share again */
    ++planes[l->plane]->stats.readmissions;
    log(DR_LOG_WARN, "peer %u (%s) plane %d (%s) re-admitted after %.2f s down", p->id,
        p->host.empty() ? "?" : p->host.c_str(), l->plane, planes[l->plane]->device.c_str(),
        (double)(now - l->down_at) / 1e6);
}

void Mr::handle_deferred()
{
    if (!deferred) {
        return; /* no link carries a flag: the scan below would find nothing */
    }
    deferred = false;
    bool still = false;
    /* By index: declare_down() progresses a worker, and a message from a new process
     * may grow `peers` meanwhile. */
    for (size_t pi = 0; pi < peers.size(); ++pi) {
        Peer *p = peers[pi].get();
        if (p == nullptr) {
            continue;
        }
        for (size_t i = 0; i < planes.size(); ++i) {
            Link *l = p->links[i].get();
            if (l->state == DR_LINK_UP && l->ep_failed) {
                declare_down(l, std::string("endpoint error: ") +
                                    (l->ep_status == UCS_OK ? "cannot connect"
                                                            : ucs_status_string(l->ep_status)));
            } else if (l->state == DR_LINK_UP && l->lane.failed) {
                /* A peer that leaves says goodbye on UCP, then closes its lanes 50 ms later
                 * (dr_mr_destroy): that goodbye is in this plane's worker by now, though the
                 * poll that read the lane's end may not have polled UCP. No failure then. */
                l->lane.failed = false;
                for (int k = 0; k < 8 && !p->gone; ++k) {
                    poll_ucp(planes[i].get());
                }
                if (p->gone) {
                    log(DR_LOG_INFO, "peer %u plane %d: direct lane closed: the peer is leaving",
                        p->id, l->plane);
                } else if (l->state == DR_LINK_UP) {
                    ++planes[i]->stats.lane_failures;
                    declare_down(l, std::string("direct lane: ") + (l->lane.err != 0
                                                                        ? strerror(l->lane.err)
                                                                        : "closed by the peer"));
                }
            } else if (l->state == DR_LINK_UP && l->remote_down) {
                declare_down(l, "the peer lost this plane");
            } else if (l->state == DR_LINK_DOWN && l->ep_failed) {
                /* A failed probe endpoint (refused at once, as by a reset): drop it and
                 * wait out the backoff as for an unanswered probe. The next probe was due
                 * already, so the watchdog made a fresh endpoint every pass (2 ms). */
                ep_close(l);
                probe_again_later(l, now_us());
            }
            if (l->state != DR_LINK_UP) {
                l->lane.failed = false; /* down already: nothing more to declare */
            }
            still = still || l->ep_failed || l->remote_down || l->lane.failed;
        }
    }
    /* A flag this pass left (a link in neither state it handles) is looked at again next
     * time, as before the flag existed; one raised meanwhile set `deferred` itself. */
    deferred = deferred || still;
}

void Mr::dump_peer(const Peer *p, uint64_t now)
{
    log(DR_LOG_INFO,
        "peer %u (%s): no message finished for %.2f s; %zu send(s), %zu receive(s), "
        "%zu early segment(s) pending, %u flat send(s) unacknowledged",
        p->id, p->host.empty() ? "?" : p->host.c_str(),
        (double)age_us(now, std::max(p->last_done, p->busy_since)) / 1e6, p->sends.size(),
        p->recvs.size(), p->unexpected.size(), p->flat_live);
    for (size_t i = 0; i < planes.size(); ++i) {
        const Link *l = p->links[i].get();
        log(DR_LOG_INFO,
            "  plane %zu: %s gen %u, ep %s, %u in flight, %zu queued, progress %.2f s "
            "ago, ping %s, %s",
            i, l->state == DR_LINK_UP ? "up" : "down", l->gen,
            l->ep == nullptr ? "none"
            : l->ep_failed   ? "failed"
                             : "open",
            l->inflight, l->queue.size(), (double)age_us(now, l->last_progress) / 1e6,
            l->ping_out ? "out" : "-", lane_text(l).c_str());
    }
    for (uint32_t k = 0; p->flat && k < kFlatSlots; ++k) {
        const FlatSend &f = p->flat[k];
        if (f.live) {
            log(DR_LOG_INFO, "  flat send key %#llx msg %u: %u B on plane %u, %u op(s) out",
                (unsigned long long)f.key, f.msg_id, f.len, f.plane, f.ops);
        }
    }
    for (const Req *r : p->sends) {
        uint32_t on[DR_MAX_PLANES] = {};
        for (const Seg &s : r->segs) {
            ++on[s.plane];
        }
        std::string per_plane; /* "0: 3, 1: 2": segments riding each plane */
        for (size_t i = 0; i < planes.size(); ++i) {
            per_plane += (i == 0 ? "" : ", ") + std::to_string(i) + ": " + std::to_string(on[i]);
        }
        log(DR_LOG_INFO, "  send key %#llx msg %u: %llu B, %zu segment(s) (plane %s), %u op(s) in "
            "UCX, %s, %s", (unsigned long long)r->key, r->msg_id, (unsigned long long)r->len,
            r->segs.size(), per_plane.c_str(), r->ops, r->acked ? "acked" : "not acked",
            dr_status_str(r->status));
    }
    for (const Req *r : p->recvs) {
        log(DR_LOG_INFO, "  receive key %#llx: %s msg %u, %llu of %llu B in %zu range(s)",
            (unsigned long long)r->key, r->bound ? "bound to" : "unbound", r->msg_id,
            (unsigned long long)r->received, (unsigned long long)r->total, r->got.size());
    }
}

void Mr::watchdog(uint64_t now)
{
    /* Only active peers can be busy or have a plane down. By index: declare_down() may
     * activate (append) while this runs. */
    for (size_t pi = 0; pi < active.size(); ++pi) {
        Peer *p = active[pi];
        ++work.peer_visits;
        if (!p->known || p->gone) {
            continue;
        }
        const bool busy = !p->sends.empty() || !p->recvs.empty() || p->flat_live != 0;
        /* Copied sends are complete for their callers: a peer that only owes their
         * acknowledgements (it may be computing, not progressing) is watched plane by plane
         * but never failed as a whole for its silence; a caller waiting on it is. */
        bool waited_on = !p->recvs.empty();
        for (size_t i = 0; !waited_on && i < p->sends.size(); ++i) {
            waited_on = !p->sends[i]->copied;
        }
        int up = 0, silent = 0;
        for (size_t i = 0; i < planes.size(); ++i) {
            Link *l = p->links[i].get();
            if (l->state == DR_LINK_DOWN) {
                if (!l->probe_out && now >= l->next_probe) {
                    const dr_status_t es = ep_ensure(l);
                    if (es == DR_OK) {
                        ctrl_post(l, kPing, 0, 0, ++l->probe_id, 1);
                        ++planes[i]->stats.probes;
                        l->probe_out = true;
                        l->probe_sent = now;
                    } else if (es != DR_INPROGRESS) { /* that: the next pass tries again */
                        ep_close(l);
                        l->next_probe = now + probe_delay(l);
                    }
                } else if (l->probe_out &&
                           age_us(now, l->probe_sent) > std::max(stall_us, kProbeTimeoutUs)) {
                    ep_close(l);
                    probe_again_later(l, now);
                    log(DR_LOG_INFO, "peer %u plane %d (%s): probe unanswered, next in %.2f s",
                        p->id, (int)i, planes[i]->device.c_str(), (double)l->backoff / 1e6);
                }
                continue;
            }
            if (!busy) {
                continue;
            }
            if (l->lane.st == Lane::St::kReady) {
                lane_watch(l, now);
            }
            ++up;
            const uint64_t since = std::max(l->last_progress, p->busy_since);
            const LinkWatch w = watch_link(now, l->last_progress, p->busy_since, l->ping_out,
                                           waited_on, probe_us, peer_timeout_us);
            if (w.ping) {
                ctrl_post(l, kPing, 0, 0, ++l->ping_id, 0);
                ++planes[i]->stats.probes;
                log(DR_LOG_DEBUG, "peer %u plane %d: silent %.3f s, ping %u", p->id, (int)i,
                    (double)age_us(now, since) / 1e6, l->ping_id);
                set_ping_out(l, true);
                l->ping_sent = now;
                l->other_alive = 0;
            }
            if (w.silent) {
                ++silent;
            }
        }
        if (!busy) {
            continue;
        }
        /* "Another plane answered" must be a peer in a call, not one blip: a peer that
         * progressed once on one plane (a request finished there, so it polled no other)
         * and then computed for seconds answered on that plane only, and its silence on
         * this one is no evidence (seen: a rank filling a 2 GiB buffer right after a
         * collective, the other declaring a healthy plane down the moment the first
         * segment of the next call arrived, and UCX 1.13 asserting in the re-admission
         * that followed). So the verdict needs another sign of life at least half a stall
         * period after the first (a peer in a call answers a ping every probe_interval on
         * every plane it has), and a peer quiet on every other plane for a whole stall
         * period voids the first sign: it starts again when the peer is back (here, or in
         * note_progress when this rank was away itself). */
        for (size_t i = 0; i < planes.size(); ++i) {
            Link *l = p->links[i].get();
            if (l->state != DR_LINK_UP || !l->ping_out || l->other_alive == 0) {
                continue;
            }
            const uint64_t other_last = others_progress(p, l);
            if (age_us(now, other_last) > stall_us) {
                l->other_alive = 0;
                continue;
            }
            /* ... and we read this plane since (a cold plane is read at least once per
             * kColdPollUs while progress runs): a rank back from computing has the answer
             * waiting in its socket. */
            const uint64_t half = l->other_alive + stall_us / 2;
            const uint64_t quiet = age_us(now, std::max(l->last_progress, p->busy_since));
            if (age_us(now, l->other_alive) > stall_us && other_last >= half &&
                planes[i]->polled_at >= half && (l->proven || quiet > kUnprovenStalls * stall_us)) {
                char why[160];
                snprintf(why, sizeof(why), "silent for %.2f s while another plane answered",
                         (double)quiet / 1e6);
                declare_down(l, why);
            }
        }
        /* A peer busy for long with no message finishing either way: say what is pending,
         * once per stall, so that a hang can be told from a slow link in the logs. */
        if (!p->dumped && age_us(now, std::max(p->last_done, p->busy_since)) > kStallDumpUs) {
            p->dumped = true;
            dump_peer(p, now);
        }
        if (up != 0 && silent == up) {
            char why[128];
            snprintf(why, sizeof(why), "peer silent on every plane for %.1f s",
                     (double)peer_timeout_us / 1e6);
            for (size_t i = 0; i < planes.size(); ++i) {
                declare_down(p->links[i].get(), why);
            }
        }
    }
}

} // namespace mr
} // namespace dualrail
