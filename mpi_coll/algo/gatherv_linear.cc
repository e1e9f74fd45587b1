/*
 * Linear gatherv and scatterv with a window.
 *
 * Purpose:  MPI_Gatherv / MPI_Scatterv: blocks of their own sizes (zeros
 *           allowed) between the root and each rank, straight into (out of)
 *           their places in the root's buffer: no tree can forward uneven
 *           blocks without copying them, and the root's link carries every
 *           byte once either way.
 * Accepts:  n >= 2, any root; at the root counts/displs (bytes), elsewhere
 *           count (this rank's block, bytes).
 * Limits:   the root keeps at most kLinearWindow transfers in flight (in
 *           rank order starting after the root), so a large communicator
 *           does not post n receives at once; each is one message (ucx_mr
 *           stripes it over the planes). No scratch.
 *
 * Steps on 4 ranks, root 1 ("->" send, "<-" receive; window 2):
 *
 *   gatherv   rank 2 ->1, rank 3 ->1, rank 0 ->1
 *             root: <-2 <-3 posted, <-0 posted when <-2 completed
 *   scatterv  the same with the arrows reversed
 *
 * Buffer rules: every block is written (gatherv: a receive into recvbuf;
 * scatterv: a non-root's receive) once; the root's own block is copied
 * unless in place. Keys: (step 0, block 0, segment 0); one message per pair.
 */
#include <cstring>
#include <vector>

#include "algo/engine.hpp"
#include "algo/lazy_engine.hpp"
#include "algo/gathers.hpp"
#include "algo/tree_math.hpp"

namespace dualrail {
namespace coll {

namespace {

/* Transfers the root keeps in flight: enough for both planes of a few links, few enough
 * that a large communicator does not flood the transport with receives. */
constexpr int kLinearWindow = 8;

dr_status_t linear(Transport &t, const Params &p, bool gather, std::string *err)
{
    LazyEngine<Transport> eng(t, p, "linear", lazy_note_slow);
    const int n = p.size, r = p.rank, root = p.root;
    const int peer_root[1] = {root};
    if (r != root) {
        dr_status_t st = eng.init(1, peer_root, 1);
        if (st == DR_OK) {
            st = gather ? eng.isend(0, root, 0, eng.key(0, 0, 0), p.sendbuf, p.count)
                        : eng.irecv(0, root, 0, eng.key(0, 0, 0), p.recvbuf, p.count);
        }
        if (st == DR_OK) {
            st = eng.wait(0);
        }
        return eng.finish(st, err);
    }
    /* every rank is a peer of the root: an error there must reach all of them */
    std::vector<int> peers;
    for (int q = 0; q < n; ++q) {
        if (q != r) {
            peers.push_back(q);
        }
    }
    dr_status_t st = eng.init(kLinearWindow, peers.data(), peers.size());
    if (st != DR_OK) {
        return eng.finish(st, err);
    }
    char *rbuf = static_cast<char *>(p.recvbuf);
    const char *sbuf = static_cast<const char *>(p.sendbuf);
    /* the root's own block, unless in place */
    if (gather && p.sendbuf != rbuf + p.displs[r] && p.counts[r] != 0) {
        memcpy(rbuf + p.displs[r], p.sendbuf, p.counts[r]);
    } else if (!gather && rbuf != nullptr && p.counts[r] != 0) {
        memcpy(rbuf, sbuf + p.displs[r], p.counts[r]);
    }
    /* peers i = 1 .. n-1 after the root, slot (i - 1) % window */
    int posted = 1, done = 1;
    while (done < n && st == DR_OK) {
        while (posted < n && posted < done + kLinearWindow && st == DR_OK) {
            const int q = ring_mod((long long)r + posted, n);
            const size_t slot = (size_t)(posted - 1) % kLinearWindow;
            st = gather ? eng.irecv(slot, q, 0, eng.key(0, 0, 0), rbuf + p.displs[q], p.counts[q])
                        : eng.isend(slot, q, 0, eng.key(0, 0, 0), sbuf + p.displs[q], p.counts[q]);
            ++posted;
        }
        if (st == DR_OK) {
            st = eng.wait((size_t)(done - 1) % kLinearWindow);
            ++done;
        }
    }
    return eng.finish(st, err);
}

} // namespace

dr_status_t gatherv_linear(Transport &t, const Params &p, std::string *err)
{
    return linear(t, p, true, err);
}

dr_status_t scatterv_linear(Transport &t, const Params &p, std::string *err)
{
    return linear(t, p, false, err);
}

} // namespace coll
} // namespace dualrail
