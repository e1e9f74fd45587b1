/*
 * coll/dualrail MPI_Allreduce: checks the call, then runs the plane-striped
 * algorithm (dr_coll.h). What it does not handle goes to the previous module
 * before any data moves: user-defined or non-commutative ops, derived or
 * non-predefined datatypes, and (op, datatype) pairs MPI does not define (the
 * previous module raises the MPI error for those). Pair types with holes run
 * on a host copy (allreduce_holes).
 */
#include "coll_dualrail.h"

#include <stdio.h>
#include <stdlib.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"

/*
 * A pair type with holes (mca_coll_dualrail_holes): the call runs in place on a host copy of
 * its input and the result goes to rbuf through the type map only (result_out), so rbuf's
 * holes stay the caller's. Device buffers too, whole, through that copy (these types have
 * no GPU kernel; the CPU reduces them in any case). A failure to copy fails this rank
 * before it communicates and runs the call in fail mode (as the staging of the other
 * collectives): its peers are told instead of waiting for it.
 */
static dr_status_t allreduce_holes(mca_coll_dualrail_component_t *cm, dr_allreduce_args_t *a,
                                   void *rbuf, struct ompi_datatype_t *holes, char *err,
                                   size_t errlen)
{
    const size_t bytes = a->count * a->elem_size;
    if (bytes == 0) {
        return dr_allreduce(cm->mr, a, err, errlen); /* nothing to write */
    }
    const void *in = a->sendbuf != NULL ? a->sendbuf : rbuf;
    void *host = NULL;
    dr_status_t st = mca_coll_dualrail_host_copy(
        &host, in, bytes, mca_coll_dualrail_on_device(in, NULL), err, errlen);
    if (st == DR_OK) {
        a->sendbuf = NULL;
        a->recvbuf = host;
    } else {
        /* fail mode on the caller's buffers (as mca_coll_dualrail_fail_mode) */
        a->fail = st;
        a->fail_why = err;
    }
    st = dr_allreduce(cm->mr, a, err, errlen);
    if (st == DR_OK) {
        st =
            mca_coll_dualrail_result_out(rbuf, host, bytes, mca_coll_dualrail_on_device(NULL, rbuf),
                                         holes, a->elem_size, err, errlen);
    }
    free(host);
    return st;
}

int mca_coll_dualrail_allreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm,
                                mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t elem = 0;
    struct ompi_datatype_t *holes;

    ++m->calls[DR_KIND_ALLREDUCE];
    if (!m->active) {
        goto fallback;
    }
    if (op == m->ar_op && dtype == m->ar_dtype) {
        elem = m->ar_elem;
        holes = m->ar_holes;
    } else {
        if (!mca_coll_dualrail_op_supported(op, dtype, &elem)) {
            goto fallback;
        }
        holes = mca_coll_dualrail_holes(dtype);
        m->ar_op = op;
        m->ar_dtype = dtype;
        m->ar_elem = elem;
        m->ar_holes = holes;
        m->ar_own = mca_coll_dualrail_reduce_class(op, dtype);
    }

    mca_coll_dualrail_reduce_ctx_t rctx;
    mca_coll_dualrail_reduce_ctx_known(&rctx, op, dtype, m->ar_own);
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
    if (holes != NULL) {
        st = allreduce_holes(cm, &a, rbuf, holes, err, sizeof(err));
    } else if (mca_coll_dualrail_on_device(a.sendbuf, rbuf)) {
        /* GPU buffers (issue 6): staged through pinned host memory; same wire schedule. */
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
