/*
 * Ring reduce-scatter, pipelined in segments (reduce_scatter_block and
 * reduce_scatter for large messages; the first phase of the Rabenseifner
 * reduce).
 *
 * Purpose:  large messages. Each rank sends and receives (n-1)/n of the
 *           input once, the bandwidth optimum, to and from fixed neighbours.
 *           Every block is reduced along the ring and ends complete at one
 *           rank: rank r's block of the result at rank r.
 * Accepts:  2 <= n <= kRingMaxRanks, a commutative op, blocks of any sizes
 *           (zeros included: both sides skip empty segments).
 * Limits:   n - 1 steps and n blocks must fit the key's fields; at most
 *           kMaxSegments segments per block (larger blocks get larger
 *           segments). Scratch: the partial results (the whole input's size,
 *           every rank) and `window` receive slots of one segment each.
 *
 * Steps on 4 ranks, ring blocks (ring block j is rank (j - 1) mod n's block
 * of the result, so rank r ends with ring block r + 1 = its own; s = sent to
 * the right, r+ = received from the left and reduced into the partial):
 *
 *   step   rank 0    rank 1    rank 2    rank 3
 *    0     s0 r3+    s1 r0+    s2 r1+    s3 r2+
 *    1     s3 r2+    s0 r3+    s1 r0+    s2 r1+
 *    2     s2 r1+    s3 r2+    s0 r3+    s1 r0+
 *   (owns) 1         2         3         0        ring block = rank's block
 *
 * This is the ring allreduce's reduce-scatter (allreduce_ring.cc): the same
 * block a rank sends and receives at each step, the same segments, and the
 * same operation order (received partial op own input), which is what lets
 * the Rabenseifner reduce match the allreduce bit for bit.
 *
 * Pipeline: receives run up to `window` units (step, segment) ahead into the
 * slots; the moment a unit is reduced its segment is sent on as the next
 * step's, so nothing waits for a whole step.
 *
 * Buffer rules: step 0 sends read the input block `rank` itself, which this
 * rank never receives, so even in place (work == src) no write lands under a
 * running send; a partial is written once (when its block arrives) and read
 * by the next step's send only after that; slot u % window is reused by unit
 * u + window, posted only once unit u was reduced. When the result's place
 * overlaps the input (reduce_scatter in place: the result goes to the start
 * of the input buffer) the last step reduces into the scratch and the result
 * is copied once every send completed.
 */
#include <cstring>
#include <vector>

#include "algo/engine.hpp"
#include "algo/reductions.hpp"

namespace dualrail {
namespace coll {

namespace {

/* Receives in flight are bounded by this much scratch, within [2, 16] slots (as the
 * allreduce's ring). */
constexpr size_t kScratchBudget = 8u << 20;
constexpr size_t kMinWindow = 2;
constexpr size_t kMaxWindow = 16;

} // namespace

int ring_rs_segments(size_t max_elems, size_t esz, size_t segment_size)
{
    return ring_segments(max_elems, esz, segment_size);
}

size_t ring_rs_slot_bytes(size_t max_elems, size_t esz, int nseg)
{
    return (ceil_div(max_elems, (size_t)nseg) * esz + 63) / 64 * 64;
}

size_t ring_rs_window(size_t units, size_t slot_bytes)
{
    size_t w = slot_bytes == 0 ? kMaxWindow : kScratchBudget / slot_bytes;
    w = w < kMinWindow ? kMinWindow : w > kMaxWindow ? kMaxWindow : w;
    return w > units ? units : w;
}

size_t ring_rs_slots(size_t window, int n, int nseg)
{
    return window + (size_t)(n - 1) * (size_t)nseg;
}

Span ring_rs_segment(const RingRs &rs, int j, int k)
{
    return ring_segment(rs.span[ring_mod((long long)j + rs.shift, rs.n)], rs.nseg, k);
}

dr_status_t ring_rs_run(Engine &eng, const RingRs &rs)
{
    const int n = rs.n, r = rs.r, steps = n - 1, nseg = rs.nseg;
    const size_t units = (size_t)steps * (size_t)nseg, esz = rs.esz;
    const int left = ring_left(r, n), right = ring_right(r, n);
    const size_t sslot = rs.first_slot + rs.window;
    const Span own = rs.span[ring_mod((long long)ring_owned_block(r, n) + rs.shift, n)];
    auto post_send = [&](size_t u) {
        const int s = (int)(u / (size_t)nseg), k = (int)(u % (size_t)nseg);
        const int j = ring_send_block(r, n, s);
        const Span g = ring_rs_segment(rs, j, k);
        const char *base = s == 0 ? rs.src : rs.work;
        return eng.isend(sslot + u, right, (uint32_t)s,
                         eng.key((uint32_t)s, (uint32_t)j, (uint32_t)k), base + g.offset * esz,
                         g.count * esz);
    };
    auto post_recv = [&](size_t u) {
        const int s = (int)(u / (size_t)nseg), k = (int)(u % (size_t)nseg);
        const int j = ring_recv_block(r, n, s);
        const Span g = ring_rs_segment(rs, j, k);
        return eng.irecv(rs.first_slot + u % rs.window, left, (uint32_t)s,
                         eng.key((uint32_t)s, (uint32_t)j, (uint32_t)k),
                         rs.slots + (u % rs.window) * rs.slot_bytes, g.count * esz);
    };
    auto complete = [&](size_t u) {
        const int s = (int)(u / (size_t)nseg), k = (int)(u % (size_t)nseg);
        const Span g = ring_rs_segment(rs, ring_recv_block(r, n, s), k);
        if (g.count != 0) {
            char *d =
                s == steps - 1 ? rs.out + (g.offset - own.offset) * esz : rs.work + g.offset * esz;
            const char *in = rs.src + g.offset * esz;
            if (d != in) {
                memcpy(d, in, g.count * esz);
            }
            rs.reduce(rs.slots + (u % rs.window) * rs.slot_bytes, d, g.count, rs.reduce_arg);
        }
        /* the block reduced now is the one sent at the next step */
        return s + 1 < steps ? post_send(u + (size_t)nseg) : DR_OK;
    };
    dr_status_t st;
    for (size_t k = 0; k < (size_t)nseg; ++k) {
        if ((st = post_send(k)) != DR_OK) {
            return st;
        }
    }
    size_t posted = 0, done = 0;
    while (done < units) {
        while (posted < units && posted < done + rs.window) {
            if ((st = post_recv(posted)) != DR_OK) {
                return st;
            }
            ++posted;
        }
        bool moved = false;
        while (done < posted) {
            st = eng.test(rs.first_slot + done % rs.window);
            if (st == DR_INPROGRESS) {
                break;
            }
            if (st != DR_OK || (st = complete(done)) != DR_OK) {
                return st;
            }
            ++done;
            moved = true;
        }
        if (!moved && (st = eng.stalled(left, (uint32_t)(done / (size_t)nseg))) != DR_OK) {
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

dr_status_t reduce_scatter_ring(Transport &t, const Params &p, const Blocks &b, void *out,
                                Scratch &scratch, std::string *err)
{
    Engine eng(t, p, "ring");
    const int n = p.size, r = p.rank;
    const size_t esz = p.elem_size, total = b.total * esz;
    const int nseg = ring_rs_segments(b.max, esz, p.segment_size);
    const size_t slot_bytes = ring_rs_slot_bytes(b.max, esz, nseg);
    const size_t window = ring_rs_window((size_t)(n - 1) * (size_t)nseg, slot_bytes);
    const int peers[2] = {ring_left(r, n), ring_right(r, n)};
    dr_status_t st = eng.init(ring_rs_slots(window, n, nseg), peers, 2);
    if (st != DR_OK) {
        return eng.finish(st, err);
    }
    const size_t slots_len = window * slot_bytes, need = slots_len + (total + 63) / 64 * 64;
    char *scr = static_cast<char *>(scratch.reserve(need));
    if (scr == nullptr) {
        return eng.finish(
            eng.set_error(DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", need), err);
    }
    eng.set_scratch(scr, need);
    const char *src = static_cast<const char *>(p.sendbuf);
    char *work = scr + slots_len, *dst = static_cast<char *>(out);
    const Span own = b.span[r];
    /* in place the result's place is the start of the input, which later steps still read */
    const bool alias = dst < src + total && src < dst + own.count * esz;
    const RingRs rs{src,      work,         alias ? work + own.offset * esz : dst,
                    b.span,   n - 1,        n,
                    r,        nseg,         esz,
                    p.reduce, p.reduce_arg, scr,
                    window,   slot_bytes,   0};
    st = ring_rs_run(eng, rs);
    if (st == DR_OK && alias && own.count != 0) {
        memmove(dst, work + own.offset * esz, own.count * esz);
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
