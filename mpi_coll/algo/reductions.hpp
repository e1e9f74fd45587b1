/*
 * Reduce, reduce_scatter_block and reduce_scatter over a Transport: the C++
 * entries of the rooted and scattered reductions (reductions.cc: checks,
 * trivial cases, algorithm choice) and their algorithms, one per file. They
 * reduce elements of elem_size bytes with a commutative op (Params::reduce),
 * as the allreduce does.
 *
 *   reduce()                 reduce_binomial.cc        small messages, any size
 *                            reduce_chain.cc           large (pipelined chain)
 *                            reduce_rabenseifner.cc    large, shorter than n chain
 *                                                      segments: ring reduce-scatter
 *                                                      + gather to the root
 *   reduce_scatter_block()   reduce_scatter_ring.cc    large (pipelined ring)
 *   reduce_scatter()         reduce_scatter_halving.cc small (recursive halving,
 *                                                      any size: extra ranks fold)
 *   (both take both; reduce_scatter_block is reduce_scatter with equal blocks)
 *
 * Every rank passes the same kind, count (counts), elem_size, root,
 * algorithm, small_max_bytes, segment_size, comm_id and seq; the checks and
 * the choice depend on those and on rank/size alone, so all ranks agree.
 *
 * Results. Rabenseifner's reduce-scatter is the ring allreduce's first
 * phase with the same blocks, segments and order of operations, so a large
 * reduce gives bitwise the result MPI_Allreduce gives for the same inputs
 * (with equal segment_size and when both take their ring). The chain and
 * binomial reduces and the halving reduce-scatter combine in another order: the same
 * value for exact arithmetic (integers, and floats holding integers),
 * possibly other last bits for rounded floating sums.
 */
#ifndef DUALRAIL_ALGO_REDUCTIONS_HPP
#define DUALRAIL_ALGO_REDUCTIONS_HPP

#include <string>

#include "algo/coll.hpp"
#include "algo/ring_math.hpp"
#include "algo/transport.hpp"

namespace dualrail {
namespace coll {

class Engine;

/*
 * Blocking; DR_OK or an error with a one-line reason in *err. Never throw.
 * scratch may be nullptr (a buffer is allocated for the call).
 *   reduce:               count elements; recvbuf read (in place: sendbuf nullptr or
 *                         == recvbuf) and written at the root only
 *   reduce_scatter_block: count elements per rank; sendbuf holds size x count
 *                         (in place: recvbuf does, the result goes to its start)
 *   reduce_scatter:       counts[r] bytes of the result go to rank r; sendbuf holds
 *                         them all in rank order (in place: recvbuf does)
 */
dr_status_t reduce(Transport &t, const Params &p, Scratch *scratch, std::string *err);
dr_status_t reduce_scatter_block(Transport &t, const Params &p, Scratch *scratch, std::string *err);
dr_status_t reduce_scatter(Transport &t, const Params &p, Scratch *scratch, std::string *err);

/* What the entries run for p (a forced choice is returned as is). */
int reduce_choose(const Params &p);
/* reduce_scatter_block and reduce_scatter; total_bytes: the whole input of one rank. */
int reduce_scatter_choose(const Params &p, size_t total_bytes);

/*
 * One reduce-scatter's blocks in elements: blocks[b] is rank b's block of the result
 * (reduce_scatter), or ring block b (the reduce, whose blocks are the allreduce's).
 */
struct Blocks {
    const Span *span; /* n entries */
    int n;
    size_t total; /* elements, all blocks */
    size_t max;   /* elements of the largest block */
};

/* The algorithms, for checked arguments (size >= 2, some elements). sendbuf is the input
 * (never nullptr here); out: this rank's result. */
dr_status_t reduce_binomial(Transport &t, const Params &p, Scratch &scratch, std::string *err);
dr_status_t reduce_rabenseifner(Transport &t, const Params &p, Scratch &scratch, std::string *err);
dr_status_t reduce_chain(Transport &t, const Params &p, Scratch &scratch, std::string *err);
dr_status_t reduce_scatter_ring(Transport &t, const Params &p, const Blocks &b, void *out,
                                Scratch &scratch, std::string *err);
dr_status_t reduce_scatter_halving(Transport &t, const Params &p, const Blocks &b, void *out,
                                   Scratch &scratch, std::string *err);

/*
 * The pipelined ring reduce-scatter both reduce_scatter_ring and the first
 * phase of reduce_rabenseifner run (reduce_scatter_ring.cc). Ring block j is
 * span[ring_index(j)]; rank r sends ring block (r - s) mod n at step s and
 * ends with the full result of ring block (r + 1) mod n in `out`. Steps
 * 0 .. n - 2 of the engine's key, block field = ring block. Slots:
 * ring_rs_slots(window, n, nseg) from first_slot on.
 */
struct RingRs {
    const char *src; /* the input, at the spans' offsets */
    char *work;      /* partial results passing through, same offsets (may be src) */
    char *out;       /* the owned block's result (its first element) */
    const Span *span;
    int shift; /* ring block j is span[(j + shift) mod n] */
    int n, r, nseg;
    size_t esz;
    ReduceFn reduce;
    void *reduce_arg;
    char *slots; /* window receive slots of slot_bytes */
    size_t window, slot_bytes;
    size_t first_slot;
};
/* Segments and slot geometry for blocks of at most max_elems elements. */
int ring_rs_segments(size_t max_elems, size_t esz, size_t segment_size);
size_t ring_rs_slot_bytes(size_t max_elems, size_t esz, int nseg);
size_t ring_rs_window(size_t units, size_t slot_bytes);
size_t ring_rs_slots(size_t window, int n, int nseg);
/* Segment k of ring block j (absolute element offsets). */
Span ring_rs_segment(const RingRs &rs, int j, int k);
/* Runs the schedule; the sends are waited for too (they read src and work). */
dr_status_t ring_rs_run(Engine &eng, const RingRs &rs);

} // namespace coll
} // namespace dualrail

#endif
