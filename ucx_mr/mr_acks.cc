/*
 * ucx_mr acknowledgements and control messages: what a receiver owes for each message
 * (owed acknowledgements of small messages, ridden on data segments or packed into
 * kAck messages, see kAckDelayUs and AckList), what a sender does with one that comes
 * back (on_ack, and for those a data segment carries, ack_in: applied at the next
 * progress call), and the queue of control messages (acknowledgements, pings, pongs,
 * plane-down notices, goodbyes) that progress sends.
 */

#include "mr_internal.hpp"

namespace dualrail {
namespace mr {

void Mr::ctrl_post(Link *l, MsgType type, uint64_t key, uint32_t msg_id, uint32_t aux,
                   uint64_t total)
{
    if (type == kAck && aux == 0 && total == 0 && !ctrl.empty()) {
        /* A plain acknowledgement joins the one queued just before it for the same link
         * (ack_flush queues a peer's in a row): one message carries them all. Timed ones
         * (ack_post: spans in aux, total, offset) go alone. */
        Ctrl &c = ctrl.back();
        if (c.link == l && c.hdr.type == kAck && c.hdr.aux == 0 && c.hdr.total == 0 &&
            c.acks.n < kAckList) {
            c.acks.id[c.acks.n++] = msg_id;
            return;
        }
    }
    ctrl.push_back(
        Ctrl{l, WireHdr{type, (uint8_t)l->plane, kWireVersion, self, msg_id, aux, key, total, 0},
             AckList{}});
}

void Mr::ctrl_flush()
{
    /* Sending can complete inline and never re-enters ctrl_post, so the index loop is safe.
     * A message whose endpoint waits (ep_ensure) is kept, in order, for the next flush. */
    size_t kept = 0;
    for (size_t i = 0; i < ctrl.size(); ++i) {
        Link *l = ctrl[i].link;
        const WireHdr &h = ctrl[i].hdr;
        if (h.type != kBye && peers[l->peer]->gone) {
            continue; /* the peer has left: talking to it only makes UCX reconnect */
        }
        if (h.type == kAck && l->state != DR_LINK_UP) {
            /* The arrival plane died: acknowledge on any live plane instead. */
            Peer *p = peer_get(l->peer, false);
            Link *alt = nullptr;
            for (size_t k = 0; k < planes.size(); ++k) {
                if (p->links[k]->state == DR_LINK_UP) {
                    alt = p->links[k].get();
                    break;
                }
            }
            if (alt == nullptr) {
                continue;
            }
            l = alt;
        }
        const dr_status_t es = ep_ensure(l);
        if (es == DR_INPROGRESS) {
            ctrl[kept++] = ctrl[i];
            continue;
        }
        if (es != DR_OK) {
            continue; /* pongs on a dead plane are simply not answered */
        }
        if (h.type == kAck) {
            ++planes[l->plane]->stats.tx_acks;
        }
        Op *op = op_get();
        op->data = false;
        op->link = l;
        op->link_gen = l->gen;
        op->hdr = h;
        op->hdr.plane = (uint8_t)l->plane;
        op->acks = ctrl[i].acks;
        post_am(op, l, nullptr, 0);
    }
    ctrl.resize(kept);
}

void Mr::ack(Peer *p, uint64_t key, uint32_t msg_id, uint64_t total, int plane, const Req *r)
{
    /* Only the messages a sender copies (dr_mr_isend) may wait: a longer send completes
     * for its caller when this arrives, and carries the delivery spans the sender's
     * weights learn from (ack_post, mr_weights.cc). */
    if (total == 0 || total > cfg.copy_max) {
        if (r != nullptr) {
            ack_post(p->links[plane].get(), r);
        } else {
            ctrl_post(p->links[plane].get(), kAck, key, msg_id, 0, 0);
        }
        return;
    }
    if (p->owed_count == kOwedMax) {
        owed_send(p); /* all of them, in as few messages as AckList allows */
    }
    p->owed[(p->owed_head + p->owed_count) % kOwedMax] = Owed{key, msg_id, plane, clock};
    ++p->owed_count;
    ++owed_total;
    activate(p);
}

/* Every acknowledgement owed to p, queued in a row so that ctrl_post packs those of one
 * plane into as few kAck messages as AckList allows; each goes on the plane its message
 * completed on (see send_data). */
void Mr::owed_send(Peer *p)
{
    while (p->owed_count != 0) {
        const Owed o = owed_pop(p);
        ctrl_post(p->links[o.plane].get(), kAck, o.key, o.msg_id, 0, 0);
    }
}

/* The oldest acknowledgement owed to p (p->owed_count != 0), taken off its ring. */
Owed Mr::owed_pop(Peer *p)
{
    const Owed o = p->owed[p->owed_head];
    p->owed_head = (p->owed_head + 1) % kOwedMax;
    --p->owed_count;
    --owed_total;
    return o;
}

void Mr::ack_flush(bool all, uint64_t now)
{
    /* A peer owed anything is active (ack()). */
    for (size_t pi = 0; pi < active.size() && owed_total != 0; ++pi) {
        Peer *p = active[pi];
        ++work.peer_visits;
        /* The ring is in arrival order: once its oldest is due, the younger ones go in the
         * same messages (they would be due one by one, a message each, while the peer keeps
         * sending more than it receives). */
        if (p->owed_count != 0 && (all || now - p->owed[p->owed_head].since >= kAckDelayUs)) {
            owed_send(p);
        }
    }
}

/*
 * An acknowledgement carried by a data segment is for a copied send, complete for its caller
 * already: applying it (the send's lookup, its planes' liveness, its recycling) can wait for
 * the next progress call. Applied where the segment arrives, it ran between the arrival of
 * the data a waiter wants and that waiter's return: in a 2-rank exchange each call's arrival
 * carries the acknowledgement of the previous call's send. (A flat send's is applied where
 * it arrives, in on_am: its slot is found by index and there is nothing else to do.)
 */
void Mr::ack_in(Peer *p, uint32_t msg_id)
{
    if (p->acks_in_n == sizeof(p->acks_in) / sizeof(p->acks_in[0])) {
        acks_in_apply(p);
    }
    if (p->acks_in_n == 0) {
        p->acks_in_at = clock;
    }
    p->acks_in[p->acks_in_n++] = msg_id;
    ++acks_in_total;
    activate(p);
}

void Mr::acks_in_apply(Peer *p)
{
    /* Without the liveness an acknowledgement proves (ack_progress): a copied send is one
     * segment, and its acknowledgement rides back on the plane that segment completed on,
     * which the carrying segment's own arrival noted then (on_am). Noted now, it would be
     * old news that could answer a ping sent after it came. */
    for (uint32_t i = 0; i < p->acks_in_n; ++i) {
        on_ack(p, p->acks_in[i], p->acks_in_at, nullptr, false);
    }
    acks_in_total -= p->acks_in_n;
    p->acks_in_n = 0;
}

void Mr::acks_in_apply_all()
{
    for (size_t pi = 0; pi < active.size() && acks_in_total != 0; ++pi) {
        if (active[pi]->acks_in_n != 0) {
            acks_in_apply(active[pi]);
        }
    }
}

void Mr::on_ack(Peer *p, uint32_t msg_id, uint64_t now, const WireHdr *h, bool live)
{
    /* msg_id alone names the message: it is unique per direction (never 0). */
    if (flat_ack(p, msg_id, now, live)) {
        return;
    }
    for (Req *r : p->sends) {
        if (r->msg_id == msg_id) {
            if (!r->acked) {
                ++finished;
                if (live) {
                    ack_progress(p, r, now);
                }
                if (h != nullptr) {
                    weights_on_ack(p, r, *h);
                }
            }
            r->acked = true;
            p->message_done(now);
            return;
        }
    }
}

} // namespace mr
} // namespace dualrail
