/*
 * Alltoall and alltoallv over a Transport: the C++ entries (alltoall.cc:
 * checks, trivial cases, MPI_IN_PLACE, algorithm choice) and their
 * algorithms, one per file. They move bytes and never reduce.
 *
 *   alltoall()   alltoall_pairwise.cc    large blocks: n - 1 pairwise steps,
 *                                        `window` of them in flight
 *                alltoall_bruck.cc       small blocks: ceil(log2 n) rounds
 *   alltoallv()  alltoallv_pairwise.cc   the pairwise schedule, per-pair sizes
 *
 * Params: count is the bytes of one block (alltoall: rank r's block for rank
 * q is sendbuf[q * count ..)); small_max_bytes the largest block Bruck takes
 * under kAlgoAuto; segment_size the pipeline segment of one pair's message.
 * Every rank passes the same count, algorithm, small_max_bytes, window,
 * comm_id and seq (the choice depends on those and on the size alone, so all
 * ranks agree). alltoallv's per-pair sizes differ by rank, as MPI says:
 * what rank r sends q (scounts[q] on r) is what q receives from r
 * (rcounts[r] on q); a rank that disagrees fails the pair with
 * DR_ERR_TRUNCATED.
 *
 * Striping: each pair's message goes to ucx_mr as one message (or in
 * segments), and ucx_mr splits every message over the live planes by their
 * weights. No pair is assigned to a plane, so pairs of very different sizes
 * never leave a plane idle while another carries the big one.
 */
#ifndef DUALRAIL_ALGO_ALLTOALL_HPP
#define DUALRAIL_ALGO_ALLTOALL_HPP

#include <cstddef>
#include <string>

#include "algo/alltoall_math.hpp"
#include "algo/coll.hpp"
#include "algo/transport.hpp"

namespace dualrail {
namespace coll {

class Engine;

enum AlltoallAlgorithm : int { kAlltoallPairwise = 1, kAlltoallBruck = 2 };

/* Auto: Bruck for blocks up to this many bytes (its rounds forward ~n/2 blocks each,
 * log2 n times: a win only while latency dominates). */
constexpr size_t kDefaultAlltoallSmallMaxBytes = 1024;
/* Pairwise steps in flight: enough to keep both planes busy between steps. */
constexpr int kDefaultAlltoallWindow = 4;
/* The pairwise steps 1 .. n - 1 must fit the key (pairwise_key_step/_block). */
constexpr int kAlltoallMaxRanks = (int)(kPairwiseMaxSteps + 1);

/* alltoallv's layout, in bytes; each array has size entries. */
struct VLayout {
    const size_t *scounts = nullptr, *sdispls = nullptr;
    const size_t *rcounts = nullptr, *rdispls = nullptr;
};

/* Blocking; DR_OK or an error with a one-line reason in *err. Never throw. window <= 0: the
 * default. scratch (Bruck, in place) may be nullptr: a buffer is allocated for the call. */
dr_status_t alltoall(Transport &t, const Params &p, int window, Scratch *scratch, std::string *err);
/* sendbuf nullptr or == recvbuf: MPI_IN_PLACE (scounts/sdispls ignored, the data is taken from
 * recvbuf at rcounts/rdispls and replaced there). */
dr_status_t alltoallv(Transport &t, const Params &p, const VLayout &v, int window, Scratch *scratch,
                      std::string *err);

/* What alltoall() runs for p (a forced choice is returned as is). */
int alltoall_choose(const Params &p);

/*
 * The pairwise schedule both kinds run (alltoall_pairwise.cc). Pair layouts:
 * send_off/len(q) bytes of send go to rank q, recv_off/len(q) bytes from q
 * land in recv. The rank's own block is copied locally; send and recv do
 * not overlap (in place, the run sends out of a copy).
 */
struct PairwiseLayout {
    const char *send;
    char *recv;
    /* uniform (alltoall): block bytes; else the VLayout */
    size_t block;
    const VLayout *v;
    size_t send_off(int q) const { return v ? v->sdispls[q] : (size_t)q * block; }
    size_t send_len(int q) const { return v ? v->scounts[q] : block; }
    size_t recv_off(int q) const { return v ? v->rdispls[q] : (size_t)q * block; }
    size_t recv_len(int q) const { return v ? v->rcounts[q] : block; }
};
/* send nullptr: in place; the send layout must then equal the receive layout, and recvbuf's
 * first `extent` bytes are copied into scratch before anything moves. */
dr_status_t pairwise_run(Transport &t, const Params &p, const PairwiseLayout &l, size_t extent,
                         int window, const char *algo, Scratch &scratch, std::string *err);

/* The algorithms, for checked arguments (2 <= size <= kAlltoallMaxRanks, count >= 1 for
 * alltoall). sendbuf nullptr: in place (the pairwise ones copy recvbuf into scratch first). */
dr_status_t alltoall_pairwise(Transport &t, const Params &p, int window, Scratch &scratch,
                              std::string *err);
dr_status_t alltoall_bruck(Transport &t, const Params &p, Scratch &scratch, std::string *err);
dr_status_t alltoallv_pairwise(Transport &t, const Params &p, const VLayout &v, int window,
                               Scratch &scratch, std::string *err);

} // namespace coll
} // namespace dualrail

#endif
