#ifndef DUALRAIL_ALGO_ALLREDUCE_RD_SMALL_HPP
#define DUALRAIL_ALGO_ALLREDUCE_RD_SMALL_HPP

/*
 * Recursive doubling for small messages, without the engine's set-up while nothing goes
 * wrong.
 *
 * Purpose:  the latency of small allreduces, the calls iterative solvers make per
 *           iteration. The general schedule (allreduce_rd.cc) sets up per call what a
 *           round that sends a copied message and waits for one receive never uses:
 *           request slots, a three-buffer rotation for sends still running, the
 *           engine's abort and error bookkeeping. On an 8-byte call that set-up was about
 *           an eighth of the call's own instructions (perf/instr_count.sh), nearly all of
 *           it between the call's entry and its send or between the peer's data
 *           arriving and the return: the latency. Here a step is one send, which the
 *           transport completes at once (ucx_mr copies small sends; the copy is what a
 *           plane loss re-sends), one receive and the reduction; the engine is built
 *           only when the call has to wait long, fails, or has a send that does not
 *           complete at once (slow mode, below).
 * Accepts:  2 <= n < 2^(kRdSmallMaxRounds+1), count >= 1, a blocking call (no
 *           Params::yield), no Params::fail; allreduce() sends it what recursive
 *           doubling would get up to kRdSmallMaxBytes (ucx_mr's default copy_max:
 *           larger sends are not copied, and every call would end in slow mode); the
 *           others run allreduce_rd.cc.
 * Limits:   up to 255 ranks (kRdSmallMaxRounds rounds), so that the engine's request
 *           slots and peer list fit its inline storage and building it in the middle of
 *           a call never allocates (and so never fails); two scratch vectors.
 * Results:  the wire schedule of allreduce_rd.cc for the same call, message for
 *           message: the same steps, keys, partners (rd_math.hpp: the extra ranks fold
 *           out to rank + 1 and back), lengths and operand order (in a round the lower
 *           rank's vector as `in`, the higher's as `inout`; in the fold the partner's as
 *           `in`), so ranks on either path pair up, and the results are bit for bit
 *           those of the general schedule.
 *
 * Steps on 6 ranks (as allreduce_rd.cc: p = 4, ranks 0 and 2 fold out; "<>" exchange and
 * reduce, "->" send, "<-" receive):
 *
 *   step  what       rank 0   rank 1   rank 2   rank 3   rank 4   rank 5
 *    0    fold       ->1      <-0 +    ->3      <-2 +    .        .
 *    1    round 0    .        <>3      .        <>1      <>5      <>4
 *    2    round 1    .        <>4      .        <>5      <>1      <>3
 *    3    unfold     <-1      ->0      <-3      ->2      .        .
 *
 * Buffers. `cur` is this rank's vector so far: the send buffer (read only), recvbuf, or
 * a scratch vector. A round receives the partner's vector into scratch[ri], never `cur`.
 * The lower rank of a pair reduces into what it received (`inout` = the higher's
 * vector), which becomes `cur`, and the next round receives into the other scratch
 * vector; the higher rank reduces into `cur` (copied to recvbuf first when it is the
 * send buffer); the fold's partner reduces into what it received, as a lower rank. A
 * step writes `cur` only once its send is complete, which in fast mode it is when posted;
 * at the end `cur` is copied to recvbuf unless it is recvbuf. An extra rank receives the
 * result into recvbuf once its own send is complete (in place, that send reads it).
 *
 * Transport. A template on the transport type: allreduce_rd_small() runs it over any
 * Transport (the unit tests' fake); the C API's direct entry (dr_coll.cc) over MrTransport,
 * a final class, whose calls then go straight to ucx_mr instead of through the vtable.
 *
 * Slow mode. The engine (engine.hpp) takes over for the rest of the call when a receive
 * has waited kAbortListenAfter (the point at which the engine starts listening for its
 * peers' aborts), when a send is still running after it was posted, or on an error: the
 * running transfers are adopted into its slots and everything after goes through it, so
 * timeouts, abort notices, the abort sent to the peers on an error and a send buffer left
 * with the transport are handled exactly as in the general schedule. Before that, a wait
 * drives the transport and idles as Engine::stalled does.
 */
#include <chrono>
#include <cstring>
#include <new>
#include <string>

#include "algo/allreduce.hpp"
#include "algo/engine.hpp"
#include "algo/rd_math.hpp"

namespace dualrail {
namespace coll {

/* Counts a call that built the engine (allreduce_rd_small_slow_calls). */
void allreduce_rd_small_note_slow();

template <class T> class RdSmall {
  public:
    RdSmall(T &t, const Params &p)
        : t_(t), p_(p), n_(p.size), r_(p.rank), rounds_(rd_rounds(p.size)),
          bytes_(p.count * p.elem_size), key_base_(call_key(p))
    {
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
    size_t slot_fold() const { return 2 * (size_t)rounds_; }
    size_t slot_unfold() const { return 2 * (size_t)rounds_ + 1; }

    uint64_t key(int step) const { return step_key(key_base_, (uint32_t)step, 0, 0); }

    /* The engine, built on first use with the schedule's peers (rd_peers: the fold peer,
     * then each round's partner), and scratch as the range a running send may read. */
    __attribute__((cold, noinline)) Engine &engine(const char *scratch, size_t len)
    {
        if (eng_ == nullptr) {
            allreduce_rd_small_note_slow();
            eng_ = new (eng_mem_) Engine(t_, p_, "recursive doubling");
            int peers[kRdMaxPeers];
            const int np = rd_peers(r_, n_, peers);
            /* Within the engine's inline storage (kRdSmallMaxRounds), so it cannot fail. */
            (void)eng_->init(2 * (size_t)rounds_ + 2, peers, (size_t)np);
            if (scratch != nullptr) {
                eng_->set_scratch(scratch, len);
            }
        }
        return *eng_;
    }
    /* cold: every way into slow mode goes through here, so GCC keeps those paths out of
     * the fast path's code (see Mr::log). */
    __attribute__((cold, noinline)) Engine &engine()
    {
        return engine(tmp_[0], tmp_[1] - tmp_[0] + bytes_);
    }

    dr_status_t rounds()
    {
        char *const R = static_cast<char *>(p_.recvbuf);
        const char *cur = p_.sendbuf != nullptr ? static_cast<const char *>(p_.sendbuf) : R;
        const RdRole role = rd_role(r_, n_);
        /* rd_partner's arithmetic, its vrank and rem taken once per call */
        const int rem = rd_rem(n_), v = rd_vrank(r_, n_);
        dr_status_t st;
        if (role == RdRole::kExtra) {
            /* Fold out: our vector to rank + 1, the result back into recvbuf (which, in
             * place, the send reads: its completion comes first). */
            const int q = rd_fold_peer(r_, n_);
            if ((st = send(slot_fold(), q, rd_step_fold(), cur)) != DR_OK ||
                (st = send_done(slot_fold())) != DR_OK) {
                return st;
            }
            return recv(slot_unfold(), q, rd_step_unfold(n_), R);
        }
        int ri = 0;
        if (role == RdRole::kPartner) {
            /* Fold in: the extra rank's vector, reduced into as allreduce_rd.cc does (ours
             * as `in`). */
            char *into = tmp_[ri];
            if ((st = recv(slot_fold(), rd_fold_peer(r_, n_), rd_step_fold(), into)) != DR_OK) {
                return st;
            }
            p_.reduce(cur, into, p_.count, p_.reduce_arg);
            cur = into;
            ri ^= 1;
        }
        for (int j = 0; j < rounds_; ++j) {
            const int pv = v ^ (1 << j);
            const int q = pv < rem ? 2 * pv + 1 : pv + rem, step = rd_step_round(j);
            char *into = tmp_[ri];
            /* The send first: the partner waits for it (as allreduce_rd.cc). cur is
             * written only once its send is complete. */
            if ((st = send(slot_send(j), q, step, cur)) != DR_OK ||
                (st = recv(slot_recv(j), q, step, into)) != DR_OK ||
                (st = send_done(slot_send(j))) != DR_OK) {
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
        if (role == RdRole::kPartner) {
            /* Unfold: the result to the extra rank. */
            const int q = rd_fold_peer(r_, n_);
            if ((st = send(slot_unfold(), q, rd_step_unfold(n_), R)) != DR_OK) {
                return st;
            }
            return send_done(slot_unfold());
        }
        return DR_OK;
    }

    /* Post a send of buf to q at step. Fast mode: the transport completes it at once
     * (copied), or it is adopted by the engine (slow mode), which send_done() waits for. */
    __attribute__((always_inline)) dr_status_t send(size_t slot, int q, int step, const char *buf)
    {
        const uint64_t k = key(step);
        if (eng_ != nullptr) {
            return eng_->isend(slot, q, (uint32_t)step, k, buf, bytes_);
        }
        Transport::Req req = nullptr;
        size_t got = 0;
        dr_status_t st = t_.isend(q, k, buf, bytes_, &req);
        if (st != DR_OK) {
            return engine().post_failed(st, q, (uint32_t)step, true);
        }
        st = t_.reap(req, &got);
        if (st == DR_INPROGRESS) {
            /* Not copied by the transport: slow mode. */
            engine().adopt(slot, req, q, (uint32_t)step, buf, bytes_, true);
            return DR_OK;
        }
        return st == DR_OK ? DR_OK : engine().completed(st, q, (uint32_t)step, true, got, bytes_);
    }

    /* The send in slot is complete (at once in fast mode). */
    dr_status_t send_done(size_t slot) { return eng_ != nullptr ? eng_->wait(slot) : DR_OK; }

    /* Receive q's vector at step into `into`; complete on return. */
    __attribute__((always_inline)) dr_status_t recv(size_t slot, int q, int step, char *into)
    {
        const uint64_t k = key(step);
        if (eng_ != nullptr) {
            const dr_status_t st = eng_->irecv(slot, q, (uint32_t)step, k, into, bytes_);
            return st != DR_OK ? st : eng_->wait(slot);
        }
        Transport::Req req = nullptr;
        const dr_status_t st = t_.irecv(q, k, into, bytes_, &req);
        if (st != DR_OK) {
            return engine().post_failed(st, q, (uint32_t)step, false);
        }
        return wait_recv(slot, q, step, req, into);
    }

    /* Engine::wait for one receive, without the engine until it has waited
     * kAbortListenAfter: progress, the idle callback, the clock every kClockEvery polls. */
    dr_status_t wait_recv(size_t slot, int q, int step, Transport::Req rreq, char *into)
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
                    engine().adopt(slot, rreq, q, (uint32_t)step, into, bytes_, false);
                    eng_->listen_now();
                    return eng_->wait(slot);
                }
            }
            if (events == 0) {
                idle_poll(p_, &spins);
            }
        }
    }

    T &t_;
    const Params &p_;
    const int n_, r_, rounds_;
    const size_t bytes_;
    const uint64_t key_base_;
    char *tmp_[2] = {nullptr, nullptr};
    Engine *eng_ = nullptr;
    alignas(Engine) unsigned char eng_mem_[sizeof(Engine)];
};

/* allreduce_rd_small() over transport type T (a Transport). */
template <class T>
dr_status_t allreduce_rd_small_on(T &t, const Params &p, Scratch &scratch, std::string *err)
{
    RdSmall<T> rd(t, p);
    return rd.run(scratch, err);
}

} // namespace coll
} // namespace dualrail

#endif
