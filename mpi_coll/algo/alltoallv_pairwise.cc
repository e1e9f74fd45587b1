/*
 * Pairwise-exchange alltoallv: the alltoall's schedule with per-pair sizes.
 *
 * Purpose:  MPI_Alltoallv at any skew (the mixture-of-experts dispatch and
 *           combine: a few pairs carry most of the bytes, many carry little
 *           or nothing).
 * Accepts:  2 <= n <= kAlltoallMaxRanks; per-pair byte counts and
 *           displacements (VLayout), zero counts (nothing is posted for
 *           them, on either side), in place.
 * Limits:   at most kMaxSegments segments per pair; in place, a copy of
 *           recvbuf up to its last received byte.
 *
 * Steps: as alltoall_pairwise.cc (step s: send to r + s, receive from
 * r - s, `window` steps in flight), each pair's message of its own size,
 * cut into pipeline segments of segment_size.
 *
 * Why no pair goes to "its" plane: ucx_mr splits every segment over the
 * live planes by their weights toward that peer. Assigning whole pairs to
 * planes would leave one plane idle while the other carries a skewed
 * pair's bulk; per-message striping keeps both planes busy whatever the
 * sizes, and a plane lost mid-call only moves the stripes still owed.
 *
 * Buffer rules: as for alltoall (every byte of recvbuf written by at most
 * one receive: MPI forbids overlapping receive regions; send regions may
 * overlap, they are only read).
 */
#include "algo/alltoall.hpp"
#include "algo/engine.hpp"

namespace dualrail {
namespace coll {

dr_status_t alltoallv_pairwise(Transport &t, const Params &p, const VLayout &v, int window,
                               Scratch &scratch, std::string *err)
{
    VLayout lay = v;
    size_t extent = 0;
    if (p.sendbuf == nullptr) {
        /* MPI_IN_PLACE: what goes to q is what comes from q, at the same place */
        lay.scounts = v.rcounts;
        lay.sdispls = v.rdispls;
        for (int q = 0; q < p.size; ++q) {
            if (v.rcounts[q] != 0 && v.rdispls[q] + v.rcounts[q] > extent) {
                extent = v.rdispls[q] + v.rcounts[q];
            }
        }
    }
    const PairwiseLayout l{static_cast<const char *>(p.sendbuf), static_cast<char *>(p.recvbuf), 0,
                           &lay};
    return pairwise_run(t, p, l, extent, window, "pairwise", scratch, err);
}

} // namespace coll
} // namespace dualrail
