/*
 * ucx_mr's flat sends (FlatSend, mr_internal.hpp): a copied small send that goes straight
 * out on an idle link keeps its copy in its peer's ring instead of a request, its
 * acknowledgement finds it by index, and a plane declared down turns the ring's
 * unacknowledged sends into requests for the general re-routing (mr_health.cc). A flat
 * send, as any whole message of up to kTagWholeMax bytes, travels as a UCP tag message
 * (kWholeTag, mr_internal.hpp), which mr_tag.cc receives.
 */
#include <cstring>

#include "mr_internal.hpp"

namespace dualrail {
namespace mr {

bool Mr::flat_send(Peer *p, uint64_t key, const void *buf, size_t len)
{
    /* send_start's straight-out case: the link small messages to p take, ready now. */
    const int i = small_plane(p);
    Link *l = p->links[i].get();
    if (!straight_out(l)) {
        return false;
    }
    if (!p->flat) {
        p->flat.reset(new FlatSend[kFlatSlots]);
    }
    const uint32_t id = p->next_msg_id;
    FlatSend &f = p->flat[id % kFlatSlots];
    if (!f.free()) {
        return false; /* the peer has not acknowledged the send kFlatSlots before this one */
    }
    if (len > kFlatInline && (f.block = block_get()) == nullptr) {
        return false; /* out of memory: the general path reports it */
    }
    if (p->sends.empty() && p->recvs.empty() && p->flat_live == 0) {
        /* idle until now: the watchdog's start of this peer's wait (as req_new) */
        clock = now_us();
        p->busy_since = clock;
    }
    p->next_msg_id = id + 1 != 0 ? id + 1 : 1; /* 0 means "no acknowledgement" in a header */
    f.msg_id = id;
    f.live = true;
    f.plane = (uint8_t)i;
    f.len = (uint32_t)len;
    f.key = key;
    if (len != 0) {
        memcpy(f.data(), buf, len);
    }
    ++p->flat_live;
    ++work.flat_sends;
    activate(p);
    Op *op = op_get();
    op->flat = &f;
    ++f.ops;
    post_data(l, op, id, key, len, 0, f.data(), len);
    return true;
}

bool Mr::flat_ack(Peer *p, uint32_t msg_id, uint64_t now, bool live)
{
    if (p->flat_live == 0) {
        return false; /* the common case for a general send's: no slot to look at */
    }
    FlatSend &f = p->flat[msg_id % kFlatSlots];
    if (!f.live || f.msg_id != msg_id) {
        return false;
    }
    /* Nobody waits for it (no `finished`): its caller had it complete when posted. */
    f.live = false;
    --p->flat_live;
    flat_settle(f);
    if (live) {
        note_progress(p->links[f.plane].get(), now); /* ack_progress: its one plane */
    }
    p->message_done(now);
    return true;
}

void Mr::flat_to_reqs(Peer *p)
{
    /* Oldest first: the slot after the newest message's, round the ring. */
    for (uint32_t k = 1; k <= kFlatSlots && p->flat_live != 0; ++k) {
        FlatSend &f = p->flat[(p->next_msg_id + k - 1) % kFlatSlots];
        if (!f.live) {
            continue;
        }
        Req *r = req_get();
        r->is_send = true;
        r->peer = p->id;
        r->key = f.key;
        r->msg_id = f.msg_id;
        r->copy.assign(f.data(), f.data() + f.len);
        r->buf = r->copy.data();
        r->len = f.len;
        r->copied = true;
        r->released = true; /* its caller has a flat handle, never this request */
        r->segs.push_back(Seg{0, f.len, f.plane, 0});
        r->listed = true;
        p->sends.push_back(r);
        f.live = false; /* the slot stays held while UCX reads it (ops) */
        --p->flat_live;
        flat_settle(f);
    }
}

} // namespace mr
} // namespace dualrail
