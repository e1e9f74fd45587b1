/*
 * ucx_mr's receive of whole messages (kWholeTag, mr_internal.hpp): every whole data
 * segment of up to kTagWholeMax bytes travels as one UCP tag message, and each plane keeps
 * one receive posted for them, into its tag_in buffer. UCP copies a message that finds the
 * receive posted straight into tag_in inside ucp_worker_progress; Mr::poll then hands it to
 * on_am as any data segment (the duplicate filter, acknowledgements and re-routing see no
 * difference) and posts the receive again at the plane's next poll.
 *
 * Why posted. Before the twenty-second round of issue 11 every such message went to UCP's
 * unexpected queue (a descriptor allocated, the message copied into it) and was taken out
 * after the poll with a probe and a message receive (a second copy, into tag_in): about
 * 280 instructions on the path from a message's arrival to its waiter's return, where an
 * expected message costs UCP its handler alone (perf/instr_count.sh; docs/small-messages.md,
 * Round 22). Posting the receive again is as costly as the probe was, but it runs at the
 * next poll: for a waiter, after its return and its next send.
 *
 * A message that comes while no receive is posted (a second one in the same poll, or one
 * between a completion and the next poll) waits in UCP's unexpected queue, where the next
 * post finds it at once (ucp_tag_recv_nbx completes from the queue); tag_post takes up to
 * kTagDrainMax that way. A plane whose receive cannot be posted (an error from UCP, not
 * seen) falls back to probing the queue after every poll that had events (tag_receive), as
 * does one whose receive a message of several fragments took and never finished (a foreign
 * sender's; tag_watch), until that receive completes.
 */
#include <cstring>

#include "mr_internal.hpp"

namespace dualrail {
namespace mr {

/* Messages taken per tag_post or tag_receive call; the rest at the next poll. */
constexpr unsigned kTagDrainMax = 256;

/* The posted receive's completion, inside ucp_worker_progress of its plane's worker (or a
 * cancel's): noted only; Mr::poll hands the message on once progress has returned. */
static void tag_recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                        void *user_data)
{
    (void)request;
    Plane *pl = static_cast<Plane *>(user_data);
    pl->rx_status = status;
    pl->rx_len = info != nullptr ? info->length : 0;
    pl->rx_done = true;
}

unsigned Mr::tag_post(Plane *pl)
{
    unsigned n = 0;
    for (; n < kTagDrainMax; ++n) {
        /* Always a request and the callback (NO_IMM_CMPL): on an immediate completion from
         * the queue UCX 1.13 left the receive information unset (length 0, seen in
         * unit_mr_flat_wire), and the callback has it. */
        ucp_request_param_t rp;
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        rp.cb.recv = tag_recv_cb;
        rp.user_data = pl;
        rp.memory_type = UCS_MEMORY_TYPE_HOST;
        pl->rx_done = false;
        ucs_status_ptr_t r =
            ucp_tag_recv_nbx(pl->worker, pl->tag_in, kTagWireMax, kWholeTag, ~(ucp_tag_t)0, &rp);
        if (UCS_PTR_IS_ERR(r) || r == nullptr) {
            if (!pl->rx_warned) {
                log(DR_LOG_WARN,
                    "plane %d (%s): cannot post the receive of whole messages "
                    "(%s): probing for them instead, posting again later",
                    pl->index, pl->device.c_str(), ucs_status_string(UCS_PTR_STATUS(r)));
                pl->rx_warned = true;
            }
            pl->rx = Plane::Rx::kFailed; /* tag_watch sets it back to kIdle */
            pl->tag_more = true;
            return n;
        }
        pl->rx_req = r;
        if (pl->rx_done) {
            tag_complete(pl); /* one from UCP's queue, completed inside the call */
            continue;
        }
        pl->rx = Plane::Rx::kPosted;
        ++pl->rx_posts;
        return n;
    }
    return n; /* kTagDrainMax taken: the rest at the next poll (still kIdle) */
}

void Mr::tag_complete(Plane *pl)
{
    /* kPosted, kStuck whose receive finished after all, or tag_post's receive completed from
     * UCP's queue inside the call: posted again at the next poll (tag_post goes on itself) */
    pl->rx_done = false;
    if (pl->rx_req != nullptr) {
        ucp_request_free(pl->rx_req);
        pl->rx_req = nullptr;
    }
    pl->rx = Plane::Rx::kIdle;
    tag_deliver(pl, pl->tag_in, pl->rx_len, pl->rx_status);
}

void Mr::tag_cancel(Plane *pl)
{
    if ((pl->rx != Plane::Rx::kPosted && pl->rx != Plane::Rx::kStuck) || pl->rx_req == nullptr) {
        return;
    }
    /* A receive no fragment has matched completes inside the cancel; one a fragment has
     * matched cannot be cancelled (UCP), and a few polls give it its chance. Freed either
     * way: a request freed before it completes is released by UCP when it does
     * (ucp_request_free), and the worker's destruction follows at once (teardown only). */
    ucp_request_cancel(pl->worker, pl->rx_req);
    for (int i = 0; i < 100 && !pl->rx_done; ++i) {
        ucp_worker_progress(pl->worker);
    }
    ucp_request_free(pl->rx_req);
    pl->rx_req = nullptr;
    pl->rx_done = false;
    pl->rx = Plane::Rx::kIdle;
}

void Mr::tag_watch(Plane *pl)
{
    if (pl->rx_done) {
        tag_complete(pl); /* (poll hands completions on at once; kept for safety) */
        return;
    }
    if (pl->rx == Plane::Rx::kFailed) {
        pl->rx = Plane::Rx::kIdle; /* post again at the next poll (probed meanwhile) */
        return;
    }
    if (pl->rx != Plane::Rx::kPosted) {
        return;
    }
    /* With the receive posted, a whole message goes to UCP's queue only when the receive is
     * taken already: by a message of several fragments (a foreign sender's: ucx_mr's own
     * are one fragment, its TCP segments being 64 KiB or more) whose rest has not come. If
     * it never comes (its sender gone), every later one would wait in the queue. UCP cannot
     * cancel a receive a fragment has matched, so the plane probes the queue into its
     * other buffer until that receive completes, if ever (Rx::kStuck). Only when the same
     * receive is found so at two looks in a row, 2 ms or more apart: a message whose
     * fragments are still arriving completes within microseconds. */
    ucp_tag_recv_info_t info;
    if (ucp_tag_probe_nb(pl->worker, kWholeTag, ~(ucp_tag_t)0, 0, &info) == nullptr) {
        pl->rx_suspect = 0;
        return;
    }
    if (pl->rx_suspect != pl->rx_posts) {
        pl->rx_suspect = pl->rx_posts; /* first look: the next one decides */
        return;
    }
    log(DR_LOG_INFO,
        "plane %d (%s): the receive of whole messages waits on an unfinished message while "
        "others queue: probing for them until it completes",
        pl->index, pl->device.c_str());
    pl->rx = Plane::Rx::kStuck;
    pl->tag_more = true;
}

void Mr::tag_deliver(Plane *pl, const char *buf, size_t got, ucs_status_t st, size_t max)
{
    ++pl->tag_msgs;
    pl->tag_last_len = got;
    WireHdr h;
    const size_t extra = got >= sizeof(WireHdr) ? got - sizeof(WireHdr) : 0;
    if (st == UCS_OK && got >= sizeof(WireHdr)) {
        memcpy(&h, buf, sizeof(h));
    }
    if (st != UCS_OK || got < sizeof(WireHdr) || got > max || h.type != kData || h.offset != 0 ||
        h.total > extra || (extra - h.total) % sizeof(uint32_t) != 0 ||
        (extra - h.total) / sizeof(uint32_t) > kAckList) {
        log(DR_LOG_INFO, "plane %d (%s): dropped a %zu-byte tag message (%s)", pl->index,
            pl->device.c_str(), got, st != UCS_OK ? ucs_status_string(st) : "not a whole message");
        return;
    }
    AckList acks;
    acks.n = (uint32_t)((extra - h.total) / sizeof(uint32_t));
    memcpy(acks.id, buf + sizeof(WireHdr) + h.total, sizeof(uint32_t) * acks.n);
    ucs_status_t ret = UCS_OK; /* the bytes are ours, in buf: on_am copies what it keeps */
    on_am(pl, h, acks, const_cast<char *>(buf) + sizeof(WireHdr), h.total, 0, &ret);
    if (h.src > self && pl->lane.port != 0) {
        /* A higher id's whole messages call for the lane that is ours to make (mr_lane.cc),
         * even where we send the peer none of our own (a broadcast's non-root). */
        Peer *p = peer_get(h.src, false);
        if (p != nullptr && p->links[pl->index]->lane.st != Lane::St::kReady) {
            lane_want(p->links[pl->index].get());
        }
    }
}

void Mr::tag_receive(Plane *pl)
{
    pl->tag_more = false;
    for (unsigned n = 0; n < kTagDrainMax; ++n) {
        ucp_tag_recv_info_t info;
        ucp_tag_message_h m = ucp_tag_probe_nb(pl->worker, kWholeTag, ~(ucp_tag_t)0, 1, &info);
        if (m == nullptr) {
            return;
        }
        char *const buf = pl->tag_probe_in; /* tag_in may be a stuck receive's */
        ucp_request_param_t rp;
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        rp.recv_info.tag_info = &info;
        rp.memory_type = UCS_MEMORY_TYPE_HOST;
        /* One fragment, in UCP's queue already: complete on return (NULL; a request is polled
         * below). A longer one is truncated to the buffer (an error), which no ucx_mr sender
         * makes (kTagWireMax). */
        ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(pl->worker, buf, kTagWireMax, m, &rp);
        ucs_status_t st = UCS_OK;
        if (UCS_PTR_IS_ERR(r)) {
            st = UCS_PTR_STATUS(r);
        } else if (r != nullptr) {
            /* Not whole yet (a multi-fragment message): bounded, then given up. */
            for (int i = 0; i < 1000 && ucp_request_check_status(r) == UCS_INPROGRESS; ++i) {
                ucp_worker_progress(pl->worker);
            }
            st = ucp_request_check_status(r);
            if (st == UCS_INPROGRESS) {
                ucp_request_cancel(pl->worker, r);
            }
            ucp_request_free(r);
        }
        tag_deliver(pl, buf, info.length, st);
    }
    pl->tag_more = true;
}

} // namespace mr
} // namespace dualrail
