/*
 * What every algorithm needs around its schedule: a fixed table of request
 * slots, keys, waits that never hang, and an orderly exit on error.
 *
 * Waits. An algorithm tests the slots it cares about; when nothing of its own
 * completed it calls stalled(), which drives the transport and then
 *   - fails with DR_ERR_TIMEOUT once p.timeout seconds passed without any of
 *     this call's requests completing (an inactivity limit, not a deadline:
 *     a long transfer that keeps completing segments never trips it);
 *   - calls p.idle when the transport reported nothing at all (the glue
 *     yields the CPU or runs opal_progress there); without p.idle it yields
 *     after a short spin;
 *   - listens for aborts (below) once the call has waited a little.
 * A non-blocking collective's schedule runs as a task (dr_coll_nb.cc): its
 * p.yield is called at every such wait instead, suspending the task until the
 * progress callback resumes it.
 *
 * Aborts. A rank that fails (transport error, timeout, a peer's abort) tells
 * every peer of its schedule, except the failed ones, with a 4-byte message
 * under the reserved step kAbortStep of this collective's key. A rank that
 * has waited more than kAbortListenAfter posts receives for those messages
 * from all its schedule peers, and fails when one arrives. So an error on one
 * link spreads along the schedule and every rank returns an error, even
 * without a timeout. Fast collectives never post these receives; they are
 * cancelled on success.
 *
 * Cleanup on error: running receives are cancelled (their buffers are never
 * written again) and released; running sends cannot be cancelled and are
 * left to the transport (ucx_mr frees them at dr_mr_destroy; UCX may still
 * read their buffers while it retries). When such a send reads scratch
 * memory, scratch_busy() says so and the algorithm abandons its Scratch
 * instead of freeing it.
 *
 * The schedules small messages take (trees, recursive doubling and halving,
 * Bruck, dissemination, linear v) hold a LazyEngine (lazy_engine.hpp) instead:
 * the same calls, this engine built only once the call needs it.
 */
#ifndef DUALRAIL_ALGO_ENGINE_HPP
#define DUALRAIL_ALGO_ENGINE_HPP

#include <sched.h>

#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>

#include "algo/coll.hpp"
#include "algo/transport.hpp"
#include "dualrail/key.h"
#include "dualrail/status.h"

namespace dualrail {
namespace coll {

/* Highest step value: never used by a schedule (ring allreduce: at most 4093; every other
 * schedule stays below n + 1 <= 2049 or 2 log2(n) + 2). */
constexpr uint32_t kAbortStep = 0xfff;
/* Seconds a call waits before it listens for aborts from its peers. */
constexpr double kAbortListenAfter = 0.002;
/* stalled() reads the clock once per this many polls without a completion (a power of 2). */
constexpr unsigned kClockEvery = 8;

/*
 * An array of at most capacity() elements that lives inside its owner for up to N of
 * them and on the heap beyond: a small collective (recursive doubling, a barrier, a
 * binomial tree on a few ranks) then allocates nothing per call, which was three
 * malloc/free pairs in the engine of every 8-byte allreduce. reserve() may throw
 * std::bad_alloc; push_back() never allocates (it stays within what was reserved).
 */
template <class T, size_t N> class InlineArray {
    /* Elements are placed in raw storage: constructing N of them per call was most of
     * what the engine itself cost an 8-byte allreduce. */
    static_assert(std::is_trivially_copyable<T>::value && std::is_trivially_destructible<T>::value,
                  "InlineArray holds plain records");

  public:
    InlineArray() = default;
    InlineArray(const InlineArray &) = delete;
    InlineArray &operator=(const InlineArray &) = delete;

    void reserve(size_t n)
    {
        if (n <= cap_) {
            return;
        }
        std::unique_ptr<T[]> grown(new T[n]);
        for (size_t i = 0; i < size_; ++i) {
            grown[i] = data_[i];
        }
        heap_ = std::move(grown);
        data_ = heap_.get();
        cap_ = n;
    }
    /* n elements of all-zero bytes (for a T whose zero bytes are its empty value). */
    void assign_zero(size_t n)
    {
        reserve(n);
        memset(static_cast<void *>(data_), 0, n * sizeof(T));
        size_ = n;
    }
    void push_back(const T &v)
    {
        assert(size_ < cap_);
        new (&data_[size_++]) T(v);
    }
    size_t size() const { return size_; }
    size_t capacity() const { return cap_; }
    T &operator[](size_t i) { return data_[i]; }
    const T &operator[](size_t i) const { return data_[i]; }
    T *begin() { return data_; }
    T *end() { return data_ + size_; }
    const T *begin() const { return data_; }
    const T *end() const { return data_ + size_; }

  private:
    alignas(T) unsigned char raw_[N * sizeof(T)];
    T *data_ = reinterpret_cast<T *>(raw_);
    size_t size_ = 0, cap_ = N;
    std::unique_ptr<T[]> heap_;
};

/* The key of call p with every step field zero (communicator, kind, sequence), packed once
 * per call, and a step's key from it. Every kind's entry bounds the fields first. */
inline uint64_t call_key(const Params &p)
{
    const dr_key_fields_t f = {p.comm_id, (uint32_t)p.kind, p.seq & kSeqMask, 0, 0, 0};
    uint64_t k = 0;
    const bool ok = dr_key_pack(&f, &k);
    assert(ok);
    (void)ok;
    return k;
}
inline uint64_t step_key(uint64_t call, uint32_t step, uint32_t block, uint32_t seg)
{
    assert(step <= DR_KEY_MASK_(DR_KEY_STEP_BITS) && block <= DR_KEY_MASK_(DR_KEY_BLOCK_BITS) &&
           seg <= DR_KEY_MASK_(DR_KEY_SEG_BITS));
    return call | (uint64_t)step << (DR_KEY_BLOCK_BITS + DR_KEY_SEG_BITS) |
           (uint64_t)block << DR_KEY_SEG_BITS | seg;
}

/* A wait's poll that found nothing (events == 0): p's idle hook, else a yield after 64 such
 * polls in a row (*spins), for ranks that share cores. */
inline void idle_poll(const Params &p, unsigned *spins)
{
    if (p.idle != nullptr) {
        p.idle(p.idle_arg);
    } else if (++*spins > 64) {
        sched_yield();
    }
}

class Engine {
  public:
    Engine(Transport &t, const Params &p, const char *algo);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    /* Allocate nslots request slots; peers: every rank this rank exchanges with. */
    dr_status_t init(size_t nslots, const int *peers, size_t npeers);

    /* The key of (step, block, seg) in this call: the call's part (communicator, kind,
     * sequence) is packed once, in the constructor. */
    uint64_t key(uint32_t step, uint32_t block, uint32_t seg) const
    {
        return step_key(key_base_, step, block, seg);
    }

    /* Start a transfer in a free slot. len 0 posts nothing. */
    dr_status_t isend(size_t slot, int peer, uint32_t step, uint64_t key, const void *buf,
                      size_t len);
    dr_status_t irecv(size_t slot, int peer, uint32_t step, uint64_t key, void *buf, size_t len);

    /* A request the caller posted itself (an algorithm that runs without the engine while
     * nothing goes wrong: allreduce_rd_small.hpp) into a free slot, as post() would have. */
    void adopt(size_t slot, Transport::Req req, int peer, uint32_t step, const void *buf,
               size_t len, bool send);
    /* The verdict on a finished transfer (transport status st, got bytes of len): DR_OK, or
     * the error recorded as test() records it (the peer marked failed). */
    dr_status_t completed(dr_status_t st, int peer, uint32_t step, bool send, size_t got,
                          size_t len);
    /* A transfer that could not be posted (transport status st): recorded as post() does. */
    dr_status_t post_failed(dr_status_t st, int peer, uint32_t step, bool send)
    {
        return transport_error(st, peer, step, send ? "send to" : "receive from");
    }

    /* Listen for the peers' aborts from now on (an algorithm that has waited
     * kAbortListenAfter without the engine: stalled() would start only after as long again). */
    void listen_now()
    {
        if (!listening_) {
            (void)listen();
        }
    }

    bool busy(size_t slot) const { return ops_[slot].req != nullptr; }
    /* DR_OK once the slot's request completed (it is released) or when the slot is free. */
    dr_status_t test(size_t slot);
    /* test() + stalled() until the slot is done. */
    dr_status_t wait(size_t slot);
    /* wait() for every slot still running, in slot order: the end of a schedule. Returns at
     * once when none runs (a small collective's copied sends are complete already). */
    dr_status_t wait_all();
    /* Nothing completed: drive the network, idle, check timeout and aborts. */
    dr_status_t stalled(int peer, uint32_t step);

    /* Record the first error (printf format, lowercase, one line); returns st. */
    dr_status_t set_error(dr_status_t st, const char *fmt, ...)
        __attribute__((format(printf, 3, 4), cold));

    /* Leave: on success drop the abort receives; on error clean up and notify peers. */
    dr_status_t finish(dr_status_t st, std::string *err);
    /* The same, for a schedule that sends from scratch: when a send left running may still
     * read it (scratch_busy()), the scratch is abandoned rather than freed. */
    dr_status_t finish(dr_status_t st, std::string *err, Scratch &scratch)
    {
        st = finish(st, err);
        if (scratch_busy()) {
            scratch.abandon();
        }
        return st;
    }

    /* The scratch range, so finish() can tell whether an abandoned send still reads it. */
    void set_scratch(const void *buf, size_t len)
    {
        scratch_ = static_cast<const char *>(buf);
        scratch_len_ = len;
    }
    bool scratch_busy() const { return scratch_busy_; }

  private:
    dr_status_t post(size_t slot, int peer, uint32_t step, uint64_t key, void *buf, size_t len,
                     bool send);
    /* A free slot is all zero bytes (init() clears the table with one memset); the other
     * fields mean something only while req is set. */
    struct Op {
        Transport::Req req = nullptr;
        const void *buf = nullptr;
        int peer = 0;
        uint32_t step = 0;
        size_t len = 0;
        bool send = false;
    };
    struct Listener {
        int peer = -1;
        Transport::Req req = nullptr;
        int32_t code = 0;
    };

    struct Name {
        char s[96];
    };
    Name name(int peer) const;
    dr_status_t transport_error(dr_status_t st, int peer, uint32_t step, const char *what);
    /* listeners_ from peers_ (each peer once, neither -1 nor this rank); once per call. */
    void peer_set();
    dr_status_t listen();
    dr_status_t check_aborts();
    void notify_peers(dr_status_t st);
    void mark_failed(int peer);
    bool failed(int peer) const;

    Transport &t_;
    const Params &p_;
    const char *algo_;
    /* Inline sizes: recursive doubling on up to 64 ranks (2 + 2 log2 n + 1 slots, log2 n + 1
     * peers); larger schedules move far more data than one allocation costs. */
    InlineArray<Op, 16> ops_;
    /* The schedule's peers as init() got them (duplicates, -1 and self included): the
     * listener set is built from them only once a call waits long enough to listen, which a
     * small collective never does. */
    InlineArray<int, 8> peers_;
    InlineArray<Listener, 8> listeners_;
    InlineArray<int, 8> failed_;
    uint64_t key_base_ = 0;
    size_t running_ = 0; /* slots holding a request */
    bool listening_ = false;
    int aborted_by_ = -1;
    uint64_t completions_ = 0;
    uint64_t seen_ = 0;
    unsigned idle_spins_ = 0;
    unsigned polls_ = 0;
    std::chrono::steady_clock::time_point last_; /* start of the current inactivity span */
    bool since_set_ = false;                     /* last_ read since the last completion */
    dr_status_t status_ = DR_OK;
    std::string error_;
    const char *scratch_ = nullptr;
    size_t scratch_len_ = 0;
    bool scratch_busy_ = false;
};

} // namespace coll
} // namespace dualrail

#endif
