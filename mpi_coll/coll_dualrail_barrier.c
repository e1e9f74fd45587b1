/*
 * coll/dualrail MPI_Barrier: a dissemination barrier over the planes
 * (dr_coll.h). An inactive module hands it to the previous module.
 */
#include "coll_dualrail.h"

#include "opal/util/output.h"

#include "dr_coll.h"

int mca_coll_dualrail_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;

    ++m->calls[DR_KIND_BARRIER];
    if (!m->active) {
        goto fallback;
    }
    dr_coll_args_t a;
    mca_coll_dualrail_idle_t idle_state;
    mca_coll_dualrail_args_init(m, comm, DR_KIND_BARRIER, &a, &idle_state);
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: barrier on %s, dissemination", cm->world_rank,
                     comm->c_name);
    char err[512];
    const dr_status_t st = dr_barrier(cm->mr, &a, err, sizeof(err));
    if (st != DR_OK) {
        return mca_coll_dualrail_failed(comm, "MPI_Barrier", st, err);
    }
    return OMPI_SUCCESS;

fallback:
    ++m->fallbacks[DR_KIND_BARRIER];
    DUALRAIL_VERBOSE(2, "coll/dualrail: rank %d: barrier on %s handed to the previous module",
                     cm->world_rank, comm->c_name);
    return m->previous_barrier(comm, m->previous_barrier_module);
}
