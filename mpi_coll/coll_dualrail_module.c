/*
 * coll/dualrail module: which communicators it serves, the job-wide
 * agreement and address exchange, and saving the previous module of each
 * collective it takes.
 */
#include "coll_dualrail.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ompi/group/group.h"
#include "ompi/proc/proc.h"
#include "ompi/runtime/mpiruntime.h"

#include "dualrail/topo.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

static void module_construct(mca_coll_dualrail_module_t *m)
{
    m->comm = NULL;
    m->active = false;
    m->peer_ids = NULL;
    m->comm_id = 0;
    memset(m->seq, 0, sizeof(m->seq));
    memset(m->calls, 0, sizeof(m->calls));
    memset(m->fallbacks, 0, sizeof(m->fallbacks));
    m->staging = NULL;
    m->staging_fallbacks = 0;
    m->ar_op = NULL;
    m->ar_dtype = m->ar_holes = NULL;
    m->ar_elem = 0;
    m->ar_own = 0;
    m->previous_allreduce = NULL;
    m->previous_allreduce_module = NULL;
    m->previous_bcast = NULL;
    m->previous_bcast_module = NULL;
    m->previous_barrier = NULL;
    m->previous_barrier_module = NULL;
    m->previous_allgather = NULL;
    m->previous_allgather_module = NULL;
    m->previous_alltoall = NULL;
    m->previous_alltoall_module = NULL;
    m->previous_alltoallv = NULL;
    m->previous_alltoallv_module = NULL;
    m->alltoallv_layout = NULL;
    m->previous_reduce = NULL;
    m->previous_reduce_module = NULL;
    m->previous_reduce_scatter_block = NULL;
    m->previous_reduce_scatter_block_module = NULL;
    m->previous_reduce_scatter = NULL;
    m->previous_reduce_scatter_module = NULL;
    m->previous_allgatherv = NULL;
    m->previous_allgatherv_module = NULL;
    m->previous_gather = NULL;
    m->previous_gather_module = NULL;
    m->previous_gatherv = NULL;
    m->previous_gatherv_module = NULL;
    m->previous_scatter = NULL;
    m->previous_scatter_module = NULL;
    m->previous_scatterv = NULL;
    m->previous_scatterv_module = NULL;
    mca_coll_dualrail_nb_module_init(m);
}

static const char *const kind_names[DR_KIND_COUNT] = {
    "allreduce", "bcast",    "barrier", "allgather", "reduce",   "reduce_scatter_block",
    "reduce_scatter", "allgatherv", "gather", "gatherv", "scatter", "scatterv", "alltoall",
    "alltoallv"};

const char *mca_coll_dualrail_kind_name(int kind)
{
    return kind >= 0 && kind < DR_KIND_COUNT ? kind_names[kind] : "?";
}

/*
 * What failed collectives left behind on this communicator, dropped before Open MPI gives its
 * id to the next one (the lowest free id: with every sequence number back at 0, that
 * communicator's first calls have the failed calls' keys and would take their messages; seen:
 * an MPI_Allgather on a new duplicate returned success with a block of a failed allgather on
 * the freed one). A rank whose call failed here often frees the communicator before its
 * peers' data for that call has arrived (it left the call at once, they were still sending):
 * it drives the planes for up to kForgetDrainUs first, so that what is in flight arrives and
 * goes too. A message later than that, or an abort notice reaching a rank that finished the
 * failed call after it freed the communicator, can still meet the next one (README, Known
 * limitations); calls of one communicator are kept apart by the periodic drop of
 * mr_transport.hpp (StaleCalls).
 */
enum { kForgetDrainUs = 50000 };

static void forget_comm(mca_coll_dualrail_module_t *m)
{
    dr_mr_t *mr = mca_coll_dualrail_component.mr;
    if (mca_coll_dualrail_take_failure(m->comm_id)) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        long spent = 0;
        while (spent < kForgetDrainUs) {
            dr_mr_wait_event(mr, (double)(kForgetDrainUs - spent) * 1e-6);
            dr_mr_progress(mr);
            clock_gettime(CLOCK_MONOTONIC, &t);
            spent = (long)(t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000;
        }
    }
    dr_coll_forget_comm(mr, m->comm_id);
}

static void module_destruct(mca_coll_dualrail_module_t *m)
{
    for (int k = 0; k < DR_KIND_COUNT; ++k) {
        if (m->calls[k] != 0) {
            DUALRAIL_VERBOSE(1, "coll/dualrail: rank %d: communicator %s (cid %u): %llu %s "
                             "call(s), %llu handed to the previous module",
                             mca_coll_dualrail_component.world_rank,
                             m->comm ? m->comm->c_name : "?", m->comm_id,
                             (unsigned long long)m->calls[k], kind_names[k],
                             (unsigned long long)m->fallbacks[k]);
        }
        /* the statistics table at finalize sums every communicator's calls per kind */
        mca_coll_dualrail_component.kind_calls[k] += m->calls[k];
        mca_coll_dualrail_component.kind_fallbacks[k] += m->fallbacks[k];
    }
    /* Not once MPI_Finalize has begun: no communicator comes after, and the drain would see
     * the peers that finished first leave (their planes counted as failed over at the end). */
    if (m->active && mca_coll_dualrail_component.mr != NULL &&
        ompi_mpi_state < OMPI_MPI_STATE_FINALIZE_STARTED) {
        forget_comm(m);
    }
    mca_coll_dualrail_gpu_module_fini(m); /* GPU staging of this communicator, if any */
    mca_coll_dualrail_nb_module_fini(m);  /* its non-blocking counters, queue, previous modules */
    free(m->peer_ids);
    free(m->alltoallv_layout);
    mca_coll_base_module_t *prev[] = {m->previous_allreduce_module, m->previous_bcast_module,
                                      m->previous_barrier_module, m->previous_allgather_module,
                                      m->previous_alltoall_module, m->previous_alltoallv_module,
                                      m->previous_reduce_module,
                                      m->previous_reduce_scatter_block_module,
                                      m->previous_reduce_scatter_module,
                                      m->previous_allgatherv_module, m->previous_gather_module,
                                      m->previous_gatherv_module, m->previous_scatter_module,
                                      m->previous_scatterv_module};
    for (size_t i = 0; i < sizeof(prev) / sizeof(prev[0]); ++i) {
        if (prev[i] != NULL) {
            OBJ_RELEASE(prev[i]);
        }
    }
    module_construct(m);
}

OBJ_CLASS_INSTANCE(mca_coll_dualrail_module_t, mca_coll_base_module_t, module_construct,
                   module_destruct);

int mca_coll_dualrail_progress(void)
{
    if (mca_coll_dualrail_component.mr == NULL) {
        return 0;
    }
    const int events = dr_mr_progress(mca_coll_dualrail_component.mr);
    return events + mca_coll_dualrail_nb_progress(events);
}

int mca_coll_dualrail_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    /* MPI_THREAD_MULTIPLE: threads run collectives on different communicators at once.
     * The ucx_mr context is then created thread safe (one short-held lock per call, never
     * across a wait); decided here, once, so a single-threaded job takes no lock at all. */
    mca_coll_dualrail_component.thread_multiple = enable_mpi_threads;
    return OMPI_SUCCESS;
}

static void mr_log(int level, const char *msg, void *arg)
{
    (void)arg;
    /* Plane transitions (level 0) are printed at default verbosity, one line each. */
    if (level <= mca_coll_dualrail_component.verbose) {
        mca_coll_dualrail_say("coll/dualrail %s", msg); /* may run on the progress thread */
    }
}

/*
 * The interfaces Open MPI's own runtime and point-to-point traffic are told to use
 * (oob_tcp_if_include, btl_tcp_if_include): the management network, never a plane. An MPI
 * process of Open MPI 4.1 does not register the oob variable (its launcher does) but finds
 * it in its environment; under Open MPI 5 only btl_tcp_if_include reaches the process, so
 * that is what keeps the management network out there. A job that points the
 * point-to-point traffic at the plane interfaces must name its planes
 * (coll_dualrail_planes): discovery would leave those interfaces out. The values go to
 * discovery as they are: names, patterns and IPv4 networks (a.b.c.d/len, which Open MPI takes
 * too) are all understood there.
 */
static void runtime_interfaces(char *buf, size_t len)
{
    /* The MCA variables behind DR_TOPO_RUNTIME_IF_ENVS, in its order. */
    static const char *const vars[][3] = {{"orte", "oob", "tcp"}, {"opal", "btl", "tcp"}};
    static const char *const envs[] = DR_TOPO_RUNTIME_IF_ENVS;
    _Static_assert(sizeof(envs) / sizeof(envs[0]) == sizeof(vars) / sizeof(vars[0]),
                   "one MCA variable per environment variable");
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); ++i) {
        int idx = mca_base_var_find(vars[i][0], vars[i][1], vars[i][2], "if_include");
        const char **v = NULL;
        const char *value = getenv(envs[i]);
        if (idx >= 0 && mca_base_var_get_value(idx, &v, NULL, NULL) == OPAL_SUCCESS && v != NULL &&
            *v != NULL && **v != '\0') {
            value = *v;
        }
        if (value != NULL && *value != '\0') {
            size_t n = strlen(buf);
            snprintf(buf + n, len - n, "%s%s", n ? "," : "", value);
        }
    }
}

/*
 * No plane list given: group this node's devices into planes (ucx_mr/topo).
 * Interfaces the MPI runtime is pinned to, and coll_dualrail_planes_exclude,
 * never become planes. The signature goes through the job-wide agreement.
 */
static int discover_planes(char *planes, size_t len, char *sig, size_t siglen)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    char exclude[512], runtime[256];
    runtime_interfaces(runtime, sizeof(runtime));
    snprintf(exclude, sizeof(exclude), "%s%s%s", cm->planes_exclude ? cm->planes_exclude : "",
             cm->planes_exclude && *cm->planes_exclude && *runtime ? "," : "", runtime);
    char err[512] = "";
    const dr_topo_t *t = dr_topo_system(err, sizeof(err)); /* NULL: interfaces only */
    dr_topo_ifaddr_t ifs[64];
    int nifs = 0;
    if (dr_topo_ifaddrs_system(ifs, 64, &nifs) != DR_OK) {
        nifs = 0;
    }
    dr_topo_discover_opts_t opts = {NULL, exclude};
    dr_topo_discovery_t d;
    if (dr_topo_discover(t, ifs, nifs, &opts, &d, err, sizeof(err)) != DR_OK) {
        snprintf(cm->reason, sizeof(cm->reason), "plane discovery: %s", err);
        return -1;
    }
    dr_topo_planes_format(&d.list, planes, len);
    dr_topo_discovery_signature(&d, sig, siglen);
    DUALRAIL_VERBOSE(1, "coll/dualrail: rank %d: discovered planes %s (%s)%s%s",
                     ompi_comm_rank(&ompi_mpi_comm_world.comm), planes, sig,
                     d.note[0] ? "; " : "", d.note);
    return 0;
}

/* Create this process's ucx_mr context; on failure remember why (reported at agreement). */
static void mr_init(void)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    static char name[64];
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cm->world_rank = ompi_comm_rank(&ompi_mpi_comm_world.comm);
    cm->world_size = ompi_comm_size(&ompi_mpi_comm_world.comm);
    snprintf(name, sizeof(name), "rank %d", cm->world_rank);
    static char discovered[1024];
    cm->signature[0] = '\0';
    if (cm->planes == NULL || cm->planes[0] == '\0') {
        if (discover_planes(discovered, sizeof(discovered), cm->signature,
                            sizeof(cm->signature)) != 0) {
            cm->mr = NULL;
            return;
        }
        cfg.planes = discovered;
    } else {
        cfg.planes = cm->planes;
    }
    cfg.transports = cm->transports;
    cfg.weights = cm->weights;
    snprintf(cm->weights_used, sizeof(cm->weights_used), "%s",
             cm->weights && *cm->weights ? cm->weights : "adaptive");
    cfg.segment_size = cm->wire_segment_size;
    cfg.window = cm->window;
    cfg.stall_timeout = cm->stall_timeout;
    cfg.probe_interval = cm->probe_interval;
    cfg.peer_timeout = cm->peer_timeout;
    cfg.verbose = cm->verbose > 1 ? cm->verbose - 1 : 0;
    cfg.name = name;
    cfg.log = mr_log;
    cfg.thread_safe = cm->thread_multiple || cm->progress_thread;
    cfg.wakeup = cm->wakeup;
    cfg.direct_lane = cm->direct_lane;
    dr_coll_set_keep_scratch(cm->keep_scratch);
    char err[sizeof(cm->reason)];
    dr_status_t st = dr_mr_create(&cfg, (uint32_t)cm->world_rank, &cm->mr, err, sizeof(err));
    if (st != DR_OK) {
        snprintf(cm->reason, sizeof(cm->reason), "%s", err);
        cm->mr = NULL;
        return;
    }
    /* The MPI_T variables from now on, once their counts are known (coll_dualrail_stats.c). */
    mca_coll_dualrail_stats_register();
    DUALRAIL_VERBOSE(1, "coll/dualrail: rank %d: %d plane(s) on devices %s%s", cm->world_rank,
                     dr_mr_num_planes(cm->mr), cfg.planes,
                     cm->thread_multiple   ? ", thread safe (MPI_THREAD_MULTIPLE)"
                     : cm->progress_thread ? ", thread safe (progress thread)"
                                           : "");
}

/*
 * The job-wide decision, taken identically on every rank of MPI_COMM_WORLD from
 * allgathered facts: each rank's plane count (or -1 when it has no context) and
 * address length; then the addresses themselves.
 */
static void world_agree(ompi_communicator_t *comm, mca_coll_base_module_t *module_unused)
{
    (void)module_unused;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    const int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    int mine[2] = {-1, 0};
    const void *addr = NULL;
    size_t addr_len = 0;
    if (cm->mr != NULL) {
        dr_mr_address(cm->mr, &addr, &addr_len);
        mine[0] = dr_mr_num_planes(cm->mr);
        mine[1] = (int)addr_len;
    }
    int *all = malloc(sizeof(int) * 2 * (size_t)size);
    if (all == NULL) {
        cm->state = MCA_COLL_DUALRAIL_STATE_OFF;
        return;
    }
    int rc = comm->c_coll->coll_allgather(mine, 2, MPI_INT, all, 2, MPI_INT, comm,
                                          comm->c_coll->coll_allgather_module);
    int max_len = 0, bad = -1;
    for (int r = 0; rc == OMPI_SUCCESS && r < size; ++r) {
        if (bad < 0 && (all[2 * r] < 0 || all[2 * r] != all[0])) {
            bad = r;
        }
        max_len = all[2 * r + 1] > max_len ? all[2 * r + 1] : max_len;
    }
    if (rc != OMPI_SUCCESS || bad >= 0) {
        cm->state = MCA_COLL_DUALRAIL_STATE_OFF;
        if (rc != OMPI_SUCCESS) {
            opal_output(cm->output, "coll/dualrail: disabled: address exchange failed (%d)", rc);
        } else if (rank == 0 || rank == bad) {
            /* One clear line, from rank 0 and from the rank at fault. */
            if (all[2 * bad] < 0) {
                opal_output(cm->output, "coll/dualrail: disabled on every rank: rank %d could "
                            "not set up its planes%s%s", bad, rank == bad ? ": " : "",
                            rank == bad ? cm->reason : "");
            } else {
                opal_output(cm->output, "coll/dualrail: disabled on every rank: rank %d has %d "
                            "plane(s), rank 0 has %d; every process must use the same planes",
                            bad, all[2 * bad], all[0]);
            }
        }
        free(all);
        return;
    }
    /* Discovered planes must be the same networks on every node, in the same order. */
    char *sigs = calloc((size_t)size, sizeof(cm->signature));
    if (sigs == NULL) {
        free(all);
        cm->state = MCA_COLL_DUALRAIL_STATE_OFF;
        return;
    }
    rc = comm->c_coll->coll_allgather(cm->signature, (int)sizeof(cm->signature), MPI_CHAR, sigs,
                                      (int)sizeof(cm->signature), MPI_CHAR, comm,
                                      comm->c_coll->coll_allgather_module);
    int any_sig = 0;
    for (int r = 0; rc == OMPI_SUCCESS && r < size; ++r) {
        any_sig |= sigs[(size_t)r * sizeof(cm->signature)] != '\0';
    }
    /* Decided from allgathered data only, so every rank takes the same branch. */
    if (rc == OMPI_SUCCESS && any_sig) {
        const char **sv = malloc(sizeof(char *) * (size_t)size);
        char err[1024];
        if (sv != NULL) {
            for (int r = 0; r < size; ++r) {
                sv[r] = sigs + (size_t)r * sizeof(cm->signature);
            }
            if (dr_topo_signatures_check(sv, NULL, size, err, sizeof(err)) != DR_OK) {
                if (rank == 0) {
                    opal_output(cm->output, "coll/dualrail: disabled on every rank: the nodes "
                                "discovered different planes (ranks as nodes): %s", err);
                }
                rc = OMPI_ERROR;
            }
            free(sv);
        }
    }
    free(sigs);
    if (rc != OMPI_SUCCESS) {
        cm->state = MCA_COLL_DUALRAIL_STATE_OFF;
        free(all);
        return;
    }
    char *blobs = calloc((size_t)size, (size_t)max_len);
    char *out = calloc(1, (size_t)max_len);
    if (blobs == NULL || out == NULL) {
        free(blobs);
        free(out);
        free(all);
        cm->state = MCA_COLL_DUALRAIL_STATE_OFF;
        return;
    }
    memcpy(out, addr, addr_len);
    rc = comm->c_coll->coll_allgather(out, max_len, MPI_BYTE, blobs, max_len, MPI_BYTE, comm,
                                      comm->c_coll->coll_allgather_module);
    int ok = rc == OMPI_SUCCESS;
    for (int r = 0; ok && r < size; ++r) {
        if (r == rank) {
            continue;
        }
        char err[256];
        if (dr_mr_add_peer(cm->mr, (uint32_t)r, blobs + (size_t)r * (size_t)max_len,
                           (size_t)all[2 * r + 1], err, sizeof(err)) != DR_OK) {
            opal_output(cm->output, "coll/dualrail: rank %d: %s", rank, err);
            ok = 0;
        }
    }
    /* Everyone must have accepted everyone before anyone relies on it. */
    int all_ok = 0;
    if (rc == OMPI_SUCCESS) {
        rc = comm->c_coll->coll_allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm,
                                          comm->c_coll->coll_allreduce_module);
    }
    cm->state = (rc == OMPI_SUCCESS && all_ok) ? MCA_COLL_DUALRAIL_STATE_ON
                                               : MCA_COLL_DUALRAIL_STATE_OFF;
    if (cm->state == MCA_COLL_DUALRAIL_STATE_ON) {
        /* A send completes when the peer acknowledges it, and the peer may be waiting for
         * that inside another MPI call: keep the planes progressing from opal_progress. */
        opal_progress_register(mca_coll_dualrail_progress);
        if (cm->progress_thread) {
            mca_coll_dualrail_nb_thread_start();
        }
        DUALRAIL_VERBOSE(1, "coll/dualrail: rank %d: enabled, %d ranks, %d plane(s)", rank, size,
                         all[0]);
        mca_coll_dualrail_gpu_report();
    }
    free(blobs);
    free(out);
    free(all);
}

static int module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_dualrail_module_t *m = (mca_coll_dualrail_module_t *)module;
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;

    /* The previous module of each collective this module took (comm_query), retained:
     * every fallback goes there. */
#define DUALRAIL_SAVE(coll)                                                                        \
    do {                                                                                           \
        if (m->super.coll_##coll != NULL) {                                                        \
            m->previous_##coll = comm->c_coll->coll_##coll;                                        \
            m->previous_##coll##_module = comm->c_coll->coll_##coll##_module;                      \
            if (m->previous_##coll == NULL || m->previous_##coll##_module == NULL) {               \
                opal_output(cm->output, "coll/dualrail: no previous " #coll " on %s",              \
                            comm->c_name);                                                         \
                return OMPI_ERROR;                                                                 \
            }                                                                                      \
            OBJ_RETAIN(m->previous_##coll##_module);                                               \
        }                                                                                          \
    } while (0)
    DUALRAIL_SAVE(allreduce);
    DUALRAIL_SAVE(bcast);
    DUALRAIL_SAVE(barrier);
    DUALRAIL_SAVE(allgather);
    DUALRAIL_SAVE(alltoall);
    DUALRAIL_SAVE(alltoallv);
    DUALRAIL_SAVE(reduce);
    DUALRAIL_SAVE(reduce_scatter_block);
    DUALRAIL_SAVE(reduce_scatter);
    DUALRAIL_SAVE(allgatherv);
    DUALRAIL_SAVE(gather);
    DUALRAIL_SAVE(gatherv);
    DUALRAIL_SAVE(scatter);
    DUALRAIL_SAVE(scatterv);
#undef DUALRAIL_SAVE
    if (mca_coll_dualrail_nb_enable(m, comm) != OMPI_SUCCESS) {
        return OMPI_ERROR;
    }

    if (comm == &ompi_mpi_comm_world.comm && cm->state == MCA_COLL_DUALRAIL_STATE_UNKNOWN) {
        world_agree(comm, module);
    }
    m->active = cm->state == MCA_COLL_DUALRAIL_STATE_ON;
    DUALRAIL_VERBOSE(1, "coll/dualrail: rank %d: communicator %s (cid %u, %d ranks): "
                        "%s%s%s%s%s%s%s%s%s%s%s%s%s%s",
                     cm->world_rank, comm->c_name, m->comm_id, ompi_comm_size(comm),
                     m->active ? "allreduce runs on dualrail" : "pass-through",
                     m->active && m->super.coll_bcast ? ", bcast" : "",
                     m->active && m->super.coll_barrier ? ", barrier" : "",
                     m->active && m->super.coll_allgather ? ", allgather" : "",
                     m->active && m->super.coll_alltoall ? ", alltoall" : "",
                     m->active && m->super.coll_alltoallv ? ", alltoallv" : "",
                     m->active && m->super.coll_reduce ? ", reduce" : "",
                     m->active && m->super.coll_reduce_scatter_block ? ", reduce_scatter_block"
                                                                     : "",
                     m->active && m->super.coll_reduce_scatter ? ", reduce_scatter" : "",
                     m->active && m->super.coll_allgatherv ? ", allgatherv" : "",
                     m->active && m->super.coll_gather ? ", gather" : "",
                     m->active && m->super.coll_gatherv ? ", gatherv" : "",
                     m->active && m->super.coll_scatter ? ", scatter" : "",
                     m->active && m->super.coll_scatterv ? ", scatterv" : "");
    return OMPI_SUCCESS;
}

mca_coll_base_module_t *mca_coll_dualrail_comm_query(struct ompi_communicator_t *comm,
                                                     int *priority)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    *priority = 0;
    if (cm->priority <= 0) {
        return NULL; /* installed but not asked for: change nothing */
    }
    if (OMPI_COMM_IS_INTER(comm)) {
        DUALRAIL_DECLINE(comm, "coll/dualrail: declining %s (cid %u): intercommunicator (the "
                         "previous component serves it)",
                         comm->c_name[0] ? comm->c_name : "a communicator",
                         mca_coll_dualrail_comm_log_id(comm));
        return NULL;
    }
    const bool world = comm == &ompi_mpi_comm_world.comm;
    /*
     * Single-process communicators other than a one-process MPI_COMM_WORLD are taken too
     * once the job runs dualrail: coll/self copies a device buffer with memcpy (Debian's
     * Open MPI has no CUDA support) and crashes. Host buffers are copied as coll/self
     * would. Not only where a GPU is usable: asking CUDA here would initialise it inside
     * MPI_Init (MPI_COMM_SELF), before an application sets CUDA_VISIBLE_DEVICES.
     */
    if (ompi_comm_size(comm) < 2 && (world || cm->state != MCA_COLL_DUALRAIL_STATE_ON)) {
        if (world) {
            DUALRAIL_DECLINE(comm, "coll/dualrail: not used: a one-process job (nothing to "
                             "stripe; coll/self serves it)");
        } else {
            /* The job is off: its world agreement said why already. */
            DUALRAIL_VERBOSE(2, "coll/dualrail: declining %s: a single process (coll/self's)",
                             comm->c_name);
        }
        return NULL;
    }
    if (world) {
        if (cm->state == MCA_COLL_DUALRAIL_STATE_UNKNOWN && cm->mr == NULL) {
            mr_init();
        }
        /* Offered on every rank even if this one failed: the agreement in enable decides. */
    } else if (cm->state != MCA_COLL_DUALRAIL_STATE_ON) {
        DUALRAIL_VERBOSE(1, "coll/dualrail: declining %s: the job did not enable dualrail",
                         comm->c_name);
        return NULL;
    }
    uint32_t cid = 0;
    if (!mca_coll_dualrail_comm_cid(comm, &cid)) {
        /* Open MPI 5 did not agree the id across members: keys could not match. */
        DUALRAIL_VERBOSE(1, "coll/dualrail: declining %s: its id is local to each process",
                         comm->c_name);
        return NULL;
    }
    if (cid > 0xffff) {
        /* Keys carry 16 bits of communicator id. Every rank sees the same cid. */
        DUALRAIL_DECLINE(comm, "coll/dualrail: declining %s: cid %u above 65535 (message keys "
                         "carry 16 bits)", comm->c_name, cid);
        return NULL;
    }
    const int size = ompi_comm_size(comm);
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)size);
    if (ids == NULL) {
        opal_output(cm->output, "coll/dualrail: rank %d: declining %s: out of memory",
                    cm->world_rank, comm->c_name);
        return NULL;
    }
    for (int r = 0; r < size; ++r) {
        opal_process_name_t name = ompi_group_get_proc_name(comm->c_remote_group, r);
        if (name.jobid != OMPI_PROC_MY_NAME->jobid) {
            /* Every member sees a foreign process too, so all decline alike. */
            DUALRAIL_DECLINE(comm, "coll/dualrail: declining %s: rank %d belongs to another "
                             "job", comm->c_name, r);
            free(ids);
            return NULL;
        }
        ids[r] = name.vpid;
    }
    mca_coll_dualrail_module_t *m = OBJ_NEW(mca_coll_dualrail_module_t);
    if (m == NULL) {
        free(ids);
        return NULL;
    }
    m->comm = comm;
    m->peer_ids = ids;
    m->comm_id = cid;
    m->super.coll_module_enable = module_enable;
    m->super.coll_allreduce = mca_coll_dualrail_allreduce;
    /* A collective switched off is not taken at all: the previous module serves it. */
    m->super.coll_bcast = cm->bcast_enable ? mca_coll_dualrail_bcast : NULL;
    m->super.coll_barrier = cm->barrier_enable ? mca_coll_dualrail_barrier : NULL;
    m->super.coll_allgather = cm->allgather_enable ? mca_coll_dualrail_allgather : NULL;
    m->super.coll_alltoall = cm->alltoall_enable ? mca_coll_dualrail_alltoall : NULL;
    m->super.coll_alltoallv = cm->alltoallv_enable ? mca_coll_dualrail_alltoallv : NULL;
    m->super.coll_reduce = cm->reduce_enable ? mca_coll_dualrail_reduce_intra : NULL;
    m->super.coll_reduce_scatter_block =
        cm->reduce_scatter_block_enable ? mca_coll_dualrail_reduce_scatter_block : NULL;
    m->super.coll_reduce_scatter =
        cm->reduce_scatter_enable ? mca_coll_dualrail_reduce_scatter : NULL;
    m->super.coll_allgatherv = cm->allgatherv_enable ? mca_coll_dualrail_allgatherv : NULL;
    m->super.coll_gather = cm->gather_enable ? mca_coll_dualrail_gather : NULL;
    m->super.coll_gatherv = cm->gatherv_enable ? mca_coll_dualrail_gatherv : NULL;
    m->super.coll_scatter = cm->scatter_enable ? mca_coll_dualrail_scatter : NULL;
    m->super.coll_scatterv = cm->scatterv_enable ? mca_coll_dualrail_scatterv : NULL;
    mca_coll_dualrail_nb_query(m);
    *priority = cm->priority;
    return &m->super;
}
