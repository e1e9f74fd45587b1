/*
 * coll/dualrail MPI_Reduce_scatter_block and MPI_Reduce_scatter: check the
 * call, then run the plane-striped reduce-scatter (dr_coll.h: recursive
 * halving for small inputs, pipelined ring for large; reduce_scatter_block
 * is reduce_scatter with equal blocks). The same reductions as
 * MPI_Allreduce (coll_dualrail_op.c). MPI_IN_PLACE as MPI defines it: the
 * input is in recvbuf and this rank's block of the result goes to its start.
 * What they do not handle goes to the previous module before any data
 * moves: user-defined or non-commutative ops, derived or non-predefined
 * datatypes, (op, type) pairs MPI does not define, negative counts, an
 * inactive module; the decision depends on (op, datatype, counts) only,
 * which MPI requires to be the same on every rank. Buffers in device memory
 * are staged whole through host memory: the input copied out before, this
 * rank's block copied in after.
 */
#include "coll_dualrail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"

/* Both collectives once their arguments are set (a->counts NULL: the block variant):
 * device staging around the call, the error report. total: this rank's input bytes,
 * mine: its block of the result. */
static int run(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm, dr_coll_args_t *a,
               const void *sbuf, void *rbuf, size_t total, size_t mine,
               struct ompi_datatype_t *dtype, const char *what)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const bool inplace = sbuf == MPI_IN_PLACE;
    const bool dev_s = !inplace && total != 0 && mca_coll_dualrail_on_device(sbuf, NULL);
    const bool dev_r =
        (mine != 0 || inplace) && total != 0 && mca_coll_dualrail_on_device(NULL, rbuf);
    char err[512];
    dr_status_t st = DR_OK;
    void *host = NULL;
    /* A pair type with holes: this rank's block reaches rbuf through the type map only
     * (mca_coll_dualrail_result_out), computed on a host copy as for device buffers. */
    struct ompi_datatype_t *holes = mine != 0 ? mca_coll_dualrail_holes(dtype) : NULL;
    const dr_coll_args_t user = *a;
    if (dev_s || dev_r || holes != NULL) {
        /* A staging failure fails this rank before it communicates (see bcast). The
         * host copy runs in place: the input there, the result at its start. */
        st = mca_coll_dualrail_host_copy(&host, inplace ? rbuf : sbuf, total,
                                         inplace ? dev_r : dev_s, err, sizeof(err));
        a->sendbuf = NULL;
        a->recvbuf = host;
    }
    mca_coll_dualrail_fail_mode(a, &user, st, err);
    st = a->counts == NULL ? dr_reduce_scatter_block(cm->mr, a, err, sizeof(err))
                           : dr_reduce_scatter(cm->mr, a, err, sizeof(err));
    if (st == DR_OK && host != NULL && mine != 0) {
        st = mca_coll_dualrail_result_out(rbuf, host, mine, dev_r, holes, a->elem_size, err,
                                          sizeof(err));
    }
    free(host);
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, what, st, err);
    }
    return OMPI_SUCCESS;
}

void mca_coll_dualrail_reduce_scatter_block_args(
    mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm, const void *sbuf, void *rbuf,
    int rcount, size_t elem, struct ompi_op_t *op, struct ompi_datatype_t *dtype,
    mca_coll_dualrail_reduce_ctx_t *rctx, dr_coll_args_t *a, mca_coll_dualrail_idle_t *idle_state)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    mca_coll_dualrail_reduce_ctx_init(rctx, op, dtype);
    mca_coll_dualrail_args_init(m, comm, DR_KIND_REDUCE_SCATTER_BLOCK, a, idle_state);
    a->sendbuf = sbuf == MPI_IN_PLACE ? NULL : sbuf;
    a->recvbuf = rbuf;
    a->bytes = (size_t)rcount * elem;
    a->elem_size = elem;
    a->reduce = mca_coll_dualrail_reduce;
    a->reduce_arg = rctx;
    a->algorithm = cm->reduce_scatter_block_algorithm;
    a->small_max_bytes = cm->reduce_scatter_block_small_max_bytes;
}

int mca_coll_dualrail_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                           struct ompi_communicator_t *comm,
                                           mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t elem = 0;

    ++m->calls[DR_KIND_REDUCE_SCATTER_BLOCK];
    if (!m->active || rcount < 0 || !mca_coll_dualrail_op_supported(op, dtype, &elem)) {
        goto fallback;
    }
    mca_coll_dualrail_reduce_ctx_t rctx;
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_reduce_scatter_block_args(m, comm, sbuf, rbuf, rcount, elem, op, dtype, &rctx,
                                                &a, &idle_state);
    const size_t bytes = a.bytes;
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: reduce_scatter_block on %s: %d x %s, %s%s, "
                     "algorithm %d",
                     cm->world_rank, comm->c_name, rcount, dtype->name, op->o_name,
                     a.sendbuf == NULL ? " in place" : "", dr_reduce_scatter_block_choose(&a));
    return run(m, comm, &a, sbuf, rbuf, bytes * (size_t)a.size, bytes, dtype,
               "MPI_Reduce_scatter_block");

fallback:
    ++m->fallbacks[DR_KIND_REDUCE_SCATTER_BLOCK];
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: reduce_scatter_block on %s (%s, %s) handed to "
                     "the previous module",
                     cm->world_rank, comm->c_name, dtype->name, op->o_name);
    return m->previous_reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm,
                                            m->previous_reduce_scatter_block_module);
}

int mca_coll_dualrail_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                     struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                     struct ompi_communicator_t *comm,
                                     mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int size = ompi_comm_size(comm);
    size_t elem = 0, *counts = NULL;

    ++m->calls[DR_KIND_REDUCE_SCATTER];
    if (!m->active || !mca_coll_dualrail_op_supported(op, dtype, &elem)) {
        goto fallback;
    }
    for (int r = 0; r < size; ++r) {
        if (rcounts[r] < 0) {
            goto fallback; /* erroneous; the previous module reports it */
        }
    }
    mca_coll_dualrail_reduce_ctx_t rctx;
    mca_coll_dualrail_reduce_ctx_init(&rctx, op, dtype);
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_REDUCE_SCATTER, &a, &idle_state);
    /* Per call, not per segment: the algorithm layer takes byte counts. Taken after the
     * sequence number, so a failure here leaves this rank's numbering with the others'. */
    counts = malloc(sizeof(size_t) * (size_t)size);
    if (counts == NULL) {
        return mca_coll_dualrail_failed(comm, "MPI_Reduce_scatter", DR_ERR_NO_MEMORY,
                                        "no memory for the counts");
    }
    size_t total = 0;
    for (int r = 0; r < size; ++r) {
        counts[r] = (size_t)rcounts[r] * elem;
        total += counts[r];
    }
    a.sendbuf = sbuf == MPI_IN_PLACE ? NULL : sbuf;
    a.recvbuf = rbuf;
    a.elem_size = elem;
    a.reduce = mca_coll_dualrail_reduce;
    a.reduce_arg = &rctx;
    a.counts = counts;
    a.algorithm = cm->reduce_scatter_algorithm;
    a.small_max_bytes = cm->reduce_scatter_small_max_bytes;
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: reduce_scatter on %s: %zu bytes in all, %s, %s%s",
                     cm->world_rank, comm->c_name, total, dtype->name, op->o_name,
                     a.sendbuf == NULL ? ", in place" : "");
    const int rc = run(m, comm, &a, sbuf, rbuf, total, counts[ompi_comm_rank(comm)], dtype,
                       "MPI_Reduce_scatter");
    free(counts);
    return rc;

fallback:
    ++m->fallbacks[DR_KIND_REDUCE_SCATTER];
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: reduce_scatter on %s (%s, %s) handed to the "
                     "previous module",
                     cm->world_rank, comm->c_name, dtype->name, op->o_name);
    return m->previous_reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm,
                                      m->previous_reduce_scatter_module);
}
