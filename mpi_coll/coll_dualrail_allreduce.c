/*
 * coll/dualrail MPI_Allreduce: checks the call, then runs the plane-striped
 * algorithm (dr_coll.h). What it does not handle goes to the previous module
 * before any data moves: user-defined or non-commutative ops, derived or
 * non-predefined datatypes, and (op, datatype) pairs MPI does not define (the
 * previous module raises the MPI error for those).
 */
#include "coll_dualrail.h"

#include <stdio.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"

int mca_coll_dualrail_allreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm,
                                mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t elem = 0;

    ++m->calls[DR_KIND_ALLREDUCE];
    if (!m->active || !mca_coll_dualrail_op_supported(op, dtype, &elem)) {
        goto fallback;
    }

    mca_coll_dualrail_reduce_ctx_t rctx;
    mca_coll_dualrail_reduce_ctx_init(&rctx, op, dtype);
    mca_coll_dualrail_idle_t idle_state = {0, 0.0, 0.0};
    dr_allreduce_args_t a = {
        .sendbuf = sbuf == MPI_IN_PLACE ? NULL : sbuf,
        .recvbuf = rbuf,
        .count = (size_t)count,
        .elem_size = elem,
        .reduce = mca_coll_dualrail_reduce,
        .reduce_arg = &rctx,
        .rank = ompi_comm_rank(comm),
        .size = ompi_comm_size(comm),
        .peer_ids = m->peer_ids,
        .comm_id = m->comm_id,
        .seq = m->seq[DR_KIND_ALLREDUCE]++ & DR_KEY_SEQ_MASK,
        .algorithm = cm->allreduce_algorithm,
        .rd_max_bytes = cm->rd_max_bytes,
        .segment_size = cm->segment_size,
        .timeout = cm->op_timeout,
        .idle = mca_coll_dualrail_idle,
        .idle_arg = &idle_state,
    };
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: allreduce on %s: %d x %s, %s, algorithm %d",
                     cm->world_rank, comm->c_name, count, dtype->name, op->o_name,
                     dr_allreduce_choose(&a));
    char err[512];
    dr_status_t st;
    /* GPU buffers (issue 6): staged through pinned host memory; same wire schedule. */
    if (dr_buffers_on_device(mca_coll_dualrail_gpu_mem(), a.sendbuf, rbuf)) {
        int rc = mca_coll_dualrail_allreduce_device(m, a.sendbuf, rbuf, dtype, op, &a, err,
                                                    sizeof(err), &st);
        if (rc != OMPI_SUCCESS) {
            return rc;
        }
    } else {
        st = dr_allreduce(cm->mr, &a, err, sizeof(err));
    }
    if (st != DR_OK) {
        /* The module stays active: only some ranks may see the error (the others already
         * had all their data), and a rank that switched to the previous module alone would
         * pair its next call with the others' dualrail call. Every rank keeps advancing the
         * sequence number, so later calls succeed or fail on all ranks alike. */
        return mca_coll_dualrail_failed(comm, "MPI_Allreduce", st, err);
    }
    return OMPI_SUCCESS;

fallback:
    ++m->fallbacks[DR_KIND_ALLREDUCE];
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: allreduce on %s (%s, %s) handed to the previous "
                     "module", cm->world_rank, comm->c_name, dtype->name, op->o_name);
    return m->previous_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                 m->previous_allreduce_module);
}
