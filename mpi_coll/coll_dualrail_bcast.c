/*
 * coll/dualrail MPI_Bcast: checks the call, then runs the plane-striped
 * bcast (dr_coll.h: binomial tree for small messages, scatter + ring
 * allgather for large). What it does not handle goes to the previous module
 * before any data moves: derived or non-contiguous datatypes, an inactive
 * module. A buffer in device memory is staged whole through host memory: the
 * root copies it out before, the others copy the result in after.
 */
#include "coll_dualrail.h"

#include <stdio.h>
#include <stdlib.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

#include "dr_coll.h"
#include "dr_coll_gpu.h"

int mca_coll_dualrail_bcast(void *buff, int count, struct ompi_datatype_t *dtype, int root,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    size_t bytes = 0;

    ++m->calls[DR_KIND_BCAST];
    if (!m->active || count < 0 || !mca_coll_dualrail_dtype_bytes(dtype, (size_t)count, &bytes)) {
        goto fallback;
    }
    const bool device = bytes != 0 && mca_coll_dualrail_on_device(NULL, buff);
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_BCAST, &a, &idle_state);
    a.recvbuf = buff;
    a.bytes = bytes;
    a.root = root;
    a.algorithm = cm->bcast_algorithm;
    a.small_max_bytes = cm->bcast_small_max_bytes;
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: bcast on %s: %d x %s from root %d, algorithm %d",
                     cm->world_rank, comm->c_name, count, dtype->name, root, dr_bcast_choose(&a));
    char err[512];
    dr_status_t st = DR_OK;
    void *host = NULL;
    const dr_coll_args_t user = a;
    if (device && ompi_comm_size(comm) > 1) {
        /* A staging failure here fails this rank before it communicates: the call then
         * runs in fail mode and tells the peers that would wait for it. */
        host = malloc(bytes);
        if (host == NULL) {
            snprintf(err, sizeof(err), "no host memory to stage %zu bytes", bytes);
            st = DR_ERR_NO_MEMORY;
        } else if (ompi_comm_rank(comm) == root) {
            st = mca_coll_dualrail_stage(host, buff, bytes, buff, err, sizeof(err));
        }
        a.recvbuf = host;
    }
    mca_coll_dualrail_fail_mode(&a, &user, st, err);
    st = dr_bcast(cm->mr, &a, err, sizeof(err));
    if (st == DR_OK && host != NULL && ompi_comm_rank(comm) != root) {
        st = mca_coll_dualrail_stage(buff, host, bytes, buff, err, sizeof(err));
    }
    free(host);
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, "MPI_Bcast", st, err);
    }
    return OMPI_SUCCESS;

fallback:
    ++m->fallbacks[DR_KIND_BCAST];
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: bcast on %s (%d x %s) handed to the previous "
                     "module", cm->world_rank, comm->c_name, count, dtype->name);
    return m->previous_bcast(buff, count, dtype, root, comm, m->previous_bcast_module);
}
