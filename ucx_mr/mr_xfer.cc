/*
 * ucx_mr data path: striping, segment issue with a per-link window, the
 * receiver's placement and duplicate filter (acknowledgements: mr_acks.cc; the
 * posting calls: mr_post.cc; small sends without a request: mr_flat.cc).
 *
 * A send of len bytes to a peer with live planes P:
 *
 *   stripes   dr_stripe_split(len, weights of P)      one contiguous stripe per plane
 *   segments  each stripe cut in segment_size pieces  queued on the stripe's link
 *   issue     at most `window` segments per link in UCX at a time
 *   receive   each segment placed by offset; a range already held is a duplicate
 *   ack       one kAck per message once every byte is in
 *   complete  ack seen and no UCX operation still reads the buffer
 *
 * A segment is only ever re-sent whole (same offset and length), so the
 * receiver's ranges never overlap partially.
 */

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "mr_internal.hpp"

namespace dualrail {
namespace mr {

/* UCX clears a request's callback when it is freed early, so the request is
 * kept until here and freed by its own callback. */
static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    Op *op = static_cast<Op *>(user_data);
    op->link->mr->on_op_done(op, status);
    ucp_request_free(request);
}

dr_status_t Mr::send_start(Peer *p, Req *r)
{
    if (r->len != 0 && r->len <= whole_max()) {
        /* A whole small message on an idle link goes straight out: the split below would
         * give it whole to the same plane (dr_stripe_split's small case), and the queue
         * and issue() would hand it over unchanged; skipping them is a fifth of the
         * transport's share of an 8-byte allreduce. */
        const int i = small_plane(p);
        Link *l = p->links[i].get();
        if (straight_out(l)) {
            r->segs.push_back(Seg{0, r->len, i, 0});
            send_data(l, r, 0);
            return DR_OK;
        }
    }
    const int n = (int)planes.size();
    uint32_t w[DR_MAX_PLANES] = {0};
    for (int i = 0; i < n; ++i) {
        w[i] = p->links[i]->state == DR_LINK_UP ? p->links[i]->weight : 0;
    }
    dr_extent_t ext[DR_MAX_PLANES];
    /* A whole small message keeps to one plane (small_plane: the cold planes need no
     * polling, and it never queues behind a slow plane's stripes). */
    const int first = r->len <= cfg.min_stripe ? small_plane(p) : (int)(p->rr++ % n);
    int used = dr_stripe_split(r->len, w, n, kStripeAlign, cfg.min_stripe, first, ext);
    if (used < 0) {
        /* Every live plane has weight 0: fall back to equal weights on the live ones. */
        for (int i = 0; i < n; ++i) {
            w[i] = p->links[i]->state == DR_LINK_UP;
        }
        used = dr_stripe_split(r->len, w, n, kStripeAlign, cfg.min_stripe, (int)(p->rr % n), ext);
        if (used < 0) {
            return DR_ERR_PEER_UNREACHABLE;
        }
    }
    if (used == 0) {
        /* An empty message still travels, as one empty segment, so the receiver completes:
         * on the small-message plane, as any whole small message (a barrier's empty
         * messages then keep the other planes cold and show a following peer the plane,
         * see small_plane). */
        int plane = w[first] != 0 ? first : 0;
        for (int k = 0; w[plane] == 0 && k < n; ++k) {
            int i = (int)((p->rr + (uint32_t)k) % (uint32_t)n);
            if (w[i] != 0) {
                plane = i;
                break;
            }
        }
        r->segs.push_back(Seg{0, 0, plane, 0});
    }
    for (int i = 0; i < n; ++i) {
        for (uint64_t off = 0; off < ext[i].length; off += cfg.segment_size) {
            uint64_t l = std::min<uint64_t>(cfg.segment_size, ext[i].length - off);
            r->segs.push_back(Seg{ext[i].offset + off, l, i, 0});
        }
    }
    for (uint32_t s = 0; s < r->segs.size(); ++s) {
        p->links[r->segs[s].plane]->queue.push(SegRef{r, r->gen, s, 0});
    }
    for (int i = 0; i < n; ++i) {
        if (!p->links[i]->queue.empty()) {
            issue(p->links[i].get());
        }
    }
    return DR_OK;
}

/*
 * The plane whole small messages to p take (the stripe split moves on to the next live
 * plane when it is down): the first plane of the highest weight, so that they keep to one
 * plane, the others go cold (kColdPollUs), and they never queue behind a slow plane's
 * stripes. Planes within 80% of the best weight count as equal, so that small
 * fluctuations of learned weights do not move them back and forth.
 *
 * Each end weighs its planes from its own sends, so the two ends of a pair can choose
 * differently (a plane slower one way, fixed weights set per side): an exchange's two
 * messages then travel on two connections, each carrying data one way only (neither
 * connection's TCP acknowledgement rides on the reply: raw UCP measured 25.3 against
 * 20.2 us at 8 B, ucx_mr alone 1.05x the one-plane exchange: perf/small_plane.sh), and both
 * planes stay hot on both ends. So the end with the higher id follows the other:
 * it sends on the plane the peer's last small message came on (Peer::small_rx) while its
 * own link there is up and carries weight, and chooses by its weights only otherwise
 * (nothing from the peer yet, or that plane idle or down on its side).
 */
int Mr::small_plane_choose(const Peer *p) const
{
    if (self > p->id && p->small_rx >= 0 && (size_t)p->small_rx < planes.size()) {
        const Link *l = p->links[p->small_rx].get();
        if (l->state == DR_LINK_UP && l->weight != 0) {
            return p->small_rx;
        }
    }
    uint32_t best = 0;
    for (size_t i = 0; i < planes.size(); ++i) {
        const Link *l = p->links[i].get();
        if (l->state == DR_LINK_UP && l->weight > best) {
            best = l->weight;
        }
    }
    for (size_t i = 0; i < planes.size(); ++i) {
        const Link *l = p->links[i].get();
        if (l->state == DR_LINK_UP && (uint64_t)l->weight * 5 >= (uint64_t)best * 4) {
            return (int)i;
        }
    }
    return 0;
}

/* Hand op (its header) and len bytes of data to UCX on l's endpoint, eager only. */
void Mr::post_am(Op *op, Link *l, const void *data, uint64_t len)
{
    /* UCX reads only the fields op_attr_mask names: no memset of the whole structure. */
    ucp_request_param_t param;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_FLAGS;
    /* Eager only: the receiver copies out in the callback, so no UCX operation ever
     * writes into a receive buffer that we might have completed from another plane. */
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    param.cb.send = send_cb;
    param.user_data = op;
    post_result(op, l,
                ucp_am_send_nbx(l->ep, kAmId, &op->hdr, op->header_len(), data, len, &param));
}

/* op's header before the len bytes of data at wire + sizeof(WireHdr), its acknowledgements
 * after them (kWholeTag's layout); the message's length. */
static size_t frame_tagged(char *wire, const Op *op, uint64_t len)
{
    const size_t acks = sizeof(uint32_t) * op->acks.n;
    memcpy(wire, &op->hdr, sizeof(WireHdr));
    memcpy(wire + sizeof(WireHdr) + len, op->acks.id, acks);
    return sizeof(WireHdr) + len + acks;
}

void Mr::post_flat(Op *op, Link *l, uint64_t len)
{
    char *wire = op->flat->wire();
    const size_t n = frame_tagged(wire, op, len);
    if (lane_send(l, wire, n)) {
        post_result(op, l, nullptr); /* the kernel has it: done, as UCP's immediate send */
        return;
    }
    ucp_request_param_t param;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = send_cb;
    param.user_data = op;
    post_result(op, l, ucp_tag_send_nbx(l->ep, wire, n, kWholeTag, &param));
}

bool Mr::post_whole(Op *op, Link *l, const char *data, uint64_t len)
{
    memcpy(tag_out + sizeof(WireHdr), data, len);
    const size_t n = frame_tagged(tag_out, op, len);
    /* At once or not at all: tag_out is reused by the next send. */
    ucp_request_param_t param;
    param.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    ucs_status_ptr_t sp = ucp_tag_send_nbx(l->ep, tag_out, n, kWholeTag, &param);
    if (UCS_PTR_IS_ERR(sp) && UCS_PTR_STATUS(sp) == UCS_ERR_NO_RESOURCE) {
        return false;
    }
    post_result(op, l, sp);
    return true;
}

void Mr::post_result(Op *op, Link *l, ucs_status_ptr_t sp)
{
    Plane *pl = planes[l->plane].get();
    pl->active_at = clock;
    if (sp == nullptr) {
        on_op_done(op, UCS_OK);
    } else if (UCS_PTR_IS_ERR(sp)) {
        on_op_done(op, UCS_PTR_STATUS(sp));
    } else {
        op->counted = true; /* UCX holds it: its plane is polled until it completes */
        ++pl->ops_out;
    }
}

void Mr::issue(Link *l)
{
    while (l->state == DR_LINK_UP && l->inflight < cfg.window && !l->queue.empty()) {
        const dr_status_t es = ep_ensure(l);
        if (es == DR_INPROGRESS) {
            return; /* progress issues the queue again (dr_mr_progress) */
        }
        if (es != DR_OK) {
            if (l->ep == nullptr) {
                l->ep_failed = true; /* handled as a plane failure in handle_deferred() */
                deferred = true;
            }
            return;
        }
        SegRef ref = l->queue.pop();
        Req *r = ref.req;
        if (!r->in_use || r->gen != ref.req_gen || r->complete || r->acked ||
            r->status != DR_OK || ref.seg >= r->segs.size()) {
            continue; /* the message finished or failed meanwhile */
        }
        const Seg &s = r->segs[ref.seg];
        if (s.plane != l->plane || s.attempt != ref.attempt) {
            continue; /* moved to another plane since it was queued */
        }
        send_data(l, r, ref.seg);
    }
}

void Mr::send_data(Link *l, Req *r, uint32_t seg)
{
    const Seg &s = r->segs[seg];
    Op *op = op_get();
    op->req = r;
    op->req_gen = r->gen;
    ++r->ops;
    post_data(l, op, r->msg_id, r->key, r->len, s.offset, r->buf + s.offset, s.length);
}

void Mr::post_data(Link *l, Op *op, uint32_t msg_id, uint64_t key, uint64_t total, uint64_t offset,
                   const char *data, uint64_t len)
{
    op->data = true;
    op->link = l;
    op->link_gen = l->gen;
    /* Carry the acknowledgements owed to this peer (see kAckDelayUs), oldest first, while
     * they are for messages that came on this plane: one in aux, up to kAckList more after
     * the header (AckList). An ack then travels where its message did, so should the
     * segment be lost with its plane, the peer, declaring that plane down, re-sends the
     * message and draws a fresh ack (mr_health.cc, declare_down). */
    Peer *p = peers[l->peer].get();
    uint32_t ack_id = 0;
    op->acks.n = 0;
    if (p->owed_count != 0 && p->owed[p->owed_head].plane == l->plane) {
        ack_id = owed_pop(p).msg_id;
        while (p->owed_count != 0 && op->acks.n < kAckList &&
               p->owed[p->owed_head].plane == l->plane) {
            op->acks.id[op->acks.n++] = owed_pop(p).msg_id;
        }
        planes[l->plane]->stats.piggybacked_acks += 1 + op->acks.n;
    }
    op->hdr =
        WireHdr{kData, (uint8_t)l->plane, kWireVersion, self, msg_id, ack_id, key, total, offset};
    ++l->inflight;
    Plane *pl = planes[l->plane].get();
    pl->stats.tx_bytes += len;
    ++pl->stats.tx_segments;
    if (op->flat != nullptr) {
        post_flat(op, l, len); /* data is the flat send's own wire (kWholeTag) */
    } else if (offset == 0 && len == total && lane_send_whole(l, op, data, len)) {
        post_result(op, l, nullptr); /* the kernel has it (the direct lane, mr_lane.cc) */
    } else if (offset != 0 || len != total || len > kTagWholeMax || !post_whole(op, l, data, len)) {
        post_am(op, l, data, len);
    }
}

void Mr::on_op_done(Op *op, ucs_status_t status)
{
    Link *l = op->link;
    if (op->counted && planes[l->plane]->ops_out > 0) {
        --planes[l->plane]->ops_out;
    }
    const bool current = op->link_gen == l->gen;
    if (op->data) {
        if (current && l->inflight > 0) {
            --l->inflight;
        }
        if (op->flat != nullptr) {
            if (op->flat->ops > 0) {
                --op->flat->ops;
            }
            flat_settle(*op->flat);
        } else if (op->req->gen == op->req_gen && op->req->ops > 0) {
            --op->req->ops;
        }
    }
    if (current) {
        /* A data segment leaving the host means the plane drains (a slow plane keeps
         * doing so); a ping leaving it proves nothing, only its pong does. */
        if (status == UCS_OK) {
            if (op->data) {
                note_progress(l, clock);
            }
        } else if (status != UCS_ERR_CANCELED) {
            l->ep_failed = true;
            l->ep_status = status;
            deferred = true;
        }
    }
    op_put(op);
}

bool Mr::done_seen(const Peer *p, uint64_t key, uint32_t msg_id) const
{
    for (const Done &d : p->done) {
        if (d.valid && d.key == key && d.msg_id == msg_id) {
            return true;
        }
    }
    return false;
}

void Mr::done_add(Peer *p, uint64_t key, uint32_t msg_id)
{
    p->done[p->done_pos] = Done{key, msg_id, true};
    p->done_pos = (p->done_pos + 1) % p->done.size();
}

/* Insert [off, off+len) into the sorted range list; false when it was already held. */
static bool ranges_add(std::vector<dr_extent_t> &got, uint64_t off, uint64_t len)
{
    if (got.empty()) {
        got.push_back(dr_extent_t{off, len}); /* a message's first segment: most are whole */
        return true;
    }
    auto it = std::lower_bound(got.begin(), got.end(), off,
                               [](const dr_extent_t &e, uint64_t o) { return e.offset + e.length <= o; });
    if (it != got.end() && it->offset <= off && off + len <= it->offset + it->length) {
        return false;
    }
    it = got.insert(it, dr_extent_t{off, len});
    /* Merge with neighbours that touch, so the list stays short. */
    if (it != got.begin()) {
        auto prev = it - 1;
        if (prev->offset + prev->length == it->offset) {
            prev->length += it->length;
            it = got.erase(it) - 1;
        }
    }
    auto next = it + 1;
    if (next != got.end() && it->offset + it->length == next->offset) {
        it->length += next->length;
        got.erase(next);
    }
    return true;
}

void Mr::deliver(Peer *p, Req *r, const WireHdr &h, const void *data, uint64_t len, int plane,
                 uint64_t at, bool acked)
{
    if (!r->bound && h.offset == 0 && len == h.total && len != 0 && len <= cfg.copy_max &&
        len <= r->len) {
        /* A small message whole in one segment, its receive fresh: complete at once. It
         * needs no range list (a copy of it arriving later finds it in the done ring) and
         * no arrival times (only the acknowledgement of a message above copy_max carries
         * delivery spans, ack_post). */
        r->bound = true;
        r->msg_id = h.msg_id;
        r->total = len;
        memcpy(r->buf, data, len);
        r->received = len;
        r->last_plane = plane;
        finish_recv(p, r, plane, acked);
        return;
    }
    if (!r->bound) {
        r->bound = true;
        r->timing = RecvTiming{};
        r->msg_id = h.msg_id;
        r->total = h.total;
        if (h.total > r->len) {
            r->status = DR_ERR_TRUNCATED;
            last_error = "message " + std::to_string(h.key) + " from peer " +
                         std::to_string(p->id) + " has " + std::to_string(h.total) +
                         " bytes, the receive buffer " + std::to_string(r->len);
        }
    }
    if (h.offset > r->total || len > r->total - h.offset) {
        return; /* malformed: outside the message */
    }
    if (len == 0 && r->total != 0) {
        return;
    }
    if (len != 0 && !ranges_add(r->got, h.offset, len)) {
        ++planes[plane]->stats.duplicates;
        return;
    }
    if (r->status == DR_OK && len != 0) {
        memcpy(r->buf + h.offset, data, len);
    }
    r->received += len;
    r->last_plane = plane;
    timing_note(r->timing, plane, len, at);
    if (r->received == r->total) {
        finish_recv(p, r, plane, acked);
    }
}

void Mr::finish_recv(Peer *p, Req *r, int plane, bool acked)
{
    r->complete = true;
    ++finished;
    p->message_done(clock);
    done_add(p, r->key, r->msg_id);
    if (!acked) {
        ack(p, r->key, r->msg_id, r->total, plane, r);
    }
}

void Mr::unexpected_release(Unexpected &u)
{
    if (u.ucx_owned) {
        ucp_am_data_release(planes[u.plane]->worker, u.data);
    } else if (u.pooled) {
        block_put(static_cast<char *>(u.data));
    } else {
        free(u.data);
    }
    u.data = nullptr;
    u.ucx_owned = false;
    u.pooled = false;
}

void Mr::recv_match_unexpected(Peer *p, Req *r)
{
    /* Bind to the oldest message under this key, then drain its segments. */
    for (size_t i = 0; i < p->unexpected.size() && !r->complete;) {
        Unexpected &u = p->unexpected[i];
        if (u.key != r->key || (r->bound && u.msg_id != r->msg_id)) {
            ++i;
            continue;
        }
        WireHdr h{kData, (uint8_t)u.plane, kWireVersion, p->id, u.msg_id, 0, u.key, u.total,
                  u.offset};
        /* A message that arrived whole was acknowledged then (on_am). */
        deliver(p, r, h, u.bytes(), u.length, u.plane, u.at, u.offset == 0 && u.length == u.total);
        unexpected_release(u);
        p->unexpected.erase(p->unexpected.begin() + (long)i);
    }
}

void Mr::on_am(Plane *pl, const WireHdr &h, const AckList &acks, void *data, size_t len,
               uint64_t recv_attr, ucs_status_t *ret)
{
    if (h.version != kWireVersion || h.plane != pl->index || h.src == self) {
        log(DR_LOG_WARN, "plane %d (%s): dropped a message from process %u sent on its plane %u "
            "(wire version %u): planes are mis-wired or mis-configured", pl->index,
            pl->device.c_str(), h.src, h.plane, h.version);
        return;
    }
    Peer *p = peer_get(h.src, true);
    Link *l = p->links[pl->index].get();
    const uint64_t now = clock;
    pl->active_at = now;
    if (h.type == kData && h.total <= cfg.min_stripe) {
        p->small_rx = pl->index;
    }
    /* Anything arriving shows the peer's direction works, except a ping: that is the peer
     * asking the same question. Counting it let two sides that both pinged a link whose
     * data went nowhere keep answering each other's doubt and never declare it down. */
    if (h.type != kPing) {
        note_progress(l, now);
    }
    switch (h.type) {
    case kData: {
        pl->stats.rx_bytes += len;
        ++pl->stats.rx_segments;
        /* A flat send's acknowledgement is applied here (a slot found by its index, nothing
         * else to do); any other waits for the next progress call (ack_in). */
        if (h.aux != 0 && !flat_ack(p, h.aux, now, false)) {
            ack_in(p, h.aux);
        }
        for (uint32_t i = 0; i < acks.n; ++i) {
            if (!flat_ack(p, acks.id[i], now, false)) {
                ack_in(p, acks.id[i]);
            }
        }
        /* A msg_id newer than any seen from the peer cannot be in the done ring: the common
         * case (a new message) skips the scan of the ring. */
        const bool newer = (int32_t)(h.msg_id - p->newest_msg) > 0;
        if (newer) {
            p->newest_msg = h.msg_id;
        }
        if (recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
            /* Senders force eager; a rendezvous descriptor means a foreign sender. */
            log(DR_LOG_WARN, "plane %d: dropped a rendezvous message from process %u", pl->index,
                h.src);
            return;
        }
        if (!newer && done_seen(p, h.key, h.msg_id)) {
            /* A re-sent segment of a message already complete: the ack may have been lost. */
            ++pl->stats.duplicates;
            ctrl_post(l, kAck, h.key, h.msg_id, 0, 0);
            return;
        }
        Req *target = nullptr;
        for (Req *r : p->recvs) {
            if (!r->complete && r->key == h.key && (!r->bound || r->msg_id == h.msg_id)) {
                target = r;
                break;
            }
        }
        if (target != nullptr) {
            deliver(p, target, h, data, len, pl->index, now);
            return;
        }
        /* A message that arrives whole (one segment) is acknowledged now, posted receive or
         * not: it is held here, so the sender may drop its copy (a copied send is complete
         * for its caller already, and a message nobody takes yet, such as an abort notice,
         * would otherwise keep the copy until the sender's teardown). */
        const bool whole = h.offset == 0 && len == h.total;
        bool held_key = false; /* a message under this key is held already */
        for (const Unexpected &u : p->unexpected) {
            if (u.key == h.key && u.msg_id == h.msg_id && u.offset == h.offset) {
                ++pl->stats.duplicates;
                if (whole) {
                    ctrl_post(l, kAck, h.key, h.msg_id, 0, 0); /* the first ack may be lost */
                }
                return;
            }
            held_key = held_key || u.key == h.key;
        }
        Peer::TakeWait &w = p->tw;
        if (whole && w.armed && !w.landed && w.key == h.key && len <= w.capacity && !held_key) {
            /* dr_mr_take_wait's waiter: into its buffer, received as dr_mr_take receives a
             * held message (an older one under the key would be taken first: none held) */
            if (len != 0) {
                memcpy(w.buf, data, len);
            }
            w.len = len;
            w.landed = true;
            p->message_done(now);
            done_add(p, h.key, h.msg_id);
            ack(p, h.key, h.msg_id, h.total, pl->index);
            ++work.landed;
            ++finished; /* progress returns to the waiter now */
            return;
        }
        p->unexpected.emplace_back(); /* not zeroed: `held` is written up to len below */
        Unexpected &u = p->unexpected.back();
        u.key = h.key;
        u.msg_id = h.msg_id;
        u.total = h.total;
        u.offset = h.offset;
        u.length = len;
        u.data = data;
        u.ucx_owned = false;
        u.pooled = false;
        u.plane = pl->index;
        u.at = now;
        if (recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) {
            u.ucx_owned = true;
            *ret = UCS_INPROGRESS; /* keep UCX's buffer until a receive claims it */
        } else if (len <= kUnexpectedInline) {
            u.data = nullptr;
            if (len != 0) {
                memcpy(u.held, data, len);
            }
        } else if (len <= kTagWholeMax && (u.data = block_get()) != nullptr) {
            u.pooled = true; /* a whole small message: dr_mr_take's, without an allocation */
            memcpy(u.data, data, len);
        } else {
            u.data = malloc(len);
            if (u.data == nullptr) {
                p->unexpected.pop_back();
                log(DR_LOG_WARN, "out of memory holding an early segment from process %u", h.src);
                return;
            }
            memcpy(u.data, data, len);
        }
        if (whole) {
            ack(p, h.key, h.msg_id, h.total, pl->index);
            /* As a receive completed (finish_recv): progress returns now, to a waiter that
             * takes it (dr_mr_take), instead of one more poll of every plane first. */
            ++finished;
        }
        return;
    }
    case kAck:
        on_ack(p, h.msg_id, now, &h);
        for (uint32_t i = 0; i < acks.n; ++i) {
            on_ack(p, acks.id[i], now, nullptr); /* a list holds plain acks only (ctrl_post) */
        }
        return;
    case kPing:
        /* A probe's answer carries our down count: what of our kDowns the prober has seen. */
        ctrl_post(l, kPong, h.total == 1 ? l->downs : 0, 0, h.aux, h.total);
        if (h.total == 1 && l->state == DR_LINK_DOWN && !l->probe_out) {
            l->next_probe = now; /* probed while down: probe back (mr_health.cc, probe_delay) */
        }
        return;
    case kPong:
        if (l->state == DR_LINK_DOWN && h.total == 1 && l->probe_out && h.aux == l->probe_id) {
            l->peer_downs = (uint32_t)std::max<uint64_t>(l->peer_downs, h.key);
            readmit(l);
        }
        return;
    case kDown: {
        /* aux names the plane the peer lost; this message came on a live one. A kDown whose
         * count the pong that re-admitted the link already carried is older than that pong
         * (the peer lost the plane, then answered our probe on it once it healed; the two
         * took different planes): taken, it downed the healed link again for a backoff. */
        Link *lost = h.aux < planes.size() ? p->links[h.aux].get() : nullptr;
        if (lost != nullptr && lost->state == DR_LINK_UP && h.key > lost->peer_downs) {
            lost->peer_downs = (uint32_t)h.key;
            lost->remote_down = true;
            deferred = true;
        } else if (lost != nullptr && lost->state == DR_LINK_UP) {
            log(DR_LOG_INFO,
                "peer %u plane %u: its notice of loss %llu came after the pong "
                "that re-admitted the plane (loss %u): ignored",
                p->id, h.aux, (unsigned long long)h.key, lost->peer_downs);
        }
        return;
    }
    case kBye:
        p->gone = true;
        return;
    default:
        return;
    }
}

void Mr::retire(Req *r)
{
    if (!r->listed) {
        return;
    }
    Peer *p = peer_get(r->peer, false);
    auto &v = r->is_send ? p->sends : p->recvs;
    if (!v.empty() && v.back() == r) {
        v.pop_back(); /* the newest: a call's last receive, or its only one */
    } else {
        auto it = std::find(v.begin(), v.end(), r);
        if (it != v.end()) {
            v.erase(it);
        }
    }
    r->listed = false;
}

void Mr::recycle(Req *r)
{
    retire(r);
    r->in_use = false;
    ++r->gen; /* queued segment references and UCX operations of this use go stale */
    free_reqs.push_back(r);
}

void Mr::drain_copies(uint64_t limit_us)
{
    /* Only the data path runs here: no watchdog and no failure handling, which would
     * declare planes down (and log it) while the process is leaving. A peer with no
     * usable plane is not waited for. */
    const uint64_t end = now_us() + limit_us;
    for (;;) {
        acks_in_apply_all();
        bool pending = false;
        for (size_t pi = 0; pi < peers.size() && !pending; ++pi) {
            const Peer *p = peers[pi].get();
            bool usable = false;
            for (size_t k = 0; p != nullptr && k < planes.size(); ++k) {
                usable = usable || (p->links[k]->state == DR_LINK_UP && !p->links[k]->ep_failed);
            }
            pending = usable && !p->gone && p->flat_live != 0;
            for (size_t i = 0; usable && !p->gone && !pending && i < p->sends.size(); ++i) {
                pending = p->sends[i]->copied && !p->sends[i]->complete;
            }
        }
        if (!pending || (clock = now_us()) >= end) {
            return;
        }
        for (auto &pl : planes) {
            poll(pl.get());
            lane_service(pl.get()); /* a held frame's rest, a peer's new lane */
        }
        ack_flush(true, clock); /* peers draining too wait for ours */
        ctrl_flush();
        for (size_t pi = 0; pi < peers.size(); ++pi) {
            Peer *p = peers[pi].get();
            for (size_t k = 0; p != nullptr && k < planes.size(); ++k) {
                if (!p->links[k]->queue.empty()) {
                    issue(p->links[k].get());
                }
            }
            if (p != nullptr) {
                sweep(p);
            }
        }
    }
}

void Mr::sweep(Peer *p)
{
    for (size_t i = 0; i < p->sends.size();) {
        Req *r = p->sends[i];
        if (!r->complete && r->ops == 0 && (r->acked || r->status != DR_OK)) {
            r->complete = true;
        }
        if (r->complete) {
            r->listed = false;
            p->sends.erase(p->sends.begin() + (long)i);
            if (r->released) {
                recycle(r); /* a copied send whose caller is done with it */
            }
        } else {
            ++i;
        }
    }
    for (size_t i = 0; i < p->recvs.size();) {
        Req *r = p->recvs[i];
        if (r->complete) {
            r->listed = false;
            p->recvs.erase(p->recvs.begin() + (long)i);
        } else {
            ++i;
        }
    }
}

} // namespace mr
} // namespace dualrail
