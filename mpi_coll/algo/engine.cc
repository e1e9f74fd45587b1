/* Request slots, waits, aborts and cleanup shared by the algorithms (engine.hpp). */
#include "algo/engine.hpp"

#include <atomic>
#include <cassert>
#include <cstdarg>
#include <cstdio>
#include <new>

#include "algo/lazy_engine.hpp"
#include "dualrail/key.h"

namespace dualrail {
namespace coll {

namespace {

/*
 * Abort payloads: a send's buffer must outlive the call when the peer never
 * takes the message, so the 4 bytes come from this static table (indexed by
 * -status - 1), never from the stack.
 */
const int32_t kAbortCodes[] = {-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11};
constexpr long kAbortCodeCount = (long)(sizeof(kAbortCodes) / sizeof(kAbortCodes[0]));
static_assert(kAbortCodeCount == -(long)DR_ERR_GPU, "every error status has an abort code");
constexpr size_t kAbortLen = sizeof(int32_t);

const int32_t *abort_payload(dr_status_t st)
{
    long i = -(long)st - 1;
    if (i < 0 || i >= kAbortCodeCount) {
        i = -(long)DR_ERR_PEER_UNREACHABLE - 1;
    }
    return &kAbortCodes[i];
}

/* A code this build does not know (a newer peer's) reads as the peer being unreachable. */
dr_status_t abort_status(int32_t code)
{
    if (code <= -1 && code >= -kAbortCodeCount) {
        return (dr_status_t)code;
    }
    return DR_ERR_PEER_UNREACHABLE;
}

std::atomic<uint64_t> g_lazy_slow{0};

} // namespace

void lazy_note_slow()
{
    g_lazy_slow.fetch_add(1, std::memory_order_relaxed);
}

uint64_t lazy_slow_calls()
{
    return g_lazy_slow.load(std::memory_order_relaxed);
}

Engine::Engine(Transport &t, const Params &p, const char *algo)
    : t_(t), p_(p), algo_(algo), key_base_(call_key(p))
{
}

Engine::~Engine() = default;

dr_status_t Engine::init(size_t nslots, const int *peers, size_t npeers)
{
    try {
        ops_.assign_zero(nslots);
        peers_.reserve(npeers);
        listeners_.reserve(npeers);
        failed_.reserve(npeers);
        for (size_t i = 0; i < npeers; ++i) {
            peers_.push_back(peers[i]);
        }
    } catch (const std::bad_alloc &) {
        return set_error(DR_ERR_NO_MEMORY, "out of memory for %zu request slots", nslots);
    }
    if (p_.fail != DR_OK) {
        /* Params::fail: the peers are known now, so finish() can tell them. */
        return set_error(p_.fail, "%s",
                         p_.fail_why != nullptr ? p_.fail_why : dr_status_str(p_.fail));
    }
    return DR_OK;
}

/* Both directions are posted alike; only the transport call and the label differ. */
dr_status_t Engine::post(size_t slot, int peer, uint32_t step, uint64_t key, void *buf, size_t len,
                         bool send)
{
    if (len == 0) {
        return DR_OK;
    }
    Op &op = ops_[slot];
    assert(op.req == nullptr);
    dr_status_t st = send ? t_.isend(peer, key, buf, len, &op.req)
                          : t_.irecv(peer, key, buf, len, &op.req);
    if (st != DR_OK) {
        op.req = nullptr;
        return post_failed(st, peer, step, send);
    }
    op.buf = buf;
    op.peer = peer;
    op.step = step;
    op.len = len;
    op.send = send;
    ++running_;
    if (send) {
        /* A send the transport completed at once (ucx_mr's copied small sends) is released
         * now, while the peer's message is on its way, not after it came: what a call does
         * between its data's arrival and its return is what its latency pays. */
        st = test(slot);
        return st == DR_INPROGRESS ? DR_OK : st;
    }
    return DR_OK;
}

dr_status_t Engine::isend(size_t slot, int peer, uint32_t step, uint64_t key, const void *buf,
                          size_t len)
{
    /* The transport only reads a send buffer. */
    return post(slot, peer, step, key, const_cast<void *>(buf), len, true);
}

dr_status_t Engine::irecv(size_t slot, int peer, uint32_t step, uint64_t key, void *buf, size_t len)
{
    return post(slot, peer, step, key, buf, len, false);
}

void Engine::adopt(size_t slot, Transport::Req req, int peer, uint32_t step, const void *buf,
                   size_t len, bool send)
{
    Op &op = ops_[slot];
    assert(op.req == nullptr && req != nullptr);
    op = Op{req, buf, peer, step, len, send};
    ++running_;
}

dr_status_t Engine::test(size_t slot)
{
    Op &op = ops_[slot];
    if (op.req == nullptr) {
        return DR_OK;
    }
    size_t got = 0;
    dr_status_t st = t_.reap(op.req, &got);
    if (st == DR_INPROGRESS) {
        return st;
    }
    op.req = nullptr;
    --running_;
    return completed(st, op.peer, op.step, op.send, got, op.len);
}

dr_status_t Engine::completed(dr_status_t st, int peer, uint32_t step, bool send, size_t got,
                              size_t len)
{
    if (st != DR_OK) {
        return transport_error(st, peer, step, send ? "send to" : "receive from");
    }
    if (!send && got != len) {
        mark_failed(peer);
        return set_error(DR_ERR_TRUNCATED,
                         "%s sent %zu bytes at step %u where %zu were expected (do the ranks agree "
                         "on count, datatype and algorithm?)",
                         name(peer).s, got, step, len);
    }
    ++completions_;
    return DR_OK;
}

Engine::Name Engine::name(int peer) const
{
    Name n;
    n.s[0] = '\0';
    t_.peer_name(peer, n.s, sizeof(n.s));
    return n;
}

dr_status_t Engine::wait(size_t slot)
{
    if (ops_[slot].req == nullptr) {
        return DR_OK; /* a free slot (schedules wait on every slot at their end) */
    }
    const int peer = ops_[slot].peer;
    const uint32_t step = ops_[slot].step;
    for (;;) {
        dr_status_t st = test(slot);
        if (st != DR_INPROGRESS) {
            return st;
        }
        st = stalled(peer, step);
        if (st != DR_OK) {
            return st;
        }
    }
}

dr_status_t Engine::wait_all()
{
    for (size_t s = 0; s < ops_.size() && running_ != 0; ++s) {
        const dr_status_t st = wait(s);
        if (st != DR_OK) {
            return st;
        }
    }
    return DR_OK;
}

dr_status_t Engine::stalled(int peer, uint32_t step)
{
    const int events = t_.progress();
    if (completions_ != seen_) {
        seen_ = completions_;
        since_set_ = false;
        idle_spins_ = 0;
        polls_ = 0;
    } else if ((++polls_ & (kClockEvery - 1)) == 0) {
        /* The clock is read every kClockEvery polls only, and the inactivity span starts
         * at the first reading after a completion (or after the start): a short wait (a
         * small message) takes a few polls and reads no clock at all, and both limits
         * below are milliseconds or more, so starting a few polls late changes nothing. */
        const auto now = std::chrono::steady_clock::now();
        if (!since_set_) {
            last_ = now;
            since_set_ = true;
        }
        const double waited = std::chrono::duration<double>(now - last_).count();
        if (!listening_ && waited >= kAbortListenAfter) {
            listen();
        }
        if (p_.timeout > 0 && waited > p_.timeout) {
            return set_error(DR_ERR_TIMEOUT,
                             "no progress for %.3g s while waiting for %s (step %u)", waited,
                             name(peer).s, step);
        }
    }
    if (listening_) {
        dr_status_t st = check_aborts();
        if (st != DR_OK) {
            return st;
        }
    }
    if (p_.yield != nullptr) {
        /* A non-blocking collective: its progress callback resumes it at its next turn. */
        p_.yield(p_.yield_arg);
    } else if (events == 0) {
        idle_poll(p_, &idle_spins_); /* ranks may share cores: give the CPU away */
    }
    return DR_OK;
}

void Engine::peer_set()
{
    if (listeners_.size() != 0) {
        return;
    }
    for (int q : peers_) {
        bool dup = q < 0 || q == p_.rank;
        for (const Listener &l : listeners_) {
            dup = dup || l.peer == q;
        }
        if (!dup) {
            listeners_.push_back(Listener{q, nullptr, 0}); /* reserved in init() */
        }
    }
}

dr_status_t Engine::listen()
{
    listening_ = true;
    peer_set();
    const uint64_t k = key(kAbortStep, 0, 0);
    for (Listener &l : listeners_) {
        if (t_.irecv(l.peer, k, &l.code, kAbortLen, &l.req) != DR_OK) {
            l.req = nullptr; /* a peer we cannot hear from fails our own transfers instead */
        }
    }
    return DR_OK;
}

dr_status_t Engine::check_aborts()
{
    for (Listener &l : listeners_) {
        if (l.req == nullptr) {
            continue;
        }
        size_t got = 0;
        dr_status_t st = t_.reap(l.req, &got);
        if (st == DR_INPROGRESS) {
            continue;
        }
        l.req = nullptr;
        if (st == DR_OK && got == kAbortLen) {
            aborted_by_ = l.peer;
            const dr_status_t remote = abort_status(l.code);
            return set_error(remote, "%s gave up on the collective (its error: %s)", name(l.peer).s,
                             dr_status_str(remote));
        }
    }
    return DR_OK;
}

dr_status_t Engine::transport_error(dr_status_t st, int peer, uint32_t step, const char *what)
{
    mark_failed(peer);
    return set_error(st, "%s %s failed at step %u: %s (%s)", what, name(peer).s, step,
                     dr_status_str(st), t_.last_error());
}

void Engine::mark_failed(int peer)
{
    if (!failed(peer) && failed_.size() < failed_.capacity()) {
        failed_.push_back(peer); /* capacity reserved in init(): never allocates */
    }
}

bool Engine::failed(int peer) const
{
    for (int f : failed_) {
        if (f == peer) {
            return true;
        }
    }
    return false;
}

dr_status_t Engine::set_error(dr_status_t st, const char *fmt, ...)
{
    if (status_ != DR_OK) {
        return st; /* the first error is the one worth reporting */
    }
    status_ = st;
    char line[768];
    int n = snprintf(line, sizeof(line), "%s %s, rank %d of %d: ", algo_, kind_name(p_.kind),
                     p_.rank, p_.size);
    if (n < 0 || (size_t)n >= sizeof(line)) {
        n = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    try {
        error_ = line;
    } catch (const std::bad_alloc &) {
        error_.clear();
    }
    return st;
}

void Engine::notify_peers(dr_status_t st)
{
    peer_set();
    const uint64_t k = key(kAbortStep, 0, 0);
    for (const Listener &l : listeners_) {
        if (l.peer == aborted_by_ || failed(l.peer)) {
            continue;
        }
        Transport::Req r = nullptr;
        if (t_.isend(l.peer, k, abort_payload(st), kAbortLen, &r) == DR_OK) {
            /* Released if done; a running one stays with the transport (the peer may
             * never take it). */
            size_t got;
            (void)t_.reap(r, &got);
        }
    }
}

dr_status_t Engine::finish(dr_status_t st, std::string *err)
{
    if (st == DR_OK && running_ == 0 && !listening_) {
        /* The common end of a small collective: nothing running, no abort receives. */
        if (err != nullptr) {
            err->clear();
        }
        return DR_OK;
    }
    for (Op &op : ops_) {
        if (op.req != nullptr && st == DR_OK) {
            /* An algorithm left a request running: a bug, never a silent success. */
            st = set_error(DR_ERR_INVALID, "internal error: a request to %s was left at step %u",
                           name(op.peer).s, op.step);
        }
    }
    if (st != DR_OK) {
        notify_peers(st);
    }
    for (Listener &l : listeners_) {
        if (l.req != nullptr) {
            t_.cancel(l.req);
            size_t got;
            (void)t_.reap(l.req, &got);
            l.req = nullptr;
        }
    }
    for (Op &op : ops_) {
        if (op.req == nullptr) {
            continue;
        }
        if (!op.send) {
            t_.cancel(op.req);
        }
        size_t got;
        if (t_.reap(op.req, &got) == DR_INPROGRESS) {
            /* A running send, which the transport keeps (see engine.hpp). */
            const char *b = static_cast<const char *>(op.buf);
            if (scratch_ != nullptr && b < scratch_ + scratch_len_ && scratch_ < b + op.len) {
                scratch_busy_ = true;
            }
        }
        op.req = nullptr;
    }
    if (err != nullptr) {
        try {
            if (st == DR_OK) {
                err->clear();
            } else if (!error_.empty()) {
                *err = error_;
            } else {
                *err =
                    std::string(algo_) + " " + kind_name(p_.kind) + " failed: " + dr_status_str(st);
            }
        } catch (const std::bad_alloc &) {
        }
    }
    return st;
}

} // namespace coll
} // namespace dualrail
