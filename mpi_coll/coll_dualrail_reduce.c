/*
 * coll/dualrail MPI_Reduce: checks the call, then runs the plane-striped
 * reduce (dr_coll.h: binomial tree for small messages, ring reduce-scatter
 * + gather to the root for large). The same reductions as MPI_Allreduce
 * (coll_dualrail_op.c: Open MPI's op engine, the wrapping 8/16-bit sums and
 * MPI_UNSIGNED_LONG max/min done here). MPI_IN_PLACE at the root: its input
 * is in recvbuf; recvbuf is not touched on the other ranks. What it does not
 * handle goes to the previous module before any data moves: user-defined or
 * non-commutative ops, derived or non-predefined datatypes, (op, type) pairs
 * MPI does not define, a root out of range, an inactive module; the decision
 * depends on (op, datatype, count, root) only, which MPI requires to be the
 * same on every rank. Buffers in device memory are staged whole through host
 * memory: the input copied out before, the root's result copied in after.
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

int mca_coll_dualrail_reduce_intra(const void *sbuf, void *rbuf, int count,
                                   struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                                   struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t elem = 0;

    ++m->calls[DR_KIND_REDUCE];
    if (!m->active || count < 0 || root < 0 || root >= ompi_comm_size(comm) ||
        !mca_coll_dualrail_op_supported(op, dtype, &elem)) {
        goto fallback;
    }
    const int rank = ompi_comm_rank(comm);
    const bool at_root = rank == root, inplace = at_root && sbuf == MPI_IN_PLACE;
    const size_t bytes = (size_t)count * elem;
    const bool dev_s = !inplace && bytes != 0 && mca_coll_dualrail_on_device(sbuf, NULL);
    const bool dev_r = at_root && bytes != 0 && mca_coll_dualrail_on_device(NULL, rbuf);
    mca_coll_dualrail_reduce_ctx_t rctx;
    mca_coll_dualrail_reduce_ctx_init(&rctx, op, dtype);
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_REDUCE, &a, &idle_state);
    a.sendbuf = inplace ? NULL : sbuf;
    a.recvbuf = at_root ? rbuf : NULL;
    a.bytes = bytes;
    a.root = root;
    a.elem_size = elem;
    a.reduce = mca_coll_dualrail_reduce;
    a.reduce_arg = &rctx;
    a.algorithm = cm->reduce_algorithm;
    a.small_max_bytes = cm->reduce_small_max_bytes;
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: reduce on %s: %d x %s, %s, root %d%s, algorithm %d",
                     cm->world_rank, comm->c_name, count, dtype->name, op->o_name, root,
                     inplace ? " in place" : "", dr_reduce_choose(&a));
    char err[512];
    dr_status_t st = DR_OK;
    void *host = NULL;
    /* A pair type with holes: the root's result reaches rbuf through the type map only
     * (mca_coll_dualrail_result_out), computed on a host copy as for device buffers. */
    struct ompi_datatype_t *holes = at_root ? mca_coll_dualrail_holes(dtype) : NULL;
    const dr_coll_args_t user = a;
    if (dev_s || dev_r || (holes != NULL && bytes != 0)) {
        /* A staging failure fails this rank before it communicates (see bcast). The
         * root reduces in place on the host copy; the others send theirs. */
        st = mca_coll_dualrail_host_copy(&host, inplace ? rbuf : sbuf, bytes,
                                         inplace ? dev_r : dev_s, err, sizeof(err));
        a.sendbuf = at_root ? NULL : host;
        a.recvbuf = at_root ? host : NULL;
    }
    mca_coll_dualrail_fail_mode(&a, &user, st, err);
    st = dr_reduce(cm->mr, &a, err, sizeof(err));
    if (st == DR_OK && host != NULL && at_root) {
        st = mca_coll_dualrail_result_out(rbuf, host, bytes, dev_r, holes, elem, err,
                                          sizeof(err));
    }
    free(host);
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, "MPI_Reduce", st, err);
    }
    return OMPI_SUCCESS;

fallback:
    ++m->fallbacks[DR_KIND_REDUCE];
    DUALRAIL_VERBOSE(2,
                     "coll/dualrail: rank %d: reduce on %s (%s, %s) handed to the previous "
                     "module",
                     cm->world_rank, comm->c_name, dtype->name, op->o_name);
    return m->previous_reduce(sbuf, rbuf, count, dtype, op, root, comm, m->previous_reduce_module);
}
