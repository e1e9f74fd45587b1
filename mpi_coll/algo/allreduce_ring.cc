/*
 * Ring allreduce, pipelined in segments.
 *
 * Purpose:  large messages. Each rank sends and receives 2(n-1)/n of the
 *           buffer (the bandwidth optimum). Every block is reduced by one
 *           rank only, its owner, and then copied to the others, so all
 *           ranks hold bitwise the same result whatever the op's rounding.
 * Accepts:  count >= 1, 2 <= n <= kRingMaxRanks, a commutative op. With
 *           count < n some blocks are empty; both sides skip their transfers.
 * Limits:   2(n-1) steps must fit the key's 12-bit step field (n <= 2048,
 *           step 4095 is kept for aborts); at most kMaxSegments segments per
 *           block (the key's 4-bit field), so a large block gets larger
 *           segments instead of more. Scratch: `window` segment slots.
 *
 * Steps on 4 ranks: block sent to the right / block received from the left
 * (block b = elements ring_block(count, 4, b); "+" = reduced into recvbuf).
 *
 *   step  phase           rank 0    rank 1    rank 2    rank 3
 *    0    reduce-scatter  s0 r3+    s1 r0+    s2 r1+    s3 r2+
 *    1    reduce-scatter  s3 r2+    s0 r3+    s1 r0+    s2 r1+
 *    2    reduce-scatter  s2 r1+    s3 r2+    s0 r3+    s1 r0+
 *         (full result)   1         2         3         0
 *    3    allgather       s1 r0     s2 r1     s3 r2     s0 r3
 *    4    allgather       s0 r3     s1 r0     s2 r1     s3 r2
 *    5    allgather       s3 r2     s0 r3     s1 r0     s2 r1
 *
 * Pipeline. Each block is cut into nseg segments, so the schedule is
 * 2(n-1) x nseg units (step, segment), worked in order. A unit's receive goes
 * into a scratch slot (reduce-scatter) or straight into recvbuf (allgather);
 * receives run up to `window` units ahead, so segment k+1 is on the wire
 * while segment k is reduced. The moment a unit is done its segment is final
 * for the next step and is sent on at once; nothing waits for a whole step.
 *
 * Buffer rules (why the waits are where they are):
 *   - a send reads recvbuf (sendbuf at step 0) until the right neighbour has
 *     it; the only later write to that block is the allgather receive n-1
 *     steps on, so that receive is posted only once the send completed;
 *   - scratch slot u % window is reused by unit u + window, posted only after
 *     unit u was reduced;
 *   - out of place, sendbuf is read only: a block is copied into recvbuf just
 *     before its single local reduction, and block `rank` is never copied
 *     (the allgather overwrites it).
 */
#include <cstring>

#include "algo/allreduce.hpp"
#include "algo/engine.hpp"
#include "algo/ring_math.hpp"

namespace dualrail {
namespace coll {

namespace {

/* Receives in flight are bounded by this much scratch, within [2, 16] slots. */
constexpr size_t kScratchBudget = 8u << 20;
constexpr size_t kMinWindow = 2;
constexpr size_t kMaxWindow = 16;

class Ring {
  public:
    Ring(Transport &t, const Params &p)
        : p_(p), eng_(t, p, "ring"), n_(p.size), r_(p.rank), left_(ring_left(p.rank, p.size)),
          right_(ring_right(p.rank, p.size)), esz_(p.elem_size),
          src_(static_cast<const char *>(p.sendbuf != nullptr ? p.sendbuf : p.recvbuf)),
          dst_(static_cast<char *>(p.recvbuf)), plan_(p.count, p.size, p.elem_size, p.segment_size),
          nseg_(plan_.nseg), steps_(plan_.steps), units_(plan_.units), slot_bytes_(plan_.slot_bytes)
    {
        window_ = kScratchBudget / slot_bytes_;
        window_ = window_ < kMinWindow ? kMinWindow : window_ > kMaxWindow ? kMaxWindow : window_;
        window_ = window_ > units_ ? units_ : window_;
    }

    dr_status_t run(Scratch &scratch, std::string *err)
    {
        const int peers[2] = {left_, right_};
        dr_status_t st = eng_.init(window_ + units_, peers, 2);
        if (st != DR_OK) {
            return eng_.finish(st, err);
        }
        scr_ = static_cast<char *>(scratch.reserve(window_ * slot_bytes_));
        if (scr_ == nullptr) {
            return eng_.finish(eng_.set_error(DR_ERR_NO_MEMORY,
                                              "out of memory for %zu bytes of scratch",
                                              window_ * slot_bytes_),
                               err);
        }
        eng_.set_scratch(scr_, window_ * slot_bytes_);
        st = eng_.finish(schedule(), err);
        if (eng_.scratch_busy()) {
            scratch.abandon(); /* never the case today: the ring sends from sendbuf/recvbuf only */
        }
        return st;
    }

  private:
    size_t send_slot(size_t u) const { return window_ + u; }

    dr_status_t post_send(size_t u)
    {
        const int st = plan_.step_of(u), k = plan_.seg_of(u), b = ring_send_block(r_, n_, st);
        const Span s = plan_.span(b, k);
        const char *base = st == 0 ? src_ : dst_;
        return eng_.isend(send_slot(u), right_, (uint32_t)st,
                          eng_.key((uint32_t)st, (uint32_t)b, (uint32_t)k), base + s.offset * esz_,
                          s.count * esz_);
    }

    dr_status_t post_recv(size_t u)
    {
        const int st = plan_.step_of(u), k = plan_.seg_of(u), b = ring_recv_block(r_, n_, st);
        const Span s = plan_.span(b, k);
        char *buf = ring_is_reduce_step(n_, st) ? scr_ + (u % window_) * slot_bytes_
                                                : dst_ + s.offset * esz_;
        return eng_.irecv(u % window_, left_, (uint32_t)st,
                          eng_.key((uint32_t)st, (uint32_t)b, (uint32_t)k), buf, s.count * esz_);
    }

    /* An allgather receive overwrites the block this rank sent n-1 steps before. */
    dr_status_t ready_to_post(size_t u)
    {
        if (ring_is_reduce_step(n_, plan_.step_of(u))) {
            return DR_OK;
        }
        return eng_.test(send_slot(u - (size_t)(n_ - 1) * (size_t)nseg_));
    }

    dr_status_t complete(size_t u)
    {
        const int st = plan_.step_of(u), k = plan_.seg_of(u);
        if (ring_is_reduce_step(n_, st)) {
            const Span s = plan_.span(ring_recv_block(r_, n_, st), k);
            if (s.count != 0) {
                char *d = dst_ + s.offset * esz_;
                if (src_ != dst_) {
                    memcpy(d, src_ + s.offset * esz_, s.count * esz_);
                }
                p_.reduce(scr_ + (u % window_) * slot_bytes_, d, s.count, p_.reduce_arg);
            }
        }
        if (st + 1 < steps_) {
            return post_send(u + (size_t)nseg_); /* the block received now is sent next step */
        }
        return DR_OK;
    }

    dr_status_t schedule()
    {
        dr_status_t st;
        for (int k = 0; k < nseg_; ++k) {
            if ((st = post_send((size_t)k)) != DR_OK) {
                return st;
            }
        }
        size_t posted = 0, done = 0;
        while (done < units_) {
            while (posted < units_ && posted < done + window_) {
                st = ready_to_post(posted);
                if (st == DR_INPROGRESS) {
                    break;
                }
                if (st != DR_OK || (st = post_recv(posted)) != DR_OK) {
                    return st;
                }
                ++posted;
            }
            bool moved = false;
            while (done < posted) {
                st = eng_.test(done % window_);
                if (st == DR_INPROGRESS) {
                    break;
                }
                if (st != DR_OK || (st = complete(done)) != DR_OK) {
                    return st;
                }
                ++done;
                moved = true;
            }
            if (!moved) {
                const bool gated = done == posted;
                st = eng_.stalled(gated ? right_ : left_, (uint32_t)plan_.step_of(done));
                if (st != DR_OK) {
                    return st;
                }
            }
        }
        /* Our data is in recvbuf; the sends still read it until the right neighbour has it. */
        for (size_t u = 0; u < units_; ++u) {
            if ((st = eng_.wait(send_slot(u))) != DR_OK) {
                return st;
            }
        }
        return DR_OK;
    }

    const Params &p_;
    Engine eng_;
    const int n_, r_, left_, right_;
    const size_t esz_;
    const char *const src_;
    char *const dst_;
    const RingPlan plan_; /* the staged ring (device buffers) uses the same */
    const int nseg_, steps_;
    const size_t units_, slot_bytes_;
    char *scr_ = nullptr;
    size_t window_ = 1;
};

} // namespace

dr_status_t allreduce_ring(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    Ring ring(t, p);
    return ring.run(scratch, err);
}

} // namespace coll
} // namespace dualrail
