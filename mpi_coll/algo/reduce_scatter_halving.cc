/*
 * Recursive-halving reduce-scatter, with folding for any rank count
 * (reduce_scatter_block and reduce_scatter for small messages).
 *
 * Purpose:  small messages: log2(p) rounds (+2 when n is not a power of two)
 *           where the ring needs n - 1; each round moves half of what the
 *           previous one did, so the volume is still about the input once.
 * Accepts:  n >= 2, a commutative op, blocks of any sizes (zeros included)
 *           laid out one after the other in rank order (as MPI's
 *           reduce_scatter input is). No rank limit from the keys.
 * Limits:   one message per round, not segmented (ucx_mr stripes it over
 *           the planes). Scratch: a copy of the input and a receive area of
 *           the same size (the fold receives a whole input).
 *
 * Ranks fold as in the recursive doubling allreduce (rd_math.hpp): p =
 * largest power of two <= n; of the first 2 rem ranks the even ones send
 * their whole input to rank + 1 and get their block back at the end. Vrank
 * v stands for group v: the blocks of the ranks it represents (2v, 2v+1 for
 * v < rem; v + rem above), rh_group_first(). In round j (d = p >> (j + 1))
 * v keeps the d groups of the window holding it and sends the other d
 * (its partner v ^ d's) to that partner, reducing what comes back.
 *
 * Steps on 6 ranks (p = 4, rem = 2; groups {0,1} {2,3} {4} {5}; "<>"
 * exchange and reduce halves, "->" send, "<-" receive):
 *
 *   step  what      rank 0   rank 1     rank 2   rank 3     rank 4     rank 5
 *   (vrank)         -        0          -        1          2          3
 *    0    fold      ->1 all  <-0 +      ->3 all  <-2 +      .          .
 *    1    round 0   .        <>4 keep   .        <>5 keep   <>1 keep   <>3 keep
 *                            g0,g1               g0,g1      g2,g3      g2,g3
 *    2    round 1   .        <>3 g0     .        <>1 g1     <>5 g2     <>4 g3
 *    3    unfold    <-1 b0   ->0 b0     <-3 b2   ->2 b2     .          .
 *
 * Buffer rules: receives land in the receive area only (never sent from),
 * consumed by the reduction before the next round's receive is posted; a
 * round sends the half of the partial it gives up, which is never written
 * again (later rounds write inside the kept half), so sends are only waited
 * for at the end. The input is read once (copied into the partial; the
 * extra ranks send it whole), so the result may land anywhere, even over it
 * (in place); an extra rank posts its unfold receive after its fold send
 * completed.
 */
#include <cstring>

#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/rd_math.hpp"
#include "algo/reductions.hpp"

namespace dualrail {
namespace coll {

dr_status_t reduce_scatter_halving(Transport &t, const Params &p, const Blocks &b, void *out,
                                   Scratch &scratch, std::string *err)
{
    LazyEngine<Transport> eng(t, p, "recursive halving", lazy_note_slow);
    const int n = p.size, r = p.rank, rounds = rd_rounds(n), pw = rd_pow2_floor(n);
    const size_t esz = p.elem_size, total = b.total * esz;
    const RdRole role = rd_role(r, n);
    const uint32_t unfold = (uint32_t)rd_step_unfold(n);
    /* element offset where block i starts (i == n: the end) */
    auto block_off = [&](int i) { return i < n ? b.span[i].offset : b.total; };
    auto group_off = [&](int v) { return block_off(rh_group_first(v, n)); };
    int peers[66];
    size_t npeers = 0;
    if (role != RdRole::kPlain) {
        peers[npeers++] = rd_fold_peer(r, n);
    }
    for (int j = 0; j < rounds && role != RdRole::kExtra; ++j) {
        peers[npeers++] = rd_real_rank(rd_vrank(r, n) ^ (pw >> (j + 1)), n);
    }
    /* slots: 0 receive, 1 + j the send of round j, rounds + 1 the fold or unfold send */
    dr_status_t st = eng.init((size_t)rounds + 2, peers, npeers);
    if (st != DR_OK) {
        return eng.finish(st, err);
    }
    const char *src = static_cast<const char *>(p.sendbuf);
    char *dst = static_cast<char *>(out);
    const Span own = b.span[r];
    if (role == RdRole::kExtra) {
        const int q = rd_fold_peer(r, n);
        if ((st = eng.isend((size_t)rounds + 1, q, 0, eng.key(0, 0, 0), src, total)) == DR_OK &&
            (st = eng.wait((size_t)rounds + 1)) == DR_OK &&
            (st = eng.irecv(0, q, unfold, eng.key(unfold, 0, 0), dst, own.count * esz)) == DR_OK) {
            st = eng.wait(0);
        }
        return eng.finish(st, err);
    }
    const size_t half = (total + 63) / 64 * 64;
    char *work = static_cast<char *>(scratch.reserve(2 * half));
    if (work == nullptr) {
        return eng.finish(eng.engine().set_error(
                              DR_ERR_NO_MEMORY, "out of memory for %zu bytes of scratch", 2 * half),
                          err);
    }
    eng.set_scratch(work, 2 * half);
    char *rx = work + half;
    memcpy(work, src, total);
    if (role == RdRole::kPartner) {
        const int q = rd_fold_peer(r, n);
        if ((st = eng.irecv(0, q, 0, eng.key(0, 0, 0), rx, total)) == DR_OK &&
            (st = eng.wait(0)) == DR_OK) {
            p.reduce(rx, work, b.total, p.reduce_arg);
        }
    }
    const int v = rd_vrank(r, n);
    for (int j = 0; j < rounds && st == DR_OK; ++j) {
        const int d = pw >> (j + 1), q = v ^ d, qreal = rd_real_rank(q, n);
        const int keep = v & ~(d - 1), give = q & ~(d - 1);
        const size_t ko = group_off(keep), kn = group_off(keep + d) - ko;
        const size_t go = group_off(give), gn = group_off(give + d) - go;
        const uint32_t step = (uint32_t)rd_step_round(j);
        const uint64_t key = eng.key(step, 0, 0);
        if ((st = eng.irecv(0, qreal, step, key, rx, kn * esz)) != DR_OK ||
            (st = eng.isend(1 + (size_t)j, qreal, step, key, work + go * esz, gn * esz)) != DR_OK ||
            (st = eng.wait(0)) != DR_OK) {
            break;
        }
        if (kn != 0) {
            p.reduce(rx, work + ko * esz, kn, p.reduce_arg);
        }
    }
    if (st == DR_OK && role == RdRole::kPartner) {
        const Span x = b.span[r - 1];
        st = eng.isend((size_t)rounds + 1, r - 1, unfold, eng.key(unfold, 0, 0),
                       work + x.offset * esz, x.count * esz);
    }
    if (st == DR_OK) {
        st = eng.wait_all(); /* the rounds' sends and the unfold's */
    }
    if (st == DR_OK && own.count != 0) {
        memcpy(dst, work + own.offset * esz, own.count * esz);
    }
    return eng.finish(st, err, scratch);
}

} // namespace coll
} // namespace dualrail
