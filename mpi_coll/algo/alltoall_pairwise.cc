/*
 * Pairwise-exchange alltoall, steps in flight, pairs pipelined in segments.
 *
 * Purpose:  large blocks. Every rank sends each block once, straight from
 *           sendbuf into its place in the peer's recvbuf (n - 1 messages per
 *           rank, the bandwidth optimum), and in each step talks to one
 *           destination and one source only, so no node is the target of
 *           many senders at once (the incast a naive all-isend alltoall
 *           makes).
 * Accepts:  2 <= n <= kAlltoallMaxRanks; any block size (also 0 for some
 *           pairs: alltoallv's skipped pairs post nothing). Shared by
 *           alltoall (uniform blocks) and alltoallv (alltoallv_pairwise.cc).
 * Limits:   n - 1 steps in the key's step and block fields
 *           (pairwise_key_step/_block: up to 4094 x 4096 steps); at most kMaxSegments
 *           segments per pair (a larger pair gets larger segments). No
 *           scratch: sendbuf and recvbuf must not overlap (the entries copy
 *           the data away first for MPI_IN_PLACE).
 *
 * Steps on 4 ranks (s = sent to, r = received from):
 *
 *   step   rank 0    rank 1    rank 2    rank 3
 *    0     own block copied locally
 *    1     s1 r3     s2 r0     s3 r1     s0 r2
 *    2     s2 r2     s3 r3     s0 r0     s1 r1
 *    3     s3 r1     s0 r2     s1 r3     s2 r0
 *
 * Window. Steps s .. s + window - 1 are posted at once (their receives
 * first); step s + window is posted when every transfer of step s completed.
 * ucx_mr stripes each segment over the live planes by their weights, so one
 * pair's message keeps both planes busy, and the steps in flight keep them
 * busy across a step boundary. A window of 1 is the classic pairwise
 * exchange; a window of n - 1 posts everything at once.
 *
 * Buffer rules: a block of sendbuf is only read and a block of recvbuf is
 * written by exactly one receive (its source's), so transfers in flight
 * never touch the same bytes. A step's slots are reused window steps later,
 * only after all of that step's requests completed.
 */
#include <cstring>
#include <new>
#include <vector>

#include "algo/alltoall.hpp"
#include "algo/alltoall_math.hpp"
#include "algo/engine.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

namespace {

/* Request slots of one step: a receive and a send per segment. */
constexpr size_t kStepSlots = 2 * (size_t)kMaxSegments;

class Pairwise {
  public:
    Pairwise(Engine &eng, const Params &p, const PairwiseLayout &l, int window)
        : eng_(eng), p_(p), l_(l), w_(window)
    {
    }

    dr_status_t run()
    {
        const int n = p_.size;
        dr_status_t st;
        int posted = 1, done = 1;
        while (done < n) {
            while (posted < n && posted < done + w_) {
                if ((st = post_step(posted)) != DR_OK) {
                    return st;
                }
                ++posted;
            }
            bool moved = false, left = false;
            const size_t base = slot_base(done);
            for (size_t i = 0; i < kStepSlots; ++i) {
                if (!eng_.busy(base + i)) {
                    continue;
                }
                st = eng_.test(base + i);
                if (st == DR_INPROGRESS) {
                    left = true;
                } else if (st != DR_OK) {
                    return st;
                } else {
                    moved = true;
                }
            }
            if (!left) {
                ++done;
            } else if (!moved && (st = eng_.stalled(pairwise_from(p_.rank, n, done),
                                                    (uint32_t)done)) != DR_OK) {
                return st;
            }
        }
        return DR_OK;
    }

  private:
    size_t slot_base(int s) const { return (size_t)((s - 1) % w_) * kStepSlots; }

    dr_status_t post_step(int s)
    {
        const int n = p_.size, to = pairwise_to(p_.rank, n, s), from = pairwise_from(p_.rank, n, s);
        const size_t base = slot_base(s);
        const size_t rlen = l_.recv_len(from), slen = l_.send_len(to);
        /* Both ends of a pair derive the segmentation from the same byte count. */
        const int rseg = pipeline_segments(rlen, p_.segment_size);
        const int sseg = pipeline_segments(slen, p_.segment_size);
        char *rbase = l_.recv + l_.recv_off(from);
        const char *sbase = l_.send + l_.send_off(to);
        dr_status_t st;
        const uint32_t kstep = pairwise_key_step(s), kblock = pairwise_key_block(s);
        for (int k = 0; k < rseg; ++k) {
            if ((st = eng_.irecv(
                     base + 2 * (size_t)k, from, (uint32_t)s, eng_.key(kstep, kblock, (uint32_t)k),
                     rbase + even_offset(rlen, rseg, k), even_len(rlen, rseg, k))) != DR_OK) {
                return st;
            }
        }
        for (int k = 0; k < sseg; ++k) {
            if ((st = eng_.isend(base + 2 * (size_t)k + 1, to, (uint32_t)s,
                                 eng_.key(kstep, kblock, (uint32_t)k),
                                 sbase + even_offset(slen, sseg, k), even_len(slen, sseg, k))) !=
                DR_OK) {
                return st;
            }
        }
        return DR_OK;
    }

    Engine &eng_;
    const Params &p_;
    const PairwiseLayout &l_;
    const int w_;
};

} // namespace

dr_status_t pairwise_run(Transport &t, const Params &p, const PairwiseLayout &in, size_t extent,
                         int window, const char *algo, Scratch &scratch, std::string *err)
{
    Engine eng(t, p, algo);
    const int n = p.size, r = p.rank;
    const int w = window < 1 ? 1 : window > n - 1 ? n - 1 : window;
    PairwiseLayout l = in;
    std::vector<int> peers;
    dr_status_t st = DR_OK;
    try {
        peers.reserve((size_t)n - 1);
        for (int s = 1; s < n; ++s) {
            peers.push_back(pairwise_to(r, n, s));
        }
    } catch (const std::bad_alloc &) {
        st = eng.set_error(DR_ERR_NO_MEMORY, "out of memory for %d peers", n);
    }
    if (st == DR_OK) {
        st = eng.init((size_t)w * kStepSlots, peers.data(), peers.size());
    }
    if (st == DR_OK && l.send == nullptr) {
        /* In place: block q of recvbuf goes out at step q - r and is overwritten by the
         * receive of step r - q; with steps in flight the two overlap, so the blocks go
         * out of a copy (after init, so a failure here still tells the peers). */
        char *copy = static_cast<char *>(scratch.reserve(extent));
        if (copy == nullptr) {
            st = eng.set_error(DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", extent);
        } else {
            memcpy(copy, l.recv, extent);
            eng.set_scratch(copy, extent);
            l.send = copy;
        }
    }
    if (st == DR_OK && l.send_len(r) != l.recv_len(r)) {
        st = eng.set_error(DR_ERR_TRUNCATED,
                           "sends itself %zu bytes but expects %zu (do the counts agree?)",
                           l.send_len(r), l.recv_len(r));
    }
    if (st == DR_OK) {
        /* in place the own block is already where it belongs */
        if (l.send_len(r) != 0 && in.send != nullptr) {
            memcpy(l.recv + l.recv_off(r), l.send + l.send_off(r), l.send_len(r));
        }
        Pairwise pw(eng, p, l, w);
        st = pw.run();
    }
    return eng.finish(st, err, scratch);
}

dr_status_t alltoall_pairwise(Transport &t, const Params &p, int window, Scratch &scratch,
                              std::string *err)
{
    const PairwiseLayout l{static_cast<const char *>(p.sendbuf), static_cast<char *>(p.recvbuf),
                           p.count, nullptr};
    return pairwise_run(t, p, l, p.count * (size_t)p.size, window, "pairwise", scratch, err);
}

} // namespace coll
} // namespace dualrail
