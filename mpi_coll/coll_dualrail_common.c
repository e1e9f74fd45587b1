/*
 * What every collective's glue shares: the wait callback the algorithms call
 * when nothing moved, the MPI error class of a status, the datatypes the
 * data-movement collectives take, the arguments common to them, and the
 * report of a failed call. Each collective keeps its own file
 * (coll_dualrail_<collective>.c) with its checks and its fallback.
 */
#include "coll_dualrail.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "gpu/dr_gpu.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

/*
 * Waiting: spin briefly for latency, then sleep (50 us naps, or on the planes'
 * descriptors until data arrives with coll_dualrail_wakeup) so that ranks sharing a
 * core, and the kernel's network stack, get the CPU; keep Open MPI's runtime progressing.
 */
/* Seconds a waiting rank polls before it starts yielding the CPU. */
#define DUALRAIL_SPIN_NO_YIELD 20e-6

void mca_coll_dualrail_idle(void *arg)
{
    mca_coll_dualrail_idle_t *s = arg;
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
int mca_coll_dualrail_mpi_error(dr_status_t st)
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

bool mca_coll_dualrail_dtype_bytes(struct ompi_datatype_t *dtype, size_t count, size_t *bytes)
{
    size_t size = 0;
    ptrdiff_t lb = 0, extent = 0;
    /* Derived datatypes go to the previous module, even contiguous ones: ranks may
     * describe the same bytes with different types, and only predefined ones are
     * certain to be judged alike on every rank. Pair types with holes (MPI_SHORT_INT)
     * are not contiguous. */
    if (!ompi_datatype_is_predefined(dtype) || ompi_datatype_type_size(dtype, &size) != OMPI_SUCCESS ||
        ompi_datatype_get_extent(dtype, &lb, &extent) != OMPI_SUCCESS || lb != 0 ||
        (size_t)extent != size || size == 0) {
        return false;
    }
    if (count > SIZE_MAX / size) {
        return false;
    }
    *bytes = count * size;
    return true;
}

bool mca_coll_dualrail_v_layout(const int *counts, const int *displs, int n, size_t esize,
                                size_t *bc, size_t *bd, ptrdiff_t *lo, size_t *span)
{
    long long min = 0;
    bool any = false;
    for (int q = 0; q < n; ++q) {
        if (counts[q] < 0) {
            return false;
        }
        if (counts[q] != 0 && (!any || displs[q] < min)) {
            min = displs[q];
            any = true;
        }
    }
    *span = 0;
    for (int q = 0; q < n; ++q) {
        bc[q] = (size_t)counts[q] * esize;
        bd[q] = bc[q] == 0 ? 0 : (size_t)((long long)displs[q] - min) * esize;
        if (bc[q] != 0 && bd[q] + bc[q] > *span) {
            *span = bd[q] + bc[q];
        }
    }
    *lo = (ptrdiff_t)(min * (long long)esize);
    return true;
}

bool mca_coll_dualrail_block_bytes(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                   int rcount, struct ompi_datatype_t *rdtype, size_t *bytes)
{
    size_t sbytes = 0;
    if (rcount < 0 || !mca_coll_dualrail_dtype_bytes(rdtype, (size_t)rcount, bytes)) {
        return false;
    }
    /* MPI_IN_PLACE: sendcount and sendtype are ignored (MPI 3.1, 5.7 and 5.8). Blocks of
     * different sizes are erroneous: the previous module reports it. */
    return sbuf == MPI_IN_PLACE ||
           (scount >= 0 && mca_coll_dualrail_dtype_bytes(sdtype, (size_t)scount, &sbytes) &&
            sbytes == *bytes);
}

void mca_coll_dualrail_args_init(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm,
                                 int kind, dr_coll_args_t *a, mca_coll_dualrail_idle_t *idle_state)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    memset(a, 0, sizeof(*a));
    memset(idle_state, 0, sizeof(*idle_state));
    a->rank = ompi_comm_rank(comm);
    a->size = ompi_comm_size(comm);
    a->peer_ids = m->peer_ids;
    a->comm_id = m->comm_id;
    /* Each kind counts its own calls (see coll_dualrail.h). */
    a->seq = m->seq[kind]++ & DR_KEY_SEQ_MASK;
    a->segment_size = cm->segment_size;
    a->timeout = cm->op_timeout;
    a->idle = mca_coll_dualrail_idle;
    a->idle_arg = idle_state;
}

/* Communicator ids on which a call failed on this process (forget_comm in
 * coll_dualrail_module.c drains the planes before dropping what such a call left behind). */
static volatile unsigned char cid_failed[0x10000];

bool mca_coll_dualrail_take_failure(uint32_t cid)
{
    const bool failed = cid_failed[cid & 0xffff] != 0;
    cid_failed[cid & 0xffff] = 0;
    return failed;
}

int mca_coll_dualrail_failed(struct ompi_communicator_t *comm, const char *what, dr_status_t st,
                             const char *err)
{
    uint32_t cid = 0;
    if (mca_coll_dualrail_comm_cid(comm, &cid)) {
        cid_failed[cid & 0xffff] = 1;
    }
    /* The module stays active: only some ranks may see the error, and a rank that
     * switched to the previous module alone would pair its next call with the others'
     * dualrail call (see coll_dualrail_allreduce.c). */
    mca_coll_dualrail_say("coll/dualrail: rank %d: %s on %s failed: %s",
                          mca_coll_dualrail_component.world_rank, what, comm->c_name, err);
    return mca_coll_dualrail_mpi_error(st);
}

/*
 * Device buffers of bcast and allgather: whole messages copied between the
 * device and host memory on a stream of the buffer's device, waited for
 * before the collective reads or after it wrote (these collectives move bytes
 * and never reduce, so no kernel and no pipelined staging is needed).
 */
dr_status_t mca_coll_dualrail_stage(void *dst, const void *src, size_t bytes, const void *dev_ptr,
                                    char *err, size_t errlen)
{
    const dr_mem_ops_t *mem = mca_coll_dualrail_gpu_mem();
    if (bytes == 0) {
        return DR_OK;
    }
    void *saved = NULL, *stream = NULL;
    const int device = mem->device_of != NULL ? mem->device_of(dev_ptr) : -1;
    /* As algo/staging.cc's DeviceScope: switch only when the buffer's device is not the
     * thread's current one, and give the thread back exactly what it had. */
    const bool enter = device >= 0 && mem->device_enter != NULL && mem->device_current != NULL &&
                       mem->device_current() != device;
    dr_status_t st = enter ? mem->device_enter(device, &saved) : DR_OK;
    const bool entered = enter && st == DR_OK;
    if (st == DR_OK && (st = mem->stream_create(&stream)) == DR_OK) {
        st = mem->copy_async(dst, src, bytes, stream);
        const dr_status_t ss = mem->stream_sync(stream);
        st = st != DR_OK ? st : ss;
        mem->stream_destroy(stream);
    }
    if (entered) {
        mem->device_leave(saved);
    }
    if (st != DR_OK) {
        snprintf(err, errlen, "staging %zu bytes of a device buffer (device %d) through host "
                 "memory: %s", bytes, device, mem->last_error());
        return DR_ERR_GPU;
    }
    return DR_OK;
}

/* A host copy of bytes of in (device memory where dev) for a call to run on: *host is
 * malloc'ed (the caller frees it, also after a failed copy), or NULL after DR_ERR_NO_MEMORY. */
dr_status_t mca_coll_dualrail_host_copy(void **host, const void *in, size_t bytes, bool dev,
                                        char *err, size_t errlen)
{
    if ((*host = malloc(bytes)) == NULL) {
        snprintf(err, errlen, "no host memory to stage %zu bytes", bytes);
        return DR_ERR_NO_MEMORY;
    }
    if (dev) {
        return mca_coll_dualrail_stage(*host, in, bytes, in, err, errlen);
    }
    memcpy(*host, in, bytes);
    return DR_OK;
}

/*
 * A reduction's result into the caller's receive buffer (host or, dev, device memory): whole
 * bytes, or for a pair type with holes (holes: MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT,
 * MPI_LONG_DOUBLE_INT; see mca_coll_dualrail_holes) only the bytes of its type map. The
 * algorithms move and reduce whole extents, so a result computed in place in the caller's
 * buffer carried some other rank's padding in its holes, where MPI writes nothing (stock
 * Open MPI leaves them as they were). A device buffer is read, filled in and written back.
 */
dr_status_t mca_coll_dualrail_result_out(void *dst, const void *result, size_t bytes, bool dev,
                                         struct ompi_datatype_t *holes, size_t elem, char *err,
                                         size_t errlen)
{
    if (bytes == 0) {
        return DR_OK;
    }
    if (holes == NULL) {
        if (dev) {
            return mca_coll_dualrail_stage(dst, result, bytes, dst, err, errlen);
        }
        memcpy(dst, result, bytes);
        return DR_OK;
    }
    void *host = dst;
    dr_status_t st = DR_OK;
    if (dev) {
        if ((host = malloc(bytes)) == NULL) {
            snprintf(err, errlen, "no host memory to stage %zu bytes", bytes);
            return DR_ERR_NO_MEMORY;
        }
        st = mca_coll_dualrail_stage(host, dst, bytes, dst, err, errlen);
    }
    if (st == DR_OK) {
        ompi_datatype_copy_content_same_ddt(holes, bytes / elem, host, (char *)result);
    }
    if (dev) {
        if (st == DR_OK) {
            st = mca_coll_dualrail_stage(dst, host, bytes, dst, err, errlen);
        }
        free(host);
    }
    return st;
}
