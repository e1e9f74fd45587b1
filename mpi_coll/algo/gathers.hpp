/*
 * Allgatherv over a Transport: the C++ entry (gathers.cc: checks, trivial
 * cases, algorithm choice) and its algorithms, one per file. Bytes move
 * without being reduced; every rank's block has its own size (zeros
 * allowed) and its own place in recvbuf (Params::counts, Params::displs).
 *
 *   allgatherv()   allgatherv_ring.cc    large: the pipelined ring of
 *                                        allgather_ring.cc over the blocks
 *                  allgatherv_bruck.cc   small, any size
 *
 * Every rank passes the same counts, displs (MPI: recvcounts and displs are
 * the same everywhere), algorithm, small_max_bytes, segment_size, comm_id
 * and seq; the checks and the choice depend on those and on rank/size alone,
 * so all ranks agree.
 */
#ifndef DUALRAIL_ALGO_GATHERS_HPP
#define DUALRAIL_ALGO_GATHERS_HPP

#include <string>

#include "algo/coll.hpp"
#include "algo/transport.hpp"

namespace dualrail {
namespace coll {

enum AllgathervAlgorithm : int { kAllgathervRing = 1, kAllgathervBruck = 2 };

/*
 * Blocking; DR_OK or an error with a one-line reason in *err. Never throws.
 * counts[r] bytes of rank r land at recvbuf + displs[r] on every rank;
 * sendbuf: this rank's block (nullptr or recvbuf + displs[rank]: in place).
 * scratch (Bruck) may be nullptr: a buffer is allocated for the call.
 */
dr_status_t allgatherv(Transport &t, const Params &p, Scratch *scratch, std::string *err);

/* What allgatherv() runs for p (a forced choice is returned as is); total: all blocks. */
int allgatherv_choose(const Params &p, size_t total);

/* The algorithms, for checked arguments (size >= 2, some bytes, this rank's block in place
 * in recvbuf for the ring; sendbuf set for Bruck). */
dr_status_t allgatherv_ring(Transport &t, const Params &p, std::string *err);
dr_status_t allgatherv_bruck(Transport &t, const Params &p, Scratch &scratch, std::string *err);

} // namespace coll
} // namespace dualrail

#endif
