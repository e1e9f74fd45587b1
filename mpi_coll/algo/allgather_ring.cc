/*
 * Ring allgather, pipelined in segments.
 *
 * Purpose:  large allgathers (and the second phase of the scatter-allgather
 *           bcast). Each rank sends and receives (n-1)/n of the result once,
 *           the bandwidth optimum, to and from fixed neighbours.
 * Accepts:  count >= 1 bytes per rank, 2 <= n <= kRingMaxRanks. Blocks may
 *           be empty (the bcast's split of fewer bytes than ranks): both sides
 *           skip them.
 * Limits:   n - 1 steps must fit the key's step field; at most kMaxSegments
 *           segments per block, so a large block gets larger segments. No
 *           scratch: every receive goes straight to its place in recvbuf.
 *
 * Steps on 4 ranks (relative ranks; block b = rank b's data; s = sent to the
 * right, r = received from the left):
 *
 *   step   rank 0    rank 1    rank 2    rank 3
 *    0     s0 r3     s1 r0     s2 r1     s3 r2
 *    1     s3 r2     s0 r3     s1 r0     s2 r1
 *    2     s2 r1     s3 r2     s0 r3     s1 r0
 *
 * Pipeline. Block b is cut into nseg segments; the schedule is (n-1) x nseg
 * units (step, segment). Receives are posted up to kWindow units ahead; the
 * moment unit (s, k) arrives its segment is sent on as unit (s+1, k), so
 * segment k+1 of a step is on the wire while segment k travels on.
 *
 * Buffer rules: a rank receives only blocks it does not hold yet and sends
 * only blocks it holds, so a receive never lands in memory a running send
 * reads; each block is written once. The sends are waited for at the end
 * (they read recvbuf until the right neighbour has the data).
 */
#include "algo/collectives.hpp"
#include "algo/engine.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

namespace {

/* Receives posted ahead of the one being waited for: enough to keep both planes busy
 * with segments, few enough that a huge ring does not flood the transport. */
constexpr size_t kWindow = 32;

struct Unit {
    uint32_t step;
    int block, seg;
    size_t offset, len;
};

Unit unit_of(const RingAllgather &ra, size_t u, bool send)
{
    const int s = (int)(u / (size_t)ra.nseg), k = (int)(u % (size_t)ra.nseg);
    const int b = send ? ring_send_block(ra.v, ra.n, s) : ring_recv_block(ra.v, ra.n, s);
    const size_t boff = ra.counts != nullptr ? ra.displs[b] : even_offset(ra.bytes, ra.n, b);
    const size_t blen = ra.counts != nullptr ? ra.counts[b] : even_len(ra.bytes, ra.n, b);
    const size_t off = even_offset(blen, ra.nseg, k), len = even_len(blen, ra.nseg, k);
    return Unit{ra.step_base + (uint32_t)s, b, k, boff + off, len};
}

} // namespace

size_t ring_allgather_slots(int n, int nseg)
{
    return 2 * (size_t)(n - 1) * (size_t)nseg;
}

dr_status_t ring_allgather_run(Engine &eng, const RingAllgather &ra)
{
    const size_t units = (size_t)(ra.n - 1) * (size_t)ra.nseg;
    const int left = abs_rank(ring_left(ra.v, ra.n), ra.shift, ra.n);
    const int right = abs_rank(ring_right(ra.v, ra.n), ra.shift, ra.n);
    const size_t rslot = ra.first_slot, sslot = ra.first_slot + units;
    dr_status_t st;
    auto post_send = [&](size_t u) {
        const Unit x = unit_of(ra, u, true);
        return eng.isend(sslot + u, right, x.step,
                         eng.key(x.step, (uint32_t)x.block, (uint32_t)x.seg), ra.buf + x.offset,
                         x.len);
    };
    for (size_t k = 0; k < (size_t)ra.nseg; ++k) {
        if ((st = post_send(k)) != DR_OK) {
            return st;
        }
    }
    size_t posted = 0, done = 0;
    while (done < units) {
        while (posted < units && posted < done + kWindow) {
            const Unit x = unit_of(ra, posted, false);
            if ((st = eng.irecv(rslot + posted, left, x.step,
                                eng.key(x.step, (uint32_t)x.block, (uint32_t)x.seg),
                                ra.buf + x.offset, x.len)) != DR_OK) {
                return st;
            }
            ++posted;
        }
        bool moved = false;
        while (done < posted) {
            st = eng.test(rslot + done);
            if (st == DR_INPROGRESS) {
                break;
            }
            if (st != DR_OK) {
                return st;
            }
            /* the segment received at step s is the one sent at step s + 1 */
            if (done + (size_t)ra.nseg < units &&
                (st = post_send(done + (size_t)ra.nseg)) != DR_OK) {
                return st;
            }
            ++done;
            moved = true;
        }
        if (!moved && (st = eng.stalled(left, unit_of(ra, done, false).step)) != DR_OK) {
            return st;
        }
    }
    for (size_t u = 0; u < units; ++u) {
        if ((st = eng.wait(sslot + u)) != DR_OK) {
            return st;
        }
    }
    return DR_OK;
}

dr_status_t allgather_ring(Transport &t, const Params &p, std::string *err)
{
    Engine eng(t, p, "ring");
    const int n = p.size;
    const RingAllgather ra{static_cast<char *>(p.recvbuf),
                           p.count * (size_t)n,
                           n,
                           p.rank,
                           0,
                           pipeline_segments(p.count, p.segment_size),
                           0,
                           0};
    const int peers[2] = {ring_left(p.rank, n), ring_right(p.rank, n)};
    dr_status_t st = eng.init(ring_allgather_slots(n, ra.nseg), peers, 2);
    if (st == DR_OK) {
        st = ring_allgather_run(eng, ra);
    }
    return eng.finish(st, err);
}

} // namespace coll
} // namespace dualrail
