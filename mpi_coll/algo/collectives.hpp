/*
 * Bcast, barrier and allgather over a Transport: the C++ entries of the
 * data-movement collectives (collectives.cc: checks, trivial cases,
 * algorithm choice) and their algorithms, one per file. They move bytes
 * (Params::count is bytes) and never reduce.
 *
 *   bcast()      bcast_binomial.cc            small messages, any size
 *                bcast_chain.cc               large (pipelined chain)
 *                bcast_scatter_allgather.cc   large, shorter than n chain segments
 *   barrier()    barrier_dissemination.cc
 *   allgather()  allgather_ring.cc            large
 *                allgather_rd.cc              small, power-of-two sizes
 *                allgather_bruck.cc           small, other sizes
 *
 * Every rank passes the same kind, count, root, algorithm, small_max_bytes,
 * segment_size, comm_id and seq; the checks and the choice depend on those
 * and on rank/size alone, so all ranks agree.
 */
#ifndef DUALRAIL_ALGO_COLLECTIVES_HPP
#define DUALRAIL_ALGO_COLLECTIVES_HPP

#include <string>

#include "algo/coll.hpp"
#include "algo/transport.hpp"

namespace dualrail {
namespace coll {

class Engine;

/* Blocking; DR_OK or an error with a one-line reason in *err. Never throw. */
dr_status_t bcast(Transport &t, const Params &p, std::string *err);
dr_status_t barrier(Transport &t, const Params &p, std::string *err);
/* scratch (Bruck only) may be nullptr: a buffer is allocated for the call. */
dr_status_t allgather(Transport &t, const Params &p, Scratch *scratch, std::string *err);

/* What bcast()/allgather() run for p (a forced choice is returned as is). */
int bcast_choose(const Params &p);
int allgather_choose(const Params &p);

/* The algorithms, for checked arguments (size >= 2, count >= 1 except barrier). */
dr_status_t bcast_binomial(Transport &t, const Params &p, std::string *err);
dr_status_t bcast_scatter_allgather(Transport &t, const Params &p, std::string *err);
dr_status_t bcast_chain(Transport &t, const Params &p, std::string *err);
dr_status_t barrier_dissemination(Transport &t, const Params &p, std::string *err);
dr_status_t allgather_ring(Transport &t, const Params &p, std::string *err);
dr_status_t allgather_rd(Transport &t, const Params &p, std::string *err);
dr_status_t allgather_bruck(Transport &t, const Params &p, Scratch &scratch, std::string *err);

/*
 * The pipelined ring allgather both allgather_ring and the second phase of
 * bcast_scatter_allgather run (allgather_ring.cc). In relative ranks
 * (v = (rank - shift) mod n), relative rank v holds block v of buf, blocks
 * being bytes split evenly into n (even_offset); at the end every rank holds
 * all. Steps step_base .. step_base + n - 2 of the engine's key. Slots:
 * ring_allgather_slots(n, nseg) from first_slot on.
 */
struct RingAllgather {
    char *buf;
    size_t bytes; /* all n blocks */
    int n, v, shift;
    int nseg;
    uint32_t step_base;
    size_t first_slot;
    /* allgatherv: block b is counts[b] bytes at buf + displs[b] (block = absolute rank,
     * shift 0); nullptr: the even split of bytes */
    const size_t *counts = nullptr;
    const size_t *displs = nullptr;
};
size_t ring_allgather_slots(int n, int nseg);
dr_status_t ring_allgather_run(Engine &eng, const RingAllgather &ra);

} // namespace coll
} // namespace dualrail

#endif
