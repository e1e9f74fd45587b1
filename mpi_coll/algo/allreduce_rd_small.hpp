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
 * Slow mode. The engine is a LazyEngine (lazy_engine.hpp): built for the rest of the call
 * when a receive has waited kAbortListenAfter, when a send is still running after it was
 * posted, or on an error, with the running transfers adopted into its slots, so timeouts,
 * abort notices, the abort sent to the peers on an error and a send buffer left with the
 * transport are handled exactly as in the general schedule.
 */
#include <cstring>
#include <string>

#include "algo/allreduce.hpp"
#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/rd_math.hpp"

namespace dualrail {
namespace coll {

/* Counts a call that built the engine (allreduce_rd_small_slow_calls). */
void allreduce_rd_small_note_slow();

/* The engine's peers for a recursive doubling call (LazyEngine::PeersFn). */
inline size_t rd_small_peers(const Params &p, int *out)
{
    return (size_t)rd_peers(p.rank, p.size, out);
}

template <class T> class RdSmall {
  public:
    RdSmall(T &t, const Params &p)
        : p_(p), n_(p.size), r_(p.rank), rounds_(rd_rounds(p.size)), bytes_(p.count * p.elem_size),
          e_(t, p, "recursive doubling", allreduce_rd_small_note_slow)
    {
    }

    dr_status_t run(Scratch &scratch, std::string *err)
    {
        /* Lazy: allreduce_rd_small_fits() takes no yield and no fail, and up to
         * kRdSmallMaxRounds rounds fit the engine's inline storage. */
        dr_status_t st = e_.init(2 * (size_t)rounds_ + 2, 1 + (size_t)rounds_, rd_small_peers);
        const size_t stride = (bytes_ + 63) / 64 * 64;
        char *s = static_cast<char *>(scratch.reserve(2 * stride));
        if (s == nullptr) {
            /* Nothing posted yet: the engine tells the peers (as allreduce_rd.cc's
             * take_scratch, whose error is the same). */
            st = e_.engine().set_error(DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch",
                                       2 * bytes_);
            return e_.finish(st, err);
        }
        tmp_[0] = s;
        tmp_[1] = s + stride;
        e_.set_scratch(tmp_[0], stride + bytes_);
        if (st == DR_OK) {
            st = rounds();
        }
        return e_.finish(st, err, scratch);
    }

  private:
    static size_t slot_send(int j) { return 2 * (size_t)j; }
    static size_t slot_recv(int j) { return 2 * (size_t)j + 1; }
    size_t slot_fold() const { return 2 * (size_t)rounds_; }
    size_t slot_unfold() const { return 2 * (size_t)rounds_ + 1; }
    uint64_t key(int step) const { return e_.key((uint32_t)step, 0, 0); }

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
            if ((st = e_.isend(slot_fold(), q, rd_step_fold(), key(rd_step_fold()), cur, bytes_)) !=
                    DR_OK ||
                (st = e_.wait(slot_fold())) != DR_OK) {
                return st;
            }
            return e_.recv(slot_unfold(), q, rd_step_unfold(n_), key(rd_step_unfold(n_)), R,
                           bytes_);
        }
        int ri = 0;
        if (role == RdRole::kPartner) {
            /* Fold in: the extra rank's vector, reduced into as allreduce_rd.cc does (ours
             * as `in`). */
            char *into = tmp_[ri];
            if ((st = e_.recv(slot_fold(), rd_fold_peer(r_, n_), rd_step_fold(),
                              key(rd_step_fold()), into, bytes_)) != DR_OK) {
                return st;
            }
            p_.reduce(cur, into, p_.count, p_.reduce_arg);
            cur = into;
            ri ^= 1;
        }
        for (int j = 0; j < rounds_; ++j) {
            const int pv = v ^ (1 << j);
            const int q = pv < rem ? 2 * pv + 1 : pv + rem;
            const uint32_t step = (uint32_t)rd_step_round(j);
            const uint64_t k = key(step);
            char *into = tmp_[ri];
            /* The send first: the partner waits for it (as allreduce_rd.cc). cur is
             * written only once its send is complete. */
            if ((st = e_.isend(slot_send(j), q, step, k, cur, bytes_)) != DR_OK ||
                (st = e_.recv(slot_recv(j), q, step, k, into, bytes_)) != DR_OK ||
                (st = e_.wait(slot_send(j))) != DR_OK) {
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
            if ((st = e_.isend(slot_unfold(), q, rd_step_unfold(n_), key(rd_step_unfold(n_)), R,
                               bytes_)) != DR_OK) {
                return st;
            }
            return e_.wait(slot_unfold());
        }
        return DR_OK;
    }

    const Params &p_;
    const int n_, r_, rounds_;
    const size_t bytes_;
    char *tmp_[2] = {nullptr, nullptr};
    LazyEngine<T> e_;
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
