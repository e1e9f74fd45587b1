/*
 * Recursive doubling for small messages on a power-of-two rank count, without the
 * engine's set-up while nothing goes wrong.
 *
 * Purpose:  the latency of small allreduces, the calls iterative solvers make per
 *           iteration. The general schedule (allreduce_rd.cc) sets up per call what a
 *           round that sends a copied message and waits for one receive never uses:
 *           request slots, a three-buffer rotation for sends still running, the
 *           engine's abort and error bookkeeping. On an 8-byte call that set-up was a
 *           quarter of the call's own instructions (perf/instr_count.sh), nearly all
 *           of it between the call's entry and its send or between the peer's data
 *           arriving and the return: the latency. Here a round is one send, which the
 *           transport completes at once (ucx_mr copies small sends; the copy is what a
 *           plane loss re-sends), one receive and the reduction; the engine is built
 *           only when the call has to wait long, fails, or has a send that does not
 *           complete at once (slow mode, below).
 * Accepts:  n = 2^k, 2 <= n <= 2^kRdSmallMaxRounds, count >= 1, a blocking call (no
 *           Params::yield), no Params::fail; allreduce() sends it what recursive
 *           doubling would get up to kRdSmallMaxBytes (ucx_mr's default copy_max: larger
 *           sends are not copied, and every call would end in slow mode); the others run
 *           allreduce_rd.cc.
 * Limits:   power-of-two rank counts only (folding the extra ranks in and out is
 *           allreduce_rd.cc's); up to 2^kRdSmallMaxRounds ranks, so that the engine's
 *           request slots and peer lists fit its inline storage and building it in the
 *           middle of a call never allocates (and so never fails); two scratch vectors.
 * Results:  the wire schedule of allreduce_rd.cc for the same call, message for
 *           message: the same keys (step 1 + j in round j), partners (rank ^ 2^j),
 *           lengths and operand order (the lower rank's vector as `in`, the higher's as
 *           `inout`), so ranks on either path pair up, and the results are bit for bit
 *           those of the general schedule.
 *
 * Steps on 4 ranks ("<>" exchange and reduce):
 *
 *   step  what       rank 0   rank 1   rank 2   rank 3
 *    1    round 0    <>1      <>0      <>3      <>2
 *    2    round 1    <>2      <>3      <>0      <>1
 *
 * Buffers. `cur` is this rank's vector so far: the send buffer (read only), recvbuf, or
 * a scratch vector. A round receives the partner's vector into scratch[ri], never `cur`.
 * The lower rank of a pair reduces into what it received (`inout` = the higher's
 * vector), which becomes `cur`, and the next round receives into the other scratch
 * vector; the higher rank reduces into `cur` (copied to recvbuf first when it is the
 * send buffer). A round writes `cur` only once its send is complete, which in fast mode
 * it is when posted; at the end `cur` is copied to recvbuf unless it is recvbuf.
 *
 * Slow mode. The engine (engine.hpp) takes over for the rest of the call when a receive
 * has waited kAbortListenAfter (the point at which the engine starts listening for its
 * peers' aborts), when a send is still running after it was posted, or on an error: the
 * running transfers are adopted into its slots and everything after goes through it, so
 * timeouts, abort notices, the abort sent to the peers on an error and a send buffer left
 * with the transport are handled exactly as in the general schedule. Before that, a wait
 * drives the transport and idles as Engine::stalled does.
 */
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <new>

#include "algo/allreduce.hpp"
#include "algo/engine.hpp"
#include "algo/rd_math.hpp"
#include "dualrail/key.h"

namespace dualrail {
namespace coll {

namespace {

const char kAlgoName[] = "recursive doubling";
std::atomic<uint64_t> g_slow_calls{0};

class RdSmall {
  public:
    RdSmall(Transport &t, const Params &p)
        : t_(t), p_(p), n_(p.size), r_(p.rank), rounds_(rd_rounds(p.size)),
          bytes_(p.count * p.elem_size)
    {
        const dr_key_fields_t f = {p.comm_id, (uint32_t)p.kind, p.seq & kSeqMask, 0, 0, 0};
        (void)dr_key_pack(&f, &key_base_); /* fields bounded by allreduce()'s checks */
    }
    ~RdSmall()
    {
        if (eng_ != nullptr) {
            eng_->~Engine();
        }
    }
    RdSmall(const RdSmall &) = delete;
    RdSmall &operator=(const RdSmall &) = delete;

    dr_status_t run(Scratch &scratch, std::string *err)
    {
        const size_t stride = (bytes_ + 63) / 64 * 64;
        char *s = static_cast<char *>(scratch.reserve(2 * stride));
        if (s == nullptr) {
            /* Nothing posted yet: the engine tells the peers (as allreduce_rd.cc's
             * take_scratch, whose error is the same). */
            dr_status_t st = engine(nullptr, 0)
                                 .set_error(DR_ERR_NO_MEMORY,
                                            "out of memory for %zu bytes of scratch", 2 * bytes_);
            return eng_->finish(st, err);
        }
        tmp_[0] = s;
        tmp_[1] = s + stride;
        const dr_status_t st = rounds();
        if (eng_ != nullptr) {
            return eng_->finish(st, err, scratch);
        }
        if (err != nullptr) {
            err->clear();
        }
        return st;
    }

  private:
    static size_t slot_send(int j) { return 2 * (size_t)j; }
    static size_t slot_recv(int j) { return 2 * (size_t)j + 1; }

    uint64_t key(int step) const
    {
        return key_base_ | (uint64_t)step << (DR_KEY_BLOCK_BITS + DR_KEY_SEG_BITS);
    }

    /* The engine, built on first use with the schedule's peers (rd_peers: the fold peer, none
     * here, then each round's partner), and scratch as the range a running send may read. */
    Engine &engine(const char *scratch, size_t len)
    {
        if (eng_ == nullptr) {
            g_slow_calls.fetch_add(1, std::memory_order_relaxed);
            eng_ = new (eng_mem_) Engine(t_, p_, kAlgoName);
            int peers[kRdMaxPeers];
            const int np = rd_peers(r_, n_, peers);
            /* Within the engine's inline storage (kRdSmallMaxRounds), so it cannot fail. */
            (void)eng_->init(2 * (size_t)rounds_, peers, (size_t)np);
            if (scratch != nullptr) {
                eng_->set_scratch(scratch, len);
            }
        }
        return *eng_;
    }
    Engine &engine() { return engine(tmp_[0], tmp_[1] - tmp_[0] + bytes_); }

    dr_status_t rounds()
    {
        char *const R = static_cast<char *>(p_.recvbuf);
        const char *cur = p_.sendbuf != nullptr ? static_cast<const char *>(p_.sendbuf) : R;
        int ri = 0;
        for (int j = 0; j < rounds_; ++j) {
            const int q = r_ ^ (1 << j), step = rd_step_round(j);
            char *into = tmp_[ri];
            const dr_status_t st = exchange(j, q, step, cur, into);
            if (st != DR_OK) {
                return st;
            }
            if (r_ < q) {
                p_.reduce(cur, into, p_.count, p_.reduce_arg); /* lower's op higher's */
                cur = into;
                ri ^= 1;
            } else {
                char *mine = const_cast<char *>(cur);
                if (cur == p_.sendbuf) {
                    memcpy(R, cur, bytes_); /* the send buffer is read only */
                    mine = R;
                }
                p_.reduce(into, mine, p_.count, p_.reduce_arg);
                cur = mine;
            }
        }
        if (cur != R) {
            memcpy(R, cur, bytes_);
        }
        return DR_OK;
    }

    /* Round j: send cur to q, receive q's vector into `into`; both complete on return. */
    dr_status_t exchange(int j, int q, int step, const char *cur, char *into)
    {
        const uint64_t k = key(step);
        if (eng_ != nullptr) {
            dr_status_t st;
            if ((st = eng_->isend(slot_send(j), q, (uint32_t)step, k, cur, bytes_)) != DR_OK ||
                (st = eng_->irecv(slot_recv(j), q, (uint32_t)step, k, into, bytes_)) != DR_OK ||
                (st = eng_->wait(slot_recv(j))) != DR_OK) {
                return st;
            }
            return eng_->wait(slot_send(j)); /* cur is written once the round is over */
        }
        /* The send first: the partner waits for it (as allreduce_rd.cc). */
        Transport::Req sreq = nullptr, rreq = nullptr;
        size_t got = 0;
        dr_status_t st = t_.isend(q, k, cur, bytes_, &sreq);
        if (st != DR_OK) {
            return engine().post_failed(st, q, (uint32_t)step, true);
        }
        st = t_.reap(sreq, &got);
        if (st == DR_INPROGRESS) {
            /* Not copied by the transport: slow mode, which waits for it before cur is
             * written. */
            engine().adopt(slot_send(j), sreq, q, (uint32_t)step, cur, bytes_, true);
            if ((st = eng_->irecv(slot_recv(j), q, (uint32_t)step, k, into, bytes_)) != DR_OK ||
                (st = eng_->wait(slot_recv(j))) != DR_OK) {
                return st;
            }
            return eng_->wait(slot_send(j));
        }
        if (st != DR_OK) {
            return engine().completed(st, q, (uint32_t)step, true, got, bytes_);
        }
        if ((st = t_.irecv(q, k, into, bytes_, &rreq)) != DR_OK) {
            return engine().post_failed(st, q, (uint32_t)step, false);
        }
        return wait_recv(j, q, step, rreq, into);
    }

    /* Engine::wait for one receive, without the engine until it has waited
     * kAbortListenAfter: progress, the idle callback, the clock every kClockEvery polls. */
    dr_status_t wait_recv(int j, int q, int step, Transport::Req rreq, char *into)
    {
        unsigned polls = 0, spins = 0;
        bool since_set = false;
        std::chrono::steady_clock::time_point since;
        for (;;) {
            size_t got = 0;
            const dr_status_t st = t_.reap(rreq, &got);
            if (st != DR_INPROGRESS) {
                if (st == DR_OK && got == bytes_) {
                    return DR_OK;
                }
                return engine().completed(st, q, (uint32_t)step, false, got, bytes_);
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
                     * span starts now, kAbortListenAfter later than the general schedule's). */
                    engine().adopt(slot_recv(j), rreq, q, (uint32_t)step, into, bytes_, false);
                    eng_->listen_now();
                    return eng_->wait(slot_recv(j));
                }
            }
            if (events == 0) {
                if (p_.idle != nullptr) {
                    p_.idle(p_.idle_arg);
                } else if (++spins > 64) {
                    sched_yield(); /* ranks may share cores (as Engine::stalled) */
                }
            }
        }
    }

    Transport &t_;
    const Params &p_;
    const int n_, r_, rounds_;
    const size_t bytes_;
    uint64_t key_base_ = 0;
    char *tmp_[2] = {nullptr, nullptr};
    Engine *eng_ = nullptr;
    alignas(Engine) unsigned char eng_mem_[sizeof(Engine)];
};

} // namespace

bool allreduce_rd_small_fits(const Params &p)
{
    return p.size >= 2 && (p.size & (p.size - 1)) == 0 && rd_rounds(p.size) <= kRdSmallMaxRounds &&
           p.count >= 1 && p.count * p.elem_size <= kRdSmallMaxBytes && p.yield == nullptr &&
           p.fail == DR_OK;
}

uint64_t allreduce_rd_small_slow_calls()
{
    return g_slow_calls.load(std::memory_order_relaxed);
}

dr_status_t allreduce_rd_small(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    RdSmall rd(t, p);
    return rd.run(scratch, err);
}

} // namespace coll
} // namespace dualrail
