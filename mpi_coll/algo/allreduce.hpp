/*
 * Allreduce over a Transport: the C++ entry of the algorithm layer. No MPI
 * and no UCX here; dr_coll.cc wraps it in the C API the Open MPI glue calls.
 *
 *   allreduce()        checks and normalizes the arguments, handles count 0
 *                      and one rank, picks ring or recursive doubling;
 *   allreduce_ring()   allreduce_ring.cc
 *   allreduce_rd()     allreduce_rd.cc
 *   allreduce_rd_small() allreduce_rd_small.hpp: recursive doubling's small calls
 *                      without the engine's set-up
 *
 * Every rank of the communicator calls allreduce() with the same count,
 * elem_size, algorithm, rd_max_bytes, segment_size, comm_id and seq; the
 * checks depend on those alone (and on rank/size), so all ranks agree on
 * whether to run and which algorithm.
 */
#ifndef DUALRAIL_ALGO_ALLREDUCE_HPP
#define DUALRAIL_ALGO_ALLREDUCE_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "algo/coll.hpp"
#include "algo/transport.hpp"
#include "dualrail/status.h"

namespace dualrail {
namespace coll {

/* p with the sequence number masked, sendbuf == recvbuf turned into nullptr (in place),
 * and zero rd_max_bytes / segment_size replaced by the defaults. */
Params normalized(const Params &in);
/* The same in place (dr_allreduce: its arguments are built for the call, no copy needed). */
void normalize(Params &p);

/* What allreduce() runs for p: kAlgoRing or kAlgoRd (a forced choice is returned as is). */
int allreduce_choose(const Params &p);

/*
 * Blocking allreduce. DR_OK, or an error with a one-line reason in *err
 * (which names the peer rank involved). scratch may be nullptr (a buffer is
 * allocated for the call). Never throws.
 */
dr_status_t allreduce(Transport &t, const Params &p, Scratch *scratch, std::string *err);

/*
 * For a rank that fails before it could start allreduce() for p (a device copy, staging
 * memory): allreduce() in fail mode (Params::fail), which tells the peers of its schedule,
 * as that schedule would have on its own error (engine.hpp, Aborts), so that they return
 * st instead of waiting for this rank. Returns st; *err = why.
 */
dr_status_t allreduce_fail_early(Transport &t, const Params &p, dr_status_t st,
                                 const std::string &why, std::string *err);

/* The algorithms, for arguments allreduce() has checked and normalized (size >= 2, count >= 1). */
dr_status_t allreduce_ring(Transport &t, const Params &p, Scratch &scratch, std::string *err);
dr_status_t allreduce_rd(Transport &t, const Params &p, Scratch &scratch, std::string *err);

/* The calls recursive doubling gets that allreduce_rd_small() takes instead (same wire
 * schedule, results bit for bit the same): see allreduce_rd_small.hpp, Accepts. */
constexpr size_t kRdSmallMaxBytes = 16384;
constexpr int kRdSmallMaxRounds = 7;
bool allreduce_rd_small_fits(const Params &p);
/* Whether allreduce() would run p (normalized) through allreduce_rd_small: then the caller
 * may call that directly, skipping allreduce()'s chain of checks (dr_allreduce does).
 * False for whatever that chain rejects or gives another algorithm. */
bool allreduce_small_direct(const Params &p);
dr_status_t allreduce_rd_small(Transport &t, const Params &p, Scratch &scratch, std::string *err);
/* How many allreduce_rd_small() calls in this process built the engine (slow mode). */
uint64_t allreduce_rd_small_slow_calls();

} // namespace coll
} // namespace dualrail

#endif
