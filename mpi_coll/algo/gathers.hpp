/*
 * Allgatherv, gather, scatter, gatherv and scatterv over a Transport: the
 * C++ entries (gathers.cc: checks, trivial cases, algorithm choice) and
 * their algorithms, one per file. Bytes move without being reduced; in the
 * v variants every rank's block has its own size (zeros allowed) and its
 * own place (Params::counts, Params::displs).
 *
 *   allgatherv()   allgatherv_ring.cc    large: the pipelined ring of
 *                                        allgather_ring.cc over the blocks
 *                  allgatherv_bruck.cc   small, any size
 *   gather()       gather_binomial.cc    any size
 *   scatter()      scatter_binomial.cc   any size
 *   gatherv()      gatherv_linear.cc     linear with a window
 *   scatterv()     gatherv_linear.cc     the same, reversed
 *
 * Every rank passes the same counts, displs (MPI: recvcounts and displs are
 * the same everywhere), algorithm, small_max_bytes, segment_size, comm_id
 * and seq; the checks and the choice depend on those and on rank/size alone,
 * so all ranks agree. Gather and scatter: every rank the same count (bytes
 * per rank) and root. Gatherv and scatterv: counts and displs are the
 * root's only (MPI reads them there), every other rank passes count, its
 * own block's bytes; a check on counts fails at the root alone (erroneous
 * arguments, as MPI says).
 */
#ifndef DUALRAIL_ALGO_GATHERS_HPP
#define DUALRAIL_ALGO_GATHERS_HPP

#include <string>

#include "algo/coll.hpp"
#include "algo/transport.hpp"

namespace dualrail {
namespace coll {

enum AllgathervAlgorithm : int { kAllgathervRing = 1, kAllgathervBruck = 2 };
/* gather and scatter; gatherv and scatterv */
enum GatherAlgorithm : int { kGatherBinomial = 1, kGathervLinear = 1 };

/*
 * Blocking; DR_OK or an error with a one-line reason in *err. Never throws.
 * counts[r] bytes of rank r land at recvbuf + displs[r] on every rank;
 * sendbuf: this rank's block (nullptr or recvbuf + displs[rank]: in place).
 * scratch (Bruck) may be nullptr: a buffer is allocated for the call.
 */
dr_status_t allgatherv(Transport &t, const Params &p, Scratch *scratch, std::string *err);

/*
 *   gather:   count bytes from every rank to recvbuf + rank x count at the root
 *             (sendbuf nullptr at the root: in place, its block already there)
 *   scatter:  count bytes of the root's sendbuf + rank x count to each recvbuf
 *             (recvbuf nullptr at the root: in place, its block stays in sendbuf)
 *   gatherv:  at the root counts[r] bytes of rank r to recvbuf + displs[r]
 *             (sendbuf nullptr: in place); elsewhere count bytes from sendbuf
 *   scatterv: at the root counts[r] bytes from sendbuf + displs[r] to rank r
 *             (recvbuf nullptr: in place); elsewhere count bytes into recvbuf
 */
dr_status_t gather(Transport &t, const Params &p, Scratch *scratch, std::string *err);
dr_status_t scatter(Transport &t, const Params &p, Scratch *scratch, std::string *err);
dr_status_t gatherv(Transport &t, const Params &p, std::string *err);
dr_status_t scatterv(Transport &t, const Params &p, std::string *err);

/* What allgatherv() runs for p (a forced choice is returned as is); total: all blocks. */
int allgatherv_choose(const Params &p, size_t total);

/* The algorithms, for checked arguments (size >= 2, some bytes, this rank's block in place
 * in recvbuf for the ring; sendbuf set for Bruck). */
dr_status_t allgatherv_ring(Transport &t, const Params &p, std::string *err);
dr_status_t allgatherv_bruck(Transport &t, const Params &p, Scratch &scratch, std::string *err);
dr_status_t gather_binomial(Transport &t, const Params &p, Scratch &scratch, std::string *err);
dr_status_t scatter_binomial(Transport &t, const Params &p, Scratch &scratch, std::string *err);
dr_status_t gatherv_linear(Transport &t, const Params &p, std::string *err);
dr_status_t scatterv_linear(Transport &t, const Params &p, std::string *err);

} // namespace coll
} // namespace dualrail

#endif
