/*
 * coll/dualrail MPI_Allreduce: checks the call, then runs the plane-striped
 * algorithm (dr_coll.h). What it does not handle goes to the previous module
 * before any data moves: user-defined or non-commutative ops, derived or
 * non-predefined datatypes, and (op, datatype) pairs MPI does not define (the
 * previous module raises the MPI error for those).
 */
#include "coll_dualrail.h"

#include <sched.h>
#include <stdio.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"

/*
 * Waiting: spin briefly for latency, then sleep on the planes' descriptors
 * (returns as soon as data arrives) so that ranks sharing a core, and the
 * kernel's network stack, get the CPU; keep Open MPI's runtime progressing.
 */
/* Seconds a waiting rank polls before it starts yielding the CPU. */
#define DUALRAIL_SPIN_NO_YIELD 20e-6

typedef struct idle_state {
    unsigned calls;
    double since;   /* when this collective first went idle */
    double now;     /* read every fourth call: a clock read per poll is measurable */
} idle_state_t;

static void idle(void *arg)
{
    idle_state_t *s = arg;
    if ((s->calls & 3) == 0) {
        s->now = MPI_Wtime();
    }
    const double now = s->now;
    if (s->calls++ == 0) {
        s->since = now;
    }
    if ((s->calls & 63) == 0) {
        opal_progress();
    }
    /* A peer on a core of its own answers a small message within tens of microseconds:
     * poll without a system call first (a sched_yield per poll cost ~10% of the latency
     * of an 8-byte allreduce). Then yield, for ranks that share a core. A longer wait is
     * a transfer bound by the wire: sleep until a plane has data. */
    if (now - s->since < DUALRAIL_SPIN_NO_YIELD) {
        return;
    } else if (now - s->since < mca_coll_dualrail_component.spin_time) {
        sched_yield();
    } else {
        dr_mr_wait_event(mca_coll_dualrail_component.mr, 0.001);
    }
}

/*
 * The MPI error class an application sees. A lost peer or a stalled collective is
 * MPI_ERR_OTHER (MPI 3.1 has no class for a failed process; Open MPI's own
 * OMPI_ERR_UNREACH would surface as MPI_ERR_INTERN, which reads as a bug in MPI).
 */
static int mpi_error(dr_status_t st)
{
    switch (st) {
    case DR_ERR_PEER_UNREACHABLE:
    case DR_ERR_TIMEOUT:
    case DR_ERR_GPU:       /* a CUDA failure during the call (device buffers) */
    case DR_ERR_NO_DEVICE: /* device buffers, but no usable GPU or device context */
        return MPI_ERR_OTHER;
    case DR_ERR_NO_MEMORY:
        return MPI_ERR_NO_MEM;
    case DR_ERR_TRUNCATED:
        return MPI_ERR_TRUNCATE;
    case DR_ERR_INVALID:
        return MPI_ERR_ARG;
    default:
        return MPI_ERR_INTERN;
    }
}

int mca_coll_dualrail_allreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm,
                                mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t elem = 0;

    ++m->calls;
    if (!m->active || !mca_coll_dualrail_op_supported(op, dtype, &elem)) {
        goto fallback;
    }

    mca_coll_dualrail_reduce_ctx_t rctx;
    mca_coll_dualrail_reduce_ctx_init(&rctx, op, dtype);
    idle_state_t idle_state = {0, 0.0, 0.0};
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
        .seq = m->seq++ & 0xfffff,
        .algorithm = cm->allreduce_algorithm,
        .rd_max_bytes = cm->rd_max_bytes,
        .segment_size = cm->segment_size,
        .timeout = cm->op_timeout,
        .idle = idle,
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
        opal_output(cm->output, "coll/dualrail: rank %d: MPI_Allreduce on %s failed: %s",
                    cm->world_rank, comm->c_name, err);
        return mpi_error(st);
    }
    return OMPI_SUCCESS;

fallback:
    ++m->fallbacks;
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: allreduce on %s (%s, %s) handed to the previous "
                     "module", cm->world_rank, comm->c_name, dtype->name, op->o_name);
    return m->previous_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                 m->previous_allreduce_module);
}
