/*
 * Ring allgatherv, pipelined in segments.
 *
 * Purpose:  large allgathervs: each rank sends and receives every other
 *           rank's block once, to and from fixed neighbours, the schedule of
 *           allgather_ring.cc (ring_allgather_run) over blocks of their own
 *           sizes and places.
 * Accepts:  2 <= n <= kRingMaxRanks; blocks of any sizes, zeros included
 *           (both sides skip them), anywhere in recvbuf (not overlapping).
 * Limits:   n - 1 steps must fit the key's step field; segments per block:
 *           the largest block's count (at most kMaxSegments), every block cut
 *           into that many, so a small block has small segments. No scratch.
 *
 * Steps on 4 ranks (block b = rank b's, at its own displacement; s = sent to
 * the right, r = received from the left):
 *
 *   step   rank 0    rank 1    rank 2    rank 3
 *    0     s0 r3     s1 r0     s2 r1     s3 r2
 *    1     s3 r2     s0 r3     s1 r0     s2 r1
 *    2     s2 r1     s3 r2     s0 r3     s1 r0
 *
 * A skewed distribution (one rank holding most of the data) is as fast as
 * its largest block allows: every block travels n - 1 hops, one after the
 * other on each link, pipelined by segments; ucx_mr stripes every segment
 * over the planes.
 *
 * Buffer rules: as allgather_ring.cc (a rank receives only blocks it does
 * not hold and sends only blocks it holds, each block written once); the
 * entry puts this rank's block in place first.
 */
#include "algo/collectives.hpp"
#include "algo/engine.hpp"
#include "algo/gathers.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

dr_status_t allgatherv_ring(Transport &t, const Params &p, std::string *err)
{
    Engine eng(t, p, "ring");
    const int n = p.size;
    size_t max = 0;
    for (int r = 0; r < n; ++r) {
        max = p.counts[r] > max ? p.counts[r] : max;
    }
    RingAllgather ra{static_cast<char *>(p.recvbuf),         0, n, p.rank, 0,
                     pipeline_segments(max, p.segment_size), 0, 0};
    ra.counts = p.counts;
    ra.displs = p.displs;
    const int peers[2] = {ring_left(p.rank, n), ring_right(p.rank, n)};
    dr_status_t st = eng.init(ring_allgather_slots(n, ra.nseg), peers, 2);
    if (st == DR_OK) {
        st = ring_allgather_run(eng, ra);
    }
    return eng.finish(st, err);
}

} // namespace coll
} // namespace dualrail
