/*
 * ucx_mr progress and completion: the public calls that drive the planes and
 * report on requests (dr_mr_progress, dr_mr_wait_event, dr_mr_test, dr_mr_wait,
 * dr_mr_cancel, dr_mr_req_free, dr_mr_unacked_copies). The data path they drive
 * is in mr_xfer.cc, the health rules the watchdog applies in mr_health.cc.
 *
 * Progress polls the hot planes in turns (a cold one once per kColdPollUs), then
 * runs what the callbacks deferred, the owed acknowledgements, the control queue,
 * every 2 ms the watchdog and the weights, and re-issues queued segments; waiting
 * spins briefly and then naps (DR_MR_NAP_US), or sleeps on the planes' event
 * descriptors when the contexts were made with UCX's wake-up feature (cfg.wakeup).
 */
#include <sys/epoll.h>
#include <time.h>

#include "mr_internal.hpp"

using namespace dualrail::mr;

extern "C" int dr_mr_progress(dr_mr_t *mr)
{
    Guard g(mr); /* any thread may progress; one at a time, for this call only */
    int events = 0;
    mr->clock = now_us();
    ++mr->work.progress_calls;
    if (mr->acks_in_total != 0) {
        mr->acks_in_apply_all(); /* what the last call's data segments acknowledged */
    }
    /* The polled planes take turns (each until it has nothing more, at most 64 rounds,
     * and no further once a round finished a request: its waiter wants to know now, and
     * one more round is one more system call per polled plane before it does):
     * draining one plane first delayed the other's arrivals by a whole burst, and the
     * delivery spans the weights are learned from (mr_weights.cc) read that as a slower
     * plane. A cold plane (nothing of ours in UCX, nothing sent or seen for kHotUs) is
     * polled once per kColdPollUs only, and in the first call after a pause (the
     * process computed, or waited elsewhere, for more than kHotUs): its peers' pings on
     * every plane are answered the moment it is back. Seen: a rank that computed 0.15 s
     * between 8-byte allreduces polled only the plane its small messages use in each
     * short call, so the other plane's pings went unanswered for calls on end while that
     * plane answered, and its peer declared the healthy plane down (the stall rule);
     * UCX 1.13 asserted in the re-admission that followed, and an allreduce failed. */
    const bool back = mr->clock - mr->progress_at > kHotUs;
    mr->poll_gap = mr->clock - mr->progress_at;
    mr->progress_at = mr->clock;
    const bool all = mr->clock - mr->cold_polled_at >= kColdPollUs || back;
    if (all) {
        mr->cold_polled_at = mr->clock;
    }
    bool active[DR_MAX_PLANES];
    const size_t np = mr->planes.size();
    for (size_t k = 0; k < np; ++k) {
        const Plane *pl = mr->planes[k].get();
        active[k] = all || pl->ops_out != 0 || mr->clock - pl->active_at <= kHotUs;
        if (active[k]) {
            mr->planes[k]->polled_at = mr->clock; /* the stall rule's "we did look" */
        }
    }
    const uint64_t finished = mr->finished;
    for (int i = 0, more = 1; i < 64 && more && mr->finished == finished; ++i) {
        more = 0;
        for (size_t k = 0; k < np; ++k) {
            if (active[k] && mr->poll(mr->planes[k].get()) != 0) {
                ++events;
                more = 1;
            } else {
                active[k] = false;
            }
        }
    }
    if (all) {
        for (size_t k = 0; k < np; ++k) {
            mr->lane_service(mr->planes[k].get()); /* the direct lanes' slow events */
        }
    }
    if (!mr->closing.empty()) {
        mr->reap_closing();
    }
    if (mr->deferred) {
        mr->handle_deferred();
    }
    const uint64_t now = mr->clock;
    if (mr->owed_total != 0) {
        mr->ack_flush(false, now);
    }
    if (!mr->ctrl.empty()) {
        mr->ctrl_flush();
    }
    if (now - mr->last_watchdog >= 2000) {
        mr->last_watchdog = now;
        mr->watchdog(now);
        mr->ctrl_flush();
        mr->weights_tick(now);
        for (auto &pl : mr->planes) {
            mr->tag_watch(pl.get());
        }
    }
    /* A call that finished a request returns to its waiter without tidying short lists
     * (sweep): the next call does it, in the time the next message takes to come. A peer
     * whose messages are always there by the time it looks is swept once its lists grow. */
    const bool tidy = mr->finished == finished;
    for (size_t pi = 0; pi < mr->active.size();) {
        Peer *p = mr->active[pi];
        ++mr->work.peer_visits;
        if (p->sends.empty() && p->recvs.empty()) {
            if (mr->settled(p)) {
                p->active = false;
                mr->active[pi] = mr->active.back();
                mr->active.pop_back();
            } else {
                ++pi;
            }
            continue;
        }
        for (size_t i = 0; i < mr->planes.size(); ++i) {
            Link *l = p->links[i].get();
            if (!l->queue.empty()) {
                mr->issue(l);
            }
        }
        if (tidy || p->sends.size() + p->recvs.size() > kSweepDeferMax) {
            mr->sweep(p);
        }
        ++pi;
    }
    return events;
}

/* What keeps a peer without requests in Mr::active: acknowledgements owed or awaited (flat
 * sends: the watchdog watches their planes), a plane down (probes), bytes the next weights
 * tick must take in. */
bool Mr::settled(const Peer *p) const
{
    if (p->owed_count != 0 || p->acks_in_n != 0 || p->flat_live != 0) {
        return false;
    }
    for (size_t i = 0; i < planes.size(); ++i) {
        const Link *l = p->links[i].get();
        /* tick_busy_us and tick_timed grow only with tick_bytes, and go with them */
        if (l->state != DR_LINK_UP || l->est.tick_bytes != 0) {
            return false;
        }
    }
    return true;
}

extern "C" void dr_mr_wait_event(dr_mr_t *mr, double timeout)
{
    if (mr == nullptr || timeout <= 0) {
        return;
    }
    if (mr->epfd < 0) {
        /* No wake-up descriptors (dr_mr_config_t.wakeup 0): a nap gives the core up as
         * well, and a waiter that gets this far has waited long already. */
        const double s = timeout < DR_MR_NAP_US * 1e-6 ? timeout : DR_MR_NAP_US * 1e-6;
        struct timespec ts = {0, (long)(s * 1e9)};
        nanosleep(&ts, nullptr);
        return;
    }
    {
        Guard g(mr); /* arm under the lock, sleep outside it */
        for (auto &pl : mr->planes) {
            /* BUSY: events arrived since the last progress; sleeping now would miss them.
             * The plane that has them is polled at the next progress even if it is cold. */
            if (ucp_worker_arm(pl->worker) != UCS_OK) {
                pl->active_at = now_us();
                return;
            }
        }
    }
    int ms = (int)(timeout * 1000 + 0.5);
    ms = ms < 1 ? 1 : ms > 10 ? 10 : ms;
    struct epoll_event ev[DR_MAX_PLANES];
    const int n = epoll_wait(mr->epfd, ev, DR_MAX_PLANES, ms);
    if (n > 0) {
        /* What woke us is polled next, cold or not (see dr_mr_irecv). */
        Guard g(mr);
        const uint64_t now = now_us();
        for (int i = 0; i < n; ++i) {
            if (ev[i].data.u32 < mr->planes.size()) {
                mr->planes[ev[i].data.u32]->active_at = now;
            }
        }
    }
}

/* dr_mr_test under the caller's lock. */
static dr_status_t req_test(Req *r, size_t *len)
{
    if (r->is_send && !r->complete && r->ops == 0 && (r->acked || r->status != DR_OK)) {
        r->complete = true;
    }
    if (!r->complete && !(r->copied && r->status == DR_OK)) {
        return DR_INPROGRESS;
    }
    if (len != nullptr) {
        *len = (size_t)(r->is_send ? r->len : r->received);
    }
    return r->status;
}

/* dr_mr_req_free under the caller's lock. */
static void req_free(Mr *mr, Req *r)
{
    if (!r->complete && r->copied) {
        r->released = true; /* sweep() recycles it once acknowledged (or failed) */
        return;
    }
    if (!r->complete) {
        /* Freeing a running request would leave UCX reading a buffer the caller reuses. */
        mr->log(DR_LOG_WARN, "dr_mr_req_free on a running request (peer %u, key %llu) ignored",
                r->peer, (unsigned long long)r->key);
        return;
    }
    mr->recycle(r);
}

/* A flat send (mr_internal.hpp, FlatSend) is complete when posted and holds nothing. */
static dr_status_t flat_test(const dr_mr_req_t *req, size_t *len)
{
    if (len != nullptr) {
        *len = flat_len(req);
    }
    return DR_OK;
}

extern "C" dr_status_t dr_mr_test(dr_mr_t *mr, dr_mr_req_t *req, size_t *len)
{
    if (req == nullptr) {
        return DR_ERR_INVALID;
    }
    if (is_flat(req)) {
        return flat_test(req, len);
    }
    Guard g(mr); /* another thread's progress writes the request's state */
    return req_test(req, len);
}

extern "C" dr_status_t dr_mr_test_free(dr_mr_t *mr, dr_mr_req_t *req, size_t *len)
{
    if (mr == nullptr || req == nullptr) {
        return DR_ERR_INVALID;
    }
    if (is_flat(req)) {
        return flat_test(req, len);
    }
    Guard g(mr);
    const dr_status_t st = req_test(req, len);
    if (st != DR_INPROGRESS) {
        req_free(mr, req);
    }
    return st;
}

extern "C" dr_status_t dr_mr_wait(dr_mr_t *mr, dr_mr_req_t *req, double timeout, size_t *len)
{
    const uint64_t start = now_us();
    const uint64_t limit = timeout < 0 ? UINT64_MAX : (uint64_t)(timeout * 1e6);
    unsigned idle = 0;
    for (;;) {
        dr_status_t st = dr_mr_test(mr, req, len);
        if (st != DR_INPROGRESS) {
            return st;
        }
        if (now_us() - start > limit) {
            return DR_ERR_TIMEOUT;
        }
        if (dr_mr_progress(mr) == 0) {
            /* Spin briefly (latency), then sleep on the planes' descriptors: several
             * processes share a core in the lab, and the network stack needs it too. */
            if (++idle > 64) {
                dr_mr_wait_event(mr, 0.001);
            }
        } else {
            idle = 0;
        }
    }
}

extern "C" dr_status_t dr_mr_cancel(dr_mr_t *mr, dr_mr_req_t *req)
{
    if (mr == nullptr || req == nullptr) {
        return DR_ERR_INVALID;
    }
    if (is_flat(req)) {
        return DR_OK; /* complete */
    }
    Guard g(mr);
    Req *r = req;
    if (r->complete || r->copied) {
        return DR_OK; /* a copied send is complete for its caller */
    }
    if (r->is_send) {
        return DR_ERR_INVALID;
    }
    /* Receives are copied out inside UCX callbacks, so nothing else refers to buf. */
    r->status = DR_ERR_CANCELED;
    r->complete = true;
    return DR_OK;
}

extern "C" size_t dr_mr_drop_unexpected(dr_mr_t *mr, int (*stale)(uint64_t key, void *arg),
                                        void *arg)
{
    if (mr == nullptr || stale == nullptr) {
        return 0;
    }
    Guard g(mr);
    size_t n = 0;
    for (auto &p : mr->peers) {
        if (!p) {
            continue;
        }
        auto &held = p->unexpected;
        for (size_t i = 0; i < held.size();) {
            if (stale(held[i].key, arg) != 0) {
                mr->unexpected_release(held[i]);
                held.erase(held.begin() + (long)i);
                ++n;
            } else {
                ++i;
            }
        }
    }
    return n;
}

extern "C" void dr_mr_req_free(dr_mr_t *mr, dr_mr_req_t *req)
{
    if (mr == nullptr || req == nullptr || is_flat(req)) {
        return;
    }
    Guard g(mr);
    req_free(mr, req);
}

extern "C" void dr_mr_work(const dr_mr_t *mr, dr_mr_work_stats_t *out)
{
    if (out == nullptr) {
        return;
    }
    *out = dr_mr_work_stats_t{};
    if (mr != nullptr) {
        Guard g(mr);
        *out = mr->work;
    }
}

extern "C" size_t dr_mr_unacked_copies(const dr_mr_t *mr)
{
    Guard g(mr);
    size_t n = 0;
    for (size_t pi = 0; mr != nullptr && pi < mr->peers.size(); ++pi) {
        const Peer *p = mr->peers[pi].get();
        /* an acknowledgement that came and is not applied yet */
        auto ack_pending = [p](uint32_t msg_id) {
            for (uint32_t k = 0; k < p->acks_in_n; ++k) {
                if (p->acks_in[k] == msg_id) {
                    return true;
                }
            }
            return false;
        };
        for (size_t i = 0; p != nullptr && i < p->sends.size(); ++i) {
            const Req *r = p->sends[i];
            if (r->copied && !r->complete && !r->acked && !ack_pending(r->msg_id)) {
                ++n;
            }
        }
        for (uint32_t k = 0; p != nullptr && p->flat_live != 0 && k < kFlatSlots; ++k) {
            if (p->flat[k].live && !ack_pending(p->flat[k].msg_id)) {
                ++n;
            }
        }
    }
    return n;
}
