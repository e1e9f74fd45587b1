/*
 * Rabenseifner reduce: ring reduce-scatter, then a gather of the blocks to
 * the root.
 *
 * Purpose:  large messages. Every rank sends (n-1)/n of the message in the
 *           reduce-scatter and 1/n in the gather; the root receives (n-1)/n
 *           in each, against the whole message log2(n) times along a
 *           binomial tree's deepest path.
 * Accepts:  count >= 1 elements, 2 <= n <= kRingMaxRanks, any root, a
 *           commutative op. With fewer elements than ranks some blocks are
 *           empty; both sides skip them.
 * Limits:   as the ring reduce-scatter (reduce_scatter_ring.cc); scratch:
 *           the partial results (the message's size) on every rank, and the
 *           receive slots. Gather messages are one per segment of a block
 *           (ucx_mr stripes each over the planes).
 * Results:  the reduce-scatter is the ring allreduce's first phase with the
 *           allreduce's blocks (ring_block) and segments, so every element
 *           is combined in the same order: the same bits MPI_Allreduce's ring
 *           gives for the same inputs and segment_size.
 *
 * Steps on 4 ranks, root 2 (ring blocks; "g" the gather):
 *
 *   step  phase           rank 0    rank 1    rank 2    rank 3
 *    0    reduce-scatter  s0 r3+    s1 r0+    s2 r1+    s3 r2+
 *    1    reduce-scatter  s3 r2+    s0 r3+    s1 r0+    s2 r1+
 *    2    reduce-scatter  s2 r1+    s3 r2+    s0 r3+    s1 r0+
 *         (full result)   1         2         3         0
 *    3    gather          g1 ->2    g2 ->2    <-0,1,3   g0 ->2
 *
 * Buffer rules: partials go to scratch on every rank, the root's own block
 * of the result straight into recvbuf (in place the input's same bytes,
 * which no send reads: the root sends input block `root` at step 0 and
 * never receives it before the gather). The root posts the gather receives
 * into recvbuf once the reduce-scatter and its sends are done (in place
 * recvbuf is the input they read); the others send their block from the
 * scratch, waited for before the call returns.
 */
#include <vector>

#include "algo/engine.hpp"
#include "algo/reductions.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t reduce_rabenseifner(Transport &t, const Params &p, Scratch &scratch, std::string *err)
{
    Engine eng(t, p, "rabenseifner");
    const int n = p.size, r = p.rank, root = p.root;
    const size_t esz = p.elem_size;
    std::vector<Span> span((size_t)n);
    std::vector<int> peers;
    for (int j = 0; j < n; ++j) {
        span[(size_t)j] = ring_block(p.count, n, j);
    }
    const size_t maxb = ring_block_max(p.count, n);
    const int nseg = ring_rs_segments(maxb, esz, p.segment_size);
    const size_t slot_bytes = ring_rs_slot_bytes(maxb, esz, nseg);
    const size_t window = ring_rs_window((size_t)(n - 1) * (size_t)nseg, slot_bytes);
    const size_t rs_slots = ring_rs_slots(window, n, nseg);
    peers.push_back(ring_left(r, n));
    peers.push_back(ring_right(r, n));
    if (r == root) {
        for (int q = 0; q < n; ++q) {
            peers.push_back(q);
        }
    } else {
        peers.push_back(root);
    }
    /* gather slots after the ring's: the root's (n-1) x nseg receives, or nseg sends */
    dr_status_t st =
        eng.init(rs_slots + (size_t)(n - 1) * (size_t)nseg, peers.data(), peers.size());
    if (st != DR_OK) {
        return eng.finish(st, err);
    }
    const size_t slots_len = window * slot_bytes;
    const size_t need = slots_len + (p.count * esz + 63) / 64 * 64;
    char *scr = static_cast<char *>(scratch.reserve(need));
    if (scr == nullptr) {
        return eng.finish(
            eng.set_error(DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", need), err);
    }
    eng.set_scratch(scr, need);
    char *work = scr + slots_len, *rbuf = static_cast<char *>(p.recvbuf);
    const int mine = ring_owned_block(r, n);
    const Span own = span[(size_t)mine];
    const RingRs rs{static_cast<const char *>(p.sendbuf),
                    work,
                    r == root ? rbuf + own.offset * esz : work + own.offset * esz,
                    span.data(),
                    0,
                    n,
                    r,
                    nseg,
                    esz,
                    p.reduce,
                    p.reduce_arg,
                    scr,
                    window,
                    slot_bytes,
                    0};
    st = ring_rs_run(eng, rs);
    const uint32_t gstep = (uint32_t)(n - 1);
    size_t slot = rs_slots;
    if (st == DR_OK && r == root) {
        for (int q = 0; q < n && st == DR_OK; ++q) {
            const int j = ring_owned_block(q, n);
            for (int k = 0; k < nseg && q != root && st == DR_OK; ++k) {
                const Span g = ring_segment(span[(size_t)j], nseg, k);
                st = eng.irecv(slot++, q, gstep, eng.key(gstep, (uint32_t)j, (uint32_t)k),
                               rbuf + g.offset * esz, g.count * esz);
            }
        }
    } else if (st == DR_OK) {
        for (int k = 0; k < nseg && st == DR_OK; ++k) {
            const Span g = ring_segment(own, nseg, k);
            st = eng.isend(slot++, root, gstep, eng.key(gstep, (uint32_t)mine, (uint32_t)k),
                           work + g.offset * esz, g.count * esz);
        }
    }
    if (st == DR_OK) {
        st = eng.wait_all(); /* the gather's sends */
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
