/*
 * Recursive doubling allreduce, with folding for any rank count.
 *
 * Purpose:  small messages: log2(p) rounds (+2 when n is not a power of two)
 *           of whole-vector exchanges, the latency optimum.
 * Accepts:  count >= 1, n >= 2, a commutative op. Any n (rd_math.hpp folds
 *           the extra ranks in and out); no rank limit from the keys.
 * Limits:   every round moves the whole vector, so bandwidth is log2(p) times
 *           the ring's: AUTO uses it up to rd_max_bytes. Scratch: up to three
 *           vectors.
 * Results:  in a round both partners reduce the same two vectors with the
 *           same operand order: the lower rank's vector as `in`, the higher
 *           rank's as `inout` (as Open MPI's recursive doubling does). A
 *           commutative op is not always symmetric in its bits: Open MPI's
 *           MPI_MAX of doubles keeps `in` when the comparison fails, so
 *           max(NaN, 1) and max(1, NaN) differ, as do min(+0, -0) and
 *           min(-0, +0); with the order fixed, both partners compute the same
 *           bits and by induction all ranks end with the same result (a rank
 *           that branches on an allreduced maximum takes the same branch as
 *           the others). The extra ranks get a copy of their partner's result.
 *
 * Steps on 6 ranks (p = 4, rem = 2; ranks 0 and 2 fold out; "<>" exchange
 * and reduce, "->" send, "<-" receive):
 *
 *   step  what       rank 0   rank 1    rank 2   rank 3    rank 4   rank 5
 *   (vrank)          -        0         -        1         2        3
 *    0    fold       ->1      <-0 +     ->3      <-2 +     .        .
 *    1    round 0    .        <>3       .        <>1       <>5      <>4
 *    2    round 1    .        <>4       .        <>5       <>1      <>3
 *    3    unfold     <-1      ->0       <-3      ->2       .        .
 *
 * Buffers. The reduction writes into the buffer a round received into, never
 * into the one being sent, so no round waits for its own send: the received
 * buffer becomes the value sent next round. Three writable buffers rotate
 * (recvbuf and two scratch vectors); a buffer is received into again two
 * rounds after it was sent, once that send completed. The rotation is
 * planned backwards so the last reduction lands in recvbuf; out of place,
 * round one sends straight from sendbuf, which is never written. The higher
 * rank of a round receives into a fourth buffer (scratch) instead, copies
 * its own vector into the rotation's buffer and reduces the received one
 * into it: the operands' order above, at the cost of one copy of the
 * vector (at most rd_max_bytes) per such round.
 */
#include <cstring>

#include "algo/allreduce.hpp"
#include "algo/engine.hpp"
#include "algo/rd_math.hpp"

namespace dualrail {
namespace coll {

namespace {

enum { kBufRecv = 0, kBufS1 = 1, kBufS2 = 2, kBufSend = 3, kBufTheirs = 4 };

class Rd {
  public:
    Rd(Transport &t, const Params &p)
        : p_(p), eng_(t, p, "recursive doubling"), n_(p.size), r_(p.rank),
          rounds_(rd_rounds(p.size)), role_(rd_role(p.rank, p.size)), bytes_(p.count * p.elem_size),
          inplace_(p.sendbuf == nullptr)
    {
        reductions_ = rounds_ + (role_ == RdRole::kPartner ? 1 : 0);
        /* Backwards from the end: ..., S2, S1, recvbuf. In place the first target
         * must not be recvbuf (it holds our data, sent in the same round). */
        backwards_ = !(inplace_ && (reductions_ - 1) % 3 == 0);
    }

    dr_status_t run(Scratch &scratch, std::string *err)
    {
        int peers[kRdMaxPeers];
        const int np = rd_peers(r_, n_, peers);
        dr_status_t st = eng_.init(slot_unfold() + 1, peers, (size_t)np);
        if (st != DR_OK) {
            return eng_.finish(st, err);
        }
        buf_[kBufRecv] = static_cast<char *>(p_.recvbuf);
        buf_[kBufSend] = const_cast<char *>(static_cast<const char *>(p_.sendbuf));
        if (role_ != RdRole::kExtra && (st = take_scratch(scratch)) != DR_OK) {
            return eng_.finish(st, err);
        }
        st = eng_.finish(role_ == RdRole::kExtra ? extra() : participate(), err);
        if (eng_.scratch_busy()) {
            scratch.abandon(); /* rounds send from scratch: a send left running still reads it */
        }
        return st;
    }

  private:
    size_t slot_fold_recv() const { return 0; }
    size_t slot_fold_send() const { return 1; }
    size_t slot_round_recv(int j) const { return 2 + 2 * (size_t)j; }
    size_t slot_round_send(int j) const { return 3 + 2 * (size_t)j; }
    size_t slot_unfold() const { return 2 + 2 * (size_t)rounds_; }

    /* Which writable buffer reduction i (0-based) lands in. */
    int target(int i) const { return backwards_ ? (reductions_ - 1 - i) % 3 : (i + 1) % 3; }

    uint64_t key(int step) const { return eng_.key((uint32_t)step, 0, 0); }

    /* The scratch vectors the rotation receives into, before any traffic (a rank that
     * cannot have them fails before its peers wait for it), and the one a higher rank
     * receives into. */
    dr_status_t take_scratch(Scratch &scratch)
    {
        /* The highest buffer index target() gives, i.e. how many scratch vectors: the
         * rotation visits 0, 1, 2 downwards (backwards) or 1, 2, 0 upwards. */
        const int rotation =
            backwards_ ? (reductions_ < 3 ? reductions_ - 1 : 2) : (reductions_ < 2 ? 1 : 2);
        /* Round j pairs vranks differing in bit j, and real ranks keep the vranks' order:
         * this rank is the higher of some round's pair (it receives into its own vector,
         * see Results) unless its vrank is 0. */
        const bool theirs = rd_vrank(r_, n_) > 0;
        const int need = rotation + (theirs ? 1 : 0);
        const size_t stride = (bytes_ + 63) / 64 * 64;
        char *s = need == 0 ? nullptr : static_cast<char *>(scratch.reserve(stride * (size_t)need));
        if (need != 0 && s == nullptr) {
            return eng_.set_error(DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch",
                                  bytes_ * (size_t)need);
        }
        buf_[kBufS1] = rotation >= 1 ? s : nullptr;
        buf_[kBufS2] = rotation >= 2 ? s + stride : nullptr;
        buf_[kBufTheirs] = theirs ? s + stride * (size_t)rotation : nullptr;
        eng_.set_scratch(s, stride * (size_t)need);
        return DR_OK;
    }

    /* Fold out: hand our data to rank + 1, get the result back. */
    dr_status_t extra()
    {
        const int q = rd_fold_peer(r_, n_);
        const int fold = rd_step_fold(), unfold = rd_step_unfold(n_);
        char *R = buf_[kBufRecv];
        const char *mine = inplace_ ? R : buf_[kBufSend];
        dr_status_t st;
        if (!inplace_ &&
            (st = eng_.irecv(slot_unfold(), q, unfold, key(unfold), R, bytes_)) != DR_OK) {
            return st;
        }
        if ((st = eng_.isend(slot_fold_send(), q, fold, key(fold), mine, bytes_)) != DR_OK) {
            return st;
        }
        if (inplace_) {
            /* recvbuf is being sent: receive into it only once the partner has it. */
            if ((st = eng_.wait(slot_fold_send())) != DR_OK ||
                (st = eng_.irecv(slot_unfold(), q, unfold, key(unfold), R, bytes_)) != DR_OK) {
                return st;
            }
        }
        if ((st = eng_.wait(slot_unfold())) != DR_OK) {
            return st;
        }
        return eng_.wait(slot_fold_send());
    }

    dr_status_t participate()
    {
        int cur = inplace_ ? kBufRecv : kBufSend;
        long last_send[3] = {-1, -1, -1}; /* slot of the latest send from each writable buffer */
        int i = 0;
        dr_status_t st;
        if (role_ == RdRole::kPartner) {
            const int q = rd_fold_peer(r_, n_), fold = rd_step_fold();
            const int t = target(i++);
            if ((st = eng_.irecv(slot_fold_recv(), q, fold, key(fold), buf_[t], bytes_)) != DR_OK ||
                (st = eng_.wait(slot_fold_recv())) != DR_OK) {
                return st;
            }
            p_.reduce(buf_[cur], buf_[t], p_.count, p_.reduce_arg);
            cur = t;
        }
        for (int j = 0; j < rounds_; ++j) {
            const int q = rd_partner(r_, n_, j), step = rd_step_round(j);
            const int t = target(i++);
            if (last_send[t] >= 0 && (st = eng_.wait((size_t)last_send[t])) != DR_OK) {
                return st;
            }
            const bool hi = r_ > q; /* the higher of the pair: see Results */
            char *into = buf_[hi ? kBufTheirs : t];
            /* The send first: the partner waits for it, and posting our receive (which
             * only has to be in place before we next drive the transport) is time the
             * message would otherwise spend waiting behind it. */
            if ((st = eng_.isend(slot_round_send(j), q, step, key(step), buf_[cur], bytes_)) !=
                    DR_OK ||
                (st = eng_.irecv(slot_round_recv(j), q, step, key(step), into, bytes_)) != DR_OK) {
                return st;
            }
            if (cur != kBufSend) {
                last_send[cur] = (long)slot_round_send(j);
            }
            if ((st = eng_.wait(slot_round_recv(j))) != DR_OK) {
                return st;
            }
            /* t = lower's op higher's, the same operands in the same places on both ranks */
            if (hi) {
                memcpy(buf_[t], buf_[cur], bytes_); /* t is no send's source (waited above) */
                p_.reduce(into, buf_[t], p_.count, p_.reduce_arg);
            } else {
                p_.reduce(buf_[cur], buf_[t], p_.count, p_.reduce_arg);
            }
            cur = t;
        }
        if (cur != kBufRecv) {
            if (last_send[kBufRecv] >= 0 &&
                (st = eng_.wait((size_t)last_send[kBufRecv])) != DR_OK) {
                return st;
            }
            memcpy(buf_[kBufRecv], buf_[cur], bytes_);
        }
        if (role_ == RdRole::kPartner) {
            const int unfold = rd_step_unfold(n_);
            if ((st = eng_.isend(slot_unfold(), rd_fold_peer(r_, n_), unfold, key(unfold),
                                 buf_[kBufRecv], bytes_)) != DR_OK) {
                return st;
            }
        }
        return eng_.wait_all();
    }

    const Params &p_;
    Engine eng_;
    const int n_, r_, rounds_;
    const RdRole role_;
    const size_t bytes_;
    const bool inplace_;
    int reductions_ = 0;
    bool backwards_ = true;
    char *buf_[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
};

} // namespace

dr_status_t allreduce_rd(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    Rd rd(t, p);
    return rd.run(scratch, err);
}

} // namespace coll
} // namespace dualrail
