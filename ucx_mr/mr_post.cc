/*
 * ucx_mr's posting calls (dr_mr_isend, dr_mr_irecv): a request made, a small send copied
 * (kept in its peer's ring when it can go straight out: mr_flat.cc), a receive matched
 * against what arrived before it. The data path they start is in mr_xfer.cc.
 */
#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "mr_internal.hpp"

using namespace dualrail::mr;

/* The error paths of req_new and fail_if_unreachable, out of line (see Mr::log). */
__attribute__((cold, noinline)) static dr_status_t no_address(dr_mr_t *mr, uint32_t peer)
{
    mr->last_error = "peer " + std::to_string(peer) + " has no address (dr_mr_add_peer)";
    return DR_ERR_INVALID;
}

__attribute__((cold, noinline)) static void unreachable(dr_mr_t *mr, Peer *p, Req *r)
{
    r->status = DR_ERR_PEER_UNREACHABLE;
    r->complete = true;
    mr->last_error =
        "peer " + std::to_string(p->id) + ": no plane left (" + mr->peer_state_text(p) + ")";
}

static dr_status_t req_new(dr_mr_t *mr, uint32_t peer, uint64_t key, void *buf, size_t len,
                           bool is_send, Peer **pp, Req **rr)
{
    if (mr == nullptr || (buf == nullptr && len != 0)) {
        return DR_ERR_INVALID;
    }
    Peer *p = mr->peer_get(peer, false);
    if (p == nullptr || !p->known) {
        return no_address(mr, peer);
    }
    Req *r = mr->req_get();
    r->is_send = is_send;
    r->peer = peer;
    r->key = key;
    r->buf = static_cast<char *>(buf);
    r->len = len;
    /* The clock is read for a receive (the plane its message comes on stays hot for kHotUs
     * from now, dr_mr_irecv: the wait polls it) and for the busy mark (the watchdog's start
     * of this peer's wait, which must be now). A send to a peer already busy takes mr->clock
     * as the last read left it, for the marks its post makes (the plane active, a send
     * completing at once noted as progress): a time at most that old only moves a hot
     * plane's turn earlier, and every plane is polled in the first progress call after a
     * pause of kHotUs (dr_mr_progress). In a small exchange the peer still holds the
     * previous call's copied send, unacknowledged: one clock read per call less (some 75
     * instructions, 2 % of an 8-byte allreduce's own work). */
    const bool idle = p->sends.empty() && p->recvs.empty() && p->flat_live == 0;
    if (!is_send || idle) {
        mr->clock = now_us();
    }
    if (idle) {
        p->busy_since = mr->clock;
    }
    *pp = p;
    *rr = r;
    return DR_OK;
}

/* The planes a message of up to capacity bytes from p comes on, marked active at mr->clock
 * (dr_mr_progress polls them): a small one's on the plane the peer's small messages came on
 * (Peer::small_rx) and on ours, a longer one's possibly on every plane. */
static void keep_polled(dr_mr_t *mr, const Peer *p, size_t capacity)
{
    const int small = capacity > mr->cfg.min_stripe ? -1 : mr->small_plane(p);
    for (size_t i = 0; i < mr->planes.size(); ++i) {
        if (small < 0 || (int)i == small || (int)i == p->small_rx) {
            mr->planes[i]->active_at = mr->clock;
        }
    }
}

/* A request to or from a peer with no plane up fails at once (a receive only once nothing
 * held from that peer completes it). */
static void fail_if_unreachable(dr_mr_t *mr, Peer *p, Req *r)
{
    if (!r->complete && mr->live_planes(p) == 0) {
        unreachable(mr, p, r);
    }
}

extern "C" dr_status_t dr_mr_isend(dr_mr_t *mr, uint32_t peer, uint64_t key, const void *buf,
                                   size_t len, dr_mr_req_t **req)
{
    if (req == nullptr) {
        return DR_ERR_INVALID;
    }
    Guard g(mr);
    Peer *p;
    Req *r;
    try {
        if (mr != nullptr && len <= kFlatBytes && len <= mr->cfg.copy_max &&
            mr->cfg.copy_max != 0 && (buf != nullptr || len == 0)) {
            p = mr->peer_get(peer, false);
            if (p != nullptr && p->known && mr->flat_send(p, key, buf, len)) {
                *req = flat_handle(len);
                return DR_OK;
            }
        }
        dr_status_t st = req_new(mr, peer, key, const_cast<void *>(buf), len, true, &p, &r);
        if (st != DR_OK) {
            return st;
        }
        fail_if_unreachable(mr, p, r);
        if (!r->complete) {
            /* mr->clock (req_new) is what the plane that carries it is marked active with */
            if (len <= mr->cfg.copy_max && mr->cfg.copy_max != 0) {
                /* Small: complete for the caller now; the copy is what a failover re-sends.
                 * assign() reuses the request's capacity: no allocation once warm. An empty
                 * message has nothing to copy and is complete now too (it waited for the
                 * peer's acknowledgement, a round trip, against what dr_mr_isend says). */
                if (len != 0) {
                    const char *b = static_cast<const char *>(buf);
                    r->copy.assign(b, b + len);
                    r->buf = r->copy.data();
                }
                r->copied = true;
            }
            r->msg_id = p->next_msg_id++;
            if (p->next_msg_id == 0) {
                p->next_msg_id = 1; /* 0 means "no acknowledgement" in a data header */
            }
            p->sends.push_back(r);
            r->listed = true;
            mr->activate(p);
            if (mr->send_start(p, r) != DR_OK) {
                r->status = DR_ERR_PEER_UNREACHABLE;
            }
        }
    } catch (const std::bad_alloc &) {
        return DR_ERR_NO_MEMORY;
    }
    *req = static_cast<dr_mr_req_t *>(r);
    return DR_OK;
}

extern "C" dr_status_t dr_mr_irecv(dr_mr_t *mr, uint32_t peer, uint64_t key, void *buf,
                                   size_t capacity, dr_mr_req_t **req)
{
    if (req == nullptr) {
        return DR_ERR_INVALID;
    }
    Guard g(mr);
    Peer *p;
    Req *r;
    try {
        dr_status_t st = req_new(mr, peer, key, buf, capacity, false, &p, &r);
        if (st != DR_OK) {
            return st;
        }
        if (!r->complete) {
            /* Poll where the message will come (dr_mr_progress): a small one on the
             * plane the peer's small messages came on (its choice: Peer::small_rx) and on
             * ours, a longer one possibly on every plane. Left cold, the peer's plane was
             * polled by one progress call in 8 only (the turn of that time; now once per
             * kColdPollUs): after a pause of more than kHotUs (an application computing
             * between two small allreduces) the message waited that many calls, each a
             * wait for the scheduler on a busy core. */
            keep_polled(mr, p, capacity);
            if (!p->unexpected.empty()) {
                mr->recv_match_unexpected(p, r);
            }
            /* After the match: a message held here (arrived whole, acknowledged) is the
             * receiver's even when its sender has gone since (dr_mr_destroy's goodbye). */
            fail_if_unreachable(mr, p, r);
            if (!r->complete) {
                p->recvs.push_back(r);
                r->listed = true;
                mr->activate(p);
            }
            if (!mr->ctrl.empty()) {
                mr->ctrl_flush(); /* the ack of a message that was already all here */
            }
        }
    } catch (const std::bad_alloc &) {
        return DR_ERR_NO_MEMORY;
    }
    *req = static_cast<dr_mr_req_t *>(r);
    return DR_OK;
}

extern "C" size_t dr_mr_take_max(const dr_mr_t *mr)
{
    /* the settings are fixed at dr_mr_create, so no lock */
    return mr == nullptr ? 0 : std::min<uint64_t>(DR_MR_TAKE_MAX, mr->whole_max());
}

/* dr_mr_take's search: DR_OK when the oldest message held under key from p was taken into
 * buf; *found: whether any message is held under key. */
static dr_status_t take_held(dr_mr_t *mr, Peer *p, uint64_t key, void *buf, size_t capacity,
                             size_t *len, bool *found)
{
    for (size_t i = 0; i < p->unexpected.size(); ++i) {
        Unexpected &u = p->unexpected[i];
        if (u.key != key) {
            continue;
        }
        *found = true;
        if (u.offset != 0 || u.length != u.total || u.total > capacity) {
            return DR_INPROGRESS; /* in pieces, or truncated: a posted receive's to report */
        }
        if (u.length != 0) {
            memcpy(buf, u.bytes(), u.length);
        }
        *len = u.length;
        p->message_done(mr->clock);
        mr->done_add(p, key, u.msg_id);
        if (u.data != nullptr) {
            mr->unexpected_release(u); /* not held inline */
        }
        if (i + 1 == p->unexpected.size()) {
            p->unexpected.pop_back(); /* the newest: nearly always the only one */
        } else {
            p->unexpected.erase(p->unexpected.begin() + (long)i);
        }
        ++mr->work.takes;
        return DR_OK;
    }
    *found = false;
    return DR_INPROGRESS;
}

/* A take that found nothing: keep the plane the message comes on polled, as a posted
 * receive does (dr_mr_irecv), from the time of the last progress call. A waiter calls this
 * between its polls: when the plane the peer's small messages come on is hot already, there
 * is nothing to do. */
static void take_keep_polled(dr_mr_t *mr, const Peer *p, size_t capacity)
{
    if (capacity <= mr->cfg.min_stripe && p->small_rx >= 0 &&
        mr->clock - mr->planes[(size_t)p->small_rx]->active_at < kHotUs / 2) {
        return;
    }
    keep_polled(mr, p, capacity);
}

/* dr_mr_take (wait false) and dr_mr_take_wait (true). dr_mr_take does what dr_mr_irecv's
 * match of a held message does, without the request: the message is the oldest held under
 * the key, arrived whole (so acknowledged already, on_am), and is entered in the done ring,
 * which drops a copy of it arriving later. dr_mr_take_wait also arms the peer's TakeWait
 * when nothing is held under the key, so that on_am copies the message into buf on
 * arrival: a copy into a held slot, its search and removal fewer on the path from the
 * message's arrival to the waiter's return. */
static dr_status_t take(dr_mr_t *mr, uint32_t peer, uint64_t key, void *buf, size_t capacity,
                        size_t *len, bool wait)
{
    if (mr == nullptr || len == nullptr || (buf == nullptr && capacity != 0)) {
        return DR_ERR_INVALID;
    }
    Guard g(mr);
    Peer *p = mr->peer_get(peer, false);
    if (p == nullptr || !p->known) {
        return no_address(mr, peer);
    }
    Peer::TakeWait &w = p->tw;
    const bool mine = wait && w.armed && w.key == key && w.buf == buf;
    if (mine && w.landed) {
        *len = w.len;
        w = Peer::TakeWait{};
        ++mr->work.takes;
        return DR_OK;
    }
    bool found;
    if (take_held(mr, p, key, buf, capacity, len, &found) == DR_OK) {
        if (mine) {
            w = Peer::TakeWait{}; /* held after all (it cannot land while one is held) */
        }
        return DR_OK;
    }
    if (found) {
        return DR_INPROGRESS; /* in pieces or too large: a posted receive's */
    }
    if (wait && !w.armed) {
        w.key = key;
        w.buf = static_cast<char *>(buf);
        w.capacity = capacity;
        w.len = 0;
        w.landed = false;
        w.armed = true;
    }
    take_keep_polled(mr, p, capacity);
    return DR_INPROGRESS;
}

extern "C" dr_status_t dr_mr_take(dr_mr_t *mr, uint32_t peer, uint64_t key, void *buf,
                                  size_t capacity, size_t *len)
{
    return take(mr, peer, key, buf, capacity, len, false);
}

extern "C" dr_status_t dr_mr_take_wait(dr_mr_t *mr, uint32_t peer, uint64_t key, void *buf,
                                       size_t capacity, size_t *len)
{
    return take(mr, peer, key, buf, capacity, len, true);
}

extern "C" dr_status_t dr_mr_take_cancel(dr_mr_t *mr, uint32_t peer, uint64_t key, const void *buf,
                                         size_t *len)
{
    if (mr == nullptr || len == nullptr) {
        return DR_ERR_INVALID;
    }
    Guard g(mr);
    Peer *p = mr->peer_get(peer, false);
    if (p == nullptr || !p->tw.armed || p->tw.key != key || p->tw.buf != buf) {
        return DR_INPROGRESS;
    }
    const bool landed = p->tw.landed;
    if (landed) {
        *len = p->tw.len;
        ++mr->work.takes;
    }
    p->tw = Peer::TakeWait{};
    return landed ? DR_OK : DR_INPROGRESS;
}
