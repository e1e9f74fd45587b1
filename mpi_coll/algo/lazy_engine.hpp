#ifndef DUALRAIL_ALGO_LAZY_ENGINE_HPP
#define DUALRAIL_ALGO_LAZY_ENGINE_HPP

/*
 * The engine (engine.hpp) of a small schedule, built only when the call needs it.
 *
 * Why: a small collective's round is one copied send (ucx_mr completes a small send when it
 * posts it; the copy is what a plane loss re-sends) and one receive. What the engine sets
 * up per call for such a round (request slots, the peer list, the abort and error
 * bookkeeping) is never used while nothing goes wrong, and it runs between a call's entry
 * and its first send and between the last arrival and the return: on an 8-byte allreduce
 * about an eighth of the call's own instructions (perf/instr_count.sh). A LazyEngine posts
 * and waits on the transport itself (fast mode) and builds the engine (slow mode) when
 *   - a receive has waited kAbortListenAfter (when the engine starts listening for the
 *     peers' aborts): it takes over with that wait, listening at once;
 *   - a send does not complete when posted (not copied: it must be waited for);
 *   - a post or a transfer fails (the engine records the error, and finish() cancels what
 *     runs and tells the peers, exactly as in an engine-run schedule);
 *   - the schedule records an error of its own (engine().set_error()).
 * The requests running then (the pending receives) are adopted into the engine's slots,
 * and every later call goes through the engine. A call with Params::yield (a non-blocking
 * collective's task) or Params::fail, or a schedule larger than the engine's inline storage
 * (kLazyMaxSlots slots, kLazyMaxPeers peers: building it mid-call then never allocates, so
 * never fails), builds it in init(): the engine's behaviour throughout.
 *
 * Its calls are the engine's (init, key, isend, irecv, wait, wait_all, finish), so a schedule
 * written for one runs on the other; init() takes the peer list as an array (kept by
 * pointer: the caller's must outlive the call) or as a function run only if the engine is
 * built.
 *
 * A template on the transport: over MrTransport (final) the fast mode's calls go to ucx_mr
 * without the vtable (dr_coll.cc's direct entries); the engine always takes a Transport.
 */
#include <cassert>
#include <chrono>
#include <cstdint>
#include <new>
#include <string>

#include "algo/coll.hpp"
#include "algo/engine.hpp"

namespace dualrail {
namespace coll {

/* The engine's inline storage (engine.hpp: ops_, peers_): a lazy schedule fits in it. */
constexpr size_t kLazyMaxSlots = 16;
constexpr size_t kLazyMaxPeers = 8;
/* Room a PeersFn writes into: any schedule's peer list (dissemination: 2 x 31). */
constexpr size_t kLazyPeersRoom = 64;

/* A note_slow for the schedules that have no counter of their own (engine.cc): calls that
 * built their engine, all kinds together. */
void lazy_note_slow();
uint64_t lazy_slow_calls();

template <class T> class LazyEngine {
  public:
    /* The schedule's peers as Engine::init takes them (duplicates and -1 allowed), written
     * into out (kLazyPeersRoom); returns how many. Called only when the engine is built. */
    using PeersFn = size_t (*)(const Params &p, int *out);

    /* note_slow counts the calls that built the engine (the tests' evidence of which mode
     * ran); may be null. */
    LazyEngine(T &t, const Params &p, const char *algo, void (*note_slow)())
        : t_(t), p_(p), algo_(algo), note_slow_(note_slow), key_base_(call_key(p))
    {
    }
    ~LazyEngine()
    {
        if (eng_ != nullptr) {
            eng_->~Engine();
        }
    }
    LazyEngine(const LazyEngine &) = delete;
    LazyEngine &operator=(const LazyEngine &) = delete;

    /* Engine::init: nslots request slots, the schedule's peers (duplicates and -1 allowed).
     * DR_OK, or the engine's verdict where the call is not lazy (Params::fail, no memory). */
    dr_status_t init(size_t nslots, const int *peers, size_t npeers)
    {
        peer_list_ = peers;
        return init(nslots, npeers, nullptr);
    }
    /* The same with the peers written by fn (at most npeers) only when the engine is built. */
    dr_status_t init(size_t nslots, size_t npeers, PeersFn fn)
    {
        nslots_ = nslots;
        npeers_ = npeers;
        peers_fn_ = fn;
        const bool lazy = p_.yield == nullptr && p_.fail == DR_OK && nslots <= kLazyMaxSlots &&
                          npeers <= kLazyMaxPeers;
        return lazy ? DR_OK : build();
    }

    uint64_t key(uint32_t step, uint32_t block, uint32_t seg) const
    {
        return step_key(key_base_, step, block, seg);
    }

    /* The range a running send may read from the schedule's scratch (Engine::set_scratch);
     * given to the engine when it is built. */
    void set_scratch(const char *buf, size_t len)
    {
        scratch_ = buf;
        scratch_len_ = len;
        if (eng_ != nullptr) {
            eng_->set_scratch(buf, len);
        }
    }

    /* Post a send (len 0 posts nothing, as the engine). Fast mode: complete when posted, or
     * adopted by the engine (slow mode), and wait(slot) waits for it. */
    __attribute__((always_inline)) dr_status_t isend(size_t slot, int q, uint32_t step, uint64_t k,
                                                     const void *buf, size_t len)
    {
        if (eng_ != nullptr) {
            return eng_->isend(slot, q, step, k, buf, len);
        }
        if (len == 0) {
            return DR_OK;
        }
        Transport::Req req = nullptr;
        size_t got = 0;
        dr_status_t st = t_.isend(q, k, buf, len, &req);
        if (st != DR_OK) {
            return engine().post_failed(st, q, step, true);
        }
        st = t_.reap(req, &got);
        if (st == DR_INPROGRESS) {
            /* Not copied by the transport: slow mode. */
            engine().adopt(slot, req, q, step, buf, len, true);
            return DR_OK;
        }
        return st == DR_OK ? DR_OK : engine().completed(st, q, step, true, got, len);
    }

    /* Post a receive (len 0 posts nothing); wait(slot) completes it. Fast mode, up to the
     * transport's take_max(): posted only if the wait grows long (deferred, below). */
    __attribute__((always_inline)) dr_status_t irecv(size_t slot, int q, uint32_t step, uint64_t k,
                                                     void *buf, size_t len)
    {
        if (eng_ != nullptr) {
            return eng_->irecv(slot, q, step, k, buf, len);
        }
        if (len == 0) {
            return DR_OK;
        }
        assert(slot < kLazyMaxSlots);
        Pending &r = rx_[slot];
        r.req = nullptr;
        if (len > t_.take_max()) {
            const dr_status_t st = t_.irecv(q, k, buf, len, &r.req);
            if (st != DR_OK) {
                return engine().post_failed(st, q, step, false);
            }
        }
        r.buf = buf;
        r.len = len;
        r.key = k;
        r.peer = q;
        r.step = step;
        pending_ |= 1u << slot;
        return DR_OK;
    }

    /* The transfer in slot is complete (a fast-mode send was when posted). */
    __attribute__((always_inline)) dr_status_t wait(size_t slot)
    {
        if (eng_ != nullptr) {
            return (unposted_ & 1u << slot) != 0 ? unposted_st_ : eng_->wait(slot);
        }
        return (pending_ & 1u << slot) != 0 ? wait_recv(slot) : DR_OK;
    }

    /* irecv() + wait(). */
    dr_status_t recv(size_t slot, int q, uint32_t step, uint64_t k, void *buf, size_t len)
    {
        const dr_status_t st = irecv(slot, q, step, k, buf, len);
        return st != DR_OK ? st : wait(slot);
    }

    /* wait() for every slot still running, in slot order (Engine::wait_all). */
    dr_status_t wait_all()
    {
        if (eng_ != nullptr) {
            return eng_->wait_all();
        }
        for (size_t s = 0; pending_ != 0 && s < kLazyMaxSlots; ++s) {
            if ((pending_ & 1u << s) != 0) {
                const dr_status_t st = wait_recv(s);
                if (st != DR_OK) {
                    return st;
                }
            }
        }
        return DR_OK;
    }

    /* The end of the call: in fast mode nothing runs (every receive was waited for, every
     * send completed) and st is DR_OK; otherwise the engine's finish() (a receive left
     * running by a schedule is its "internal error", as in an engine-run call). */
    dr_status_t finish(dr_status_t st, std::string *err)
    {
        if (eng_ == nullptr && pending_ == 0 && st == DR_OK) {
            if (err != nullptr) {
                err->clear();
            }
            return DR_OK;
        }
        return engine().finish(st, err);
    }
    dr_status_t finish(dr_status_t st, std::string *err, Scratch &scratch)
    {
        if (eng_ == nullptr && pending_ == 0 && st == DR_OK) {
            return finish(st, err);
        }
        return engine().finish(st, err, scratch);
    }

    /* The engine, built on first use (slow mode, after init()), with the receives running
     * adopted. Every way into slow mode comes here: cold, so GCC keeps those paths out of the
     * fast path's code (see Mr::log). Errors a schedule records itself go through it too. */
    __attribute__((cold, noinline)) Engine &engine()
    {
        if (eng_ == nullptr) {
            (void)build();
        }
        return *eng_;
    }

  private:
    /* A receive of fast mode. req nullptr: deferred, not posted (the transport's take()
     * receives it); posted where the engine takes over (post_deferred). */
    struct Pending {
        Transport::Req req;
        void *buf;
        size_t len;
        uint64_t key;
        int peer;
        uint32_t step;
    };

    /* A deferred receive posted, for the engine to adopt. On a failure the engine records
     * it (as a post in irecv() would have) and the slot is done with that status. */
    dr_status_t post_deferred(size_t slot)
    {
        Pending &r = rx_[slot];
        const dr_status_t st = t_.irecv(r.peer, r.key, r.buf, r.len, &r.req);
        if (st != DR_OK) {
            r.req = nullptr;
            pending_ &= ~(1u << slot);
        }
        return st;
    }

    __attribute__((cold, noinline)) dr_status_t build()
    {
        assert(peer_list_ != nullptr || peers_fn_ != nullptr); /* init() came first */
        if (note_slow_ != nullptr) {
            note_slow_();
        }
        eng_ = new (eng_mem_) Engine(t_, p_, algo_);
        int room[kLazyPeersRoom];
        const int *peers = peer_list_;
        size_t np = npeers_;
        if (peers == nullptr) {
            np = peers_fn_(p_, room);
            peers = room;
        }
        /* Within the engine's inline storage when lazy, so it cannot fail then (Params::fail
         * is never lazy). */
        const dr_status_t st = eng_->init(nslots_, peers, np);
        if (scratch_ != nullptr) {
            eng_->set_scratch(scratch_, scratch_len_);
        }
        for (size_t s = 0; pending_ != 0 && s < nslots_; ++s) {
            if ((pending_ & 1u << s) == 0) {
                continue;
            }
            const Pending &r = rx_[s];
            if (r.req == nullptr) {
                const dr_status_t pst = post_deferred(s);
                if (pst != DR_OK) {
                    unposted_ |= 1u << s;
                    unposted_st_ = eng_->post_failed(pst, r.peer, r.step, false);
                    continue;
                }
            }
            eng_->adopt(s, r.req, r.peer, r.step, r.buf, r.len, false);
            pending_ &= ~(1u << s);
        }
        return st;
    }

    /* Engine::wait for one receive, without the engine until it has waited
     * kAbortListenAfter: progress, the idle callback, the clock every kClockEvery polls. A
     * deferred receive (req nullptr) is the transport's take_wait() between progress calls
     * (the message, nearly always a copied send's, whole, then lands in the receive's buffer
     * as it arrives), and is posted when the engine takes over (a message in pieces, too
     * large or not come: the posted receive's to handle) once take_cancel() has given the
     * buffer back, or has found the message landed meanwhile. */
    /* Ends a take_wait() on every way out of wait_recv but those that end it themselves (a
     * take that returned, the cancel before the slow mode's receive): an exception from the
     * transport (out of memory) or the idle callback must not leave r.buf to be written
     * after the call has left, when its caller frees or reuses it. */
    struct TakeGuard {
        T &t;
        const Pending &r;
        bool armed;
        ~TakeGuard()
        {
            if (armed) {
                size_t n = 0;
                (void)t.take_cancel(r.peer, r.key, r.buf, &n);
            }
        }
    };

    dr_status_t wait_recv(size_t slot)
    {
        const Pending &r = rx_[slot];
        const bool deferred = r.req == nullptr;
        unsigned polls = 0, spins = 0;
        bool since_set = false;
        std::chrono::steady_clock::time_point since;
        TakeGuard guard{t_, r, deferred};
        for (;;) {
            size_t got = 0;
            const dr_status_t st =
                deferred ? t_.take_wait(r.peer, r.key, r.buf, r.len, &got) : t_.reap(r.req, &got);
            if (st != DR_INPROGRESS) {
                guard.armed = false; /* returned (or refused): no wait left */
                pending_ &= ~(1u << slot);
                if (st == DR_OK && got == r.len) {
                    return DR_OK;
                }
                return engine().completed(st, r.peer, r.step, false, got, r.len);
            }
            const int events = t_.progress();
            if ((++polls & (kClockEvery - 1)) == 0) {
                const auto now = std::chrono::steady_clock::now();
                if (!since_set) {
                    since = now;
                    since_set = true;
                } else if (std::chrono::duration<double>(now - since).count() >=
                           kAbortListenAfter) {
                    /* A long wait: the engine's, which listens for the peers' aborts from
                     * now on, as it would have here, and keeps the timeout (its inactivity
                     * span starts now, kAbortListenAfter later than an engine-run call's). */
                    if (deferred) {
                        size_t landed = 0;
                        guard.armed = false;
                        if (t_.take_cancel(r.peer, r.key, r.buf, &landed) == DR_OK) {
                            pending_ &= ~(1u << slot); /* it came as the wait ended */
                            return landed == r.len ? DR_OK
                                                   : engine().completed(DR_OK, r.peer, r.step,
                                                                        false, landed, r.len);
                        }
                        const dr_status_t pst = post_deferred(slot);
                        if (pst != DR_OK) {
                            return engine().post_failed(pst, r.peer, r.step, false);
                        }
                    }
                    Engine &e = engine(); /* adopts this receive */
                    e.listen_now();
                    return e.wait(slot);
                }
            }
            if (events == 0) {
                idle_poll(p_, &spins);
            }
        }
    }

    T &t_;
    const Params &p_;
    const char *const algo_;
    void (*const note_slow_)();
    const uint64_t key_base_;
    size_t nslots_ = 0, npeers_ = 0; /* init()'s */
    const int *peer_list_ = nullptr;
    PeersFn peers_fn_ = nullptr;
    uint32_t pending_ = 0; /* fast mode: slots whose receive runs (rx_) */
    uint32_t unposted_ = 0;           /* deferred receives build() could not post ... */
    dr_status_t unposted_st_ = DR_OK; /* ... and the engine's verdict on that */
    const char *scratch_ = nullptr;
    size_t scratch_len_ = 0;
    Engine *eng_ = nullptr;
    Pending rx_[kLazyMaxSlots]; /* read only where pending_ says */
    alignas(Engine) unsigned char eng_mem_[sizeof(Engine)];
};

} // namespace coll
} // namespace dualrail

#endif
