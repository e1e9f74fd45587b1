/*
 * coll/dualrail and GPU buffers: which (op, datatype) pairs have a
 * reduction kernel, the per-communicator staging (created at the first call
 * with a device buffer, freed with the communicator), and one verbose line
 * about what the GPU path will do.
 *
 * half and bfloat16 are not MPI predefined datatypes in Open MPI 4.1: their
 * kernels are reached through the C interface (dr_gpu.h), the tests and the
 * benchmark, not through MPI_Allreduce. Pairs without a kernel (complex,
 * pair types for MAXLOC/MINLOC, logical and boolean types) still work on
 * device buffers: the whole message is staged and Open MPI's op engine
 * reduces it on the CPU (dr_coll_gpu.h).
 */
#include "coll_dualrail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "opal/util/output.h"

#include "dr_coll_gpu.h"
#include "dualrail/mr_memtype.h"
#include "gpu/dr_gpu.h"

static int gpu_op_of(const struct ompi_op_t *op)
{
    if (op == &ompi_mpi_op_sum.op)
        return DR_GPU_SUM;
    if (op == &ompi_mpi_op_prod.op)
        return DR_GPU_PROD;
    if (op == &ompi_mpi_op_min.op)
        return DR_GPU_MIN;
    if (op == &ompi_mpi_op_max.op)
        return DR_GPU_MAX;
    if (op == &ompi_mpi_op_band.op)
        return DR_GPU_BAND;
    if (op == &ompi_mpi_op_bor.op)
        return DR_GPU_BOR;
    if (op == &ompi_mpi_op_bxor.op)
        return DR_GPU_BXOR;
    if (op == &ompi_mpi_op_land.op)
        return DR_GPU_LAND;
    if (op == &ompi_mpi_op_lor.op)
        return DR_GPU_LOR;
    if (op == &ompi_mpi_op_lxor.op)
        return DR_GPU_LXOR;
    return -1;
}

/* Integer C types by size and signedness (x86-64 LP64: char is signed, long is 64-bit). */
static int gpu_type_of(const struct ompi_datatype_t *d)
{
    if (d == &ompi_mpi_float.dt)
        return DR_GPU_F32;
    if (d == &ompi_mpi_double.dt)
        return DR_GPU_F64;
    if (d == &ompi_mpi_int8_t.dt || d == &ompi_mpi_signed_char.dt || d == &ompi_mpi_char.dt)
        return DR_GPU_I8;
    if (d == &ompi_mpi_uint8_t.dt || d == &ompi_mpi_unsigned_char.dt || d == &ompi_mpi_byte.dt)
        return DR_GPU_U8;
    if (d == &ompi_mpi_int16_t.dt || d == &ompi_mpi_short.dt)
        return DR_GPU_I16;
    if (d == &ompi_mpi_uint16_t.dt || d == &ompi_mpi_unsigned_short.dt)
        return DR_GPU_U16;
    if (d == &ompi_mpi_int32_t.dt || d == &ompi_mpi_int.dt)
        return DR_GPU_I32;
    if (d == &ompi_mpi_uint32_t.dt || d == &ompi_mpi_unsigned.dt)
        return DR_GPU_U32;
    if (d == &ompi_mpi_int64_t.dt || d == &ompi_mpi_long.dt || d == &ompi_mpi_long_long_int.dt)
        return DR_GPU_I64;
    if (d == &ompi_mpi_uint64_t.dt || d == &ompi_mpi_unsigned_long.dt ||
        d == &ompi_mpi_unsigned_long_long.dt)
        return DR_GPU_U64;
    return -1;
}

const struct dr_mem_ops *mca_coll_dualrail_gpu_mem(void)
{
    /* gpu_standin: tests of this glue on machines without a GPU (MCA parameter, level 9). */
    return mca_coll_dualrail_component.gpu_standin ? dr_mem_standin() : dr_mem_cuda();
}

int mca_coll_dualrail_host_only_detect(void)
{
    /* gpu_standin is fixed once the component is registered; a race of two threads here
     * stores the same answer */
    const int host_only = !mca_coll_dualrail_component.gpu_standin && dr_mem_cuda_no_device();
    __atomic_store_n(&mca_coll_dualrail_component.host_only, host_only, __ATOMIC_RELAXED);
    return host_only;
}

int mca_coll_dualrail_allreduce_device(mca_coll_dualrail_module_t *m, const void *sbuf, void *rbuf,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       dr_allreduce_args_t *a, char *err, size_t errlen,
                                       dr_status_t *st)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    (void)sbuf;
    (void)rbuf;
    if (m->staging == NULL) {
        /* Once per communicator; streams, events and memory come with the call, on the
         * device of its buffers (not necessarily the thread's current one). */
        const dr_status_t cs = dr_staging_create(mca_coll_dualrail_gpu_mem(),
                                                 cm->cuda_staging_size, &m->staging, err, errlen);
        if (cs != DR_OK) {
            opal_output(cm->output, "coll/dualrail: rank %d: device buffers on %s: %s",
                        cm->world_rank, m->comm ? m->comm->c_name : "?", err);
            /* Before any data moved. Out of memory, or device buffers seen with no usable
             * GPU (a driver too old for this build's CUDA runtime): every node alike, as a
             * rule; a peer that did get staging is told (fail mode) instead of waiting. */
            a->fail = cs;
            a->fail_why = err;
            (void)dr_allreduce(cm->mr, a, err, errlen);
            return cs == DR_ERR_NO_MEMORY ? MPI_ERR_NO_MEM : MPI_ERR_OTHER;
        }
        DUALRAIL_VERBOSE(1,
                         "coll/dualrail: rank %d: staging for device buffers on %s: %zu "
                         "bytes of pinned host memory",
                         cm->world_rank, m->comm ? m->comm->c_name : "?", cm->cuda_staging_size);
    }
    int gop = gpu_op_of(op), gtype = gpu_type_of(dtype);
    if (!dr_gpu_op_valid(gop, gtype)) {
        gop = gtype = -1; /* staged whole, reduced on the CPU */
    }
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: allreduce with device buffers: %s (%s on %s)",
                     cm->world_rank, dr_allreduce_device_path(a, gop, gtype, m->staging),
                     gop >= 0 ? dr_gpu_op_name(gop) : "cpu",
                     gtype >= 0 ? dr_gpu_type_name(gtype) : dtype->name);
    *st = dr_allreduce_device(cm->mr, a, gop, gtype, m->staging, err, errlen);
    const char *why = "";
    const unsigned long fallbacks = dr_staging_fallbacks(m->staging, &why);
    if (fallbacks > m->staging_fallbacks) {
        if (m->staging_fallbacks == 0) {
            /* Once per communicator: results stay right, the bandwidth does not. */
            opal_output(cm->output,
                        "coll/dualrail: rank %d: device buffers on %s: %s; such calls run "
                        "through ordinary host memory (slower) until the allocation succeeds",
                        cm->world_rank, m->comm ? m->comm->c_name : "?", why);
        }
        m->staging_fallbacks = fallbacks;
    }
    return OMPI_SUCCESS;
}

/*
 * Non-blocking collectives: whole messages, as the blocking forms other than allreduce stage
 * them (the staged ring pipeline waits inside its schedule and has no task form). Each rank
 * decides for its own buffers only (the wire schedule is the same whatever a rank's buffers
 * are), so ranks with device and with host buffers meet in one call.
 */
dr_status_t mca_coll_dualrail_nb_stage_in(mca_coll_dualrail_nb_staging_t *s, const void **sendbuf,
                                          size_t s_bytes, void **recvbuf, size_t r_bytes,
                                          size_t in_bytes, size_t out_bytes,
                                          struct ompi_datatype_t *holes, size_t elem, char *err,
                                          size_t errlen)
{
    dr_status_t st = DR_OK;
    memset(s, 0, sizeof(*s));
    if (*sendbuf != NULL && s_bytes != 0 && mca_coll_dualrail_on_device(*sendbuf, NULL)) {
        if ((s->host_s = malloc(s_bytes)) == NULL) {
            snprintf(err, errlen, "no host memory to stage %zu bytes", s_bytes);
            return DR_ERR_NO_MEMORY;
        }
        st = mca_coll_dualrail_stage(s->host_s, *sendbuf, s_bytes, *sendbuf, err, errlen);
    }
    if (st == DR_OK && *recvbuf != NULL && r_bytes != 0 &&
        mca_coll_dualrail_on_device(NULL, *recvbuf)) {
        if ((s->host_r = malloc(r_bytes)) == NULL) {
            snprintf(err, errlen, "no host memory to stage %zu bytes", r_bytes);
            st = DR_ERR_NO_MEMORY;
        } else {
            st = mca_coll_dualrail_stage(s->host_r, *recvbuf, in_bytes, *recvbuf, err, errlen);
            s->dev_r = *recvbuf;
            s->out_bytes = out_bytes;
        }
    } else if (st == DR_OK && holes != NULL && *recvbuf != NULL && r_bytes != 0 && out_bytes != 0) {
        if ((s->host_r = malloc(r_bytes)) == NULL) {
            snprintf(err, errlen, "no host memory for a copy of %zu bytes", r_bytes);
            st = DR_ERR_NO_MEMORY;
        } else {
            memcpy(s->host_r, *recvbuf, in_bytes);
            s->user_r = *recvbuf;
            s->out_bytes = out_bytes;
        }
    }
    s->holes = holes;
    s->elem = elem;
    if (st != DR_OK) {
        mca_coll_dualrail_nb_stage_free(s);
        return st;
    }
    if (s->host_s != NULL) {
        *sendbuf = s->host_s;
    }
    if (s->host_r != NULL) {
        *recvbuf = s->host_r;
    }
    return DR_OK;
}

dr_status_t mca_coll_dualrail_nb_stage_out(mca_coll_dualrail_nb_staging_t *s, dr_status_t st,
                                           char *err, size_t errlen)
{
    if (st == DR_OK && (s->dev_r != NULL || s->user_r != NULL)) {
        st = mca_coll_dualrail_result_out(s->dev_r != NULL ? s->dev_r : s->user_r, s->host_r,
                                          s->out_bytes, s->dev_r != NULL, s->holes, s->elem, err,
                                          errlen);
    }
    mca_coll_dualrail_nb_stage_free(s);
    return st;
}

void mca_coll_dualrail_nb_stage_free(mca_coll_dualrail_nb_staging_t *s)
{
    free(s->host_s);
    free(s->host_r);
    memset(s, 0, sizeof(*s));
}

void mca_coll_dualrail_gpu_module_fini(mca_coll_dualrail_module_t *m)
{
    if (m->staging != NULL) {
        dr_staging_destroy(m->staging);
        m->staging = NULL;
    }
}

void mca_coll_dualrail_gpu_report(void)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    if (cm->verbose < 1) {
        return; /* not even the GPU query: default verbosity behaves as without CUDA */
    }
    const dr_mem_ops_t *mem = mca_coll_dualrail_gpu_mem();
    if (!mem->available()) {
        DUALRAIL_VERBOSE(1,
                         "coll/dualrail: rank %d: no usable gpu (or built without cuda): "
                         "host buffers only",
                         cm->world_rank);
        return;
    }
    /* Direct device transfers through UCX are not implemented: say what UCX could do. */
    DUALRAIL_VERBOSE(1,
                     "coll/dualrail: rank %d: gpu found (%s); device buffers are staged through "
                     "pinned host memory (ucx %s cuda memory on every plane)",
                     cm->world_rank, mem->name,
                     dr_mr_cuda_memory_supported(cm->mr) ? "reports" : "does not report");
}
