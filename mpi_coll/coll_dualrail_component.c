/*
 * coll/dualrail component: MCA variables, open and close.
 * Every variable is registered with its default set on the line before.
 */
#include "coll_dualrail.h"

#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

#include "dr_coll.h"

const char *mca_coll_dualrail_component_version_string =
    "Open MPI dualrail collective MCA component version 0.1.0";

static int dualrail_register(void);
static int dualrail_open(void);
static int dualrail_close(void);

mca_coll_dualrail_component_t mca_coll_dualrail_component = {
    .super = {
        .collm_version = {
            DUALRAIL_COLL_BASE_VERSION,
            .mca_component_name = "dualrail",
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_open_component = dualrail_open,
            .mca_close_component = dualrail_close,
            .mca_register_component_params = dualrail_register,
        },
        .collm_data = {
            MCA_BASE_METADATA_PARAM_CHECKPOINT
        },
        .collm_init_query = mca_coll_dualrail_init_query,
        .collm_comm_query = mca_coll_dualrail_comm_query,
    },
};

static const mca_base_var_enum_value_t algorithm_values[] = {
    {DR_ALGO_AUTO, "auto"},
    {DR_ALGO_RING, "ring"},
    {DR_ALGO_RD, "recursive_doubling"},
    {0, NULL},
};

static const mca_base_var_enum_value_t bcast_values[] = {
    {DR_BCAST_AUTO, "auto"},
    {DR_BCAST_BINOMIAL, "binomial"},
    {DR_BCAST_SCATTER_ALLGATHER, "scatter_allgather"},
    {0, NULL},
};

static const mca_base_var_enum_value_t allgather_values[] = {
    {DR_ALLGATHER_AUTO, "auto"},
    {DR_ALLGATHER_RING, "ring"},
    {DR_ALLGATHER_RD, "recursive_doubling"},
    {DR_ALLGATHER_BRUCK, "bruck"},
    {0, NULL},
};

static int reg(const char *name, const char *help, mca_base_var_type_t type,
               mca_base_var_enum_t *enumerator, int level, void *storage)
{
    return mca_base_component_var_register(&mca_coll_dualrail_component.super.collm_version, name,
                                           help, type, enumerator, 0, 0, level,
                                           MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int dualrail_register(void)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    dr_mr_config_t d;
    dr_mr_config_default(&d);

    cm->priority = 0;
    reg("priority", "Priority of coll/dualrail; 0 (the default) leaves it unused, "
        "100 selects it for the collectives it implements",
        MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_2, &cm->priority);
    cm->verbose = 0;
    reg("verbose", "0: one line per plane failure or re-admission; 1: selection and "
        "set-up decisions; 2: every call", MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_2,
        &cm->verbose);
    cm->stats = 0;
    reg("stats", "Print each rank's per-plane counters (bytes, stripes, failovers, re-routes, "
        "re-admissions, detection latency) at MPI_Finalize; they are also MPI_T performance "
        "variables (coll_dualrail_plane_*)", MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_2,
        &cm->stats);
    cm->planes = "";
    reg("planes", "Network planes: planes separated by ',', the devices of one plane by '|' "
        "(e.g. \"mlx5_0|mlx5_2,mlx5_1|mlx5_3\" or \"ethA,ethB\"); every process must list the "
        "same number. Empty (the default): discovered, grouping devices by the network they "
        "attach to (IP subnet, InfiniBand subnet prefix); every node must find the same planes",
        MCA_BASE_VAR_TYPE_STRING, NULL, OPAL_INFO_LVL_2, &cm->planes);
    cm->planes_exclude = "";
    reg("planes_exclude", "With discovery: interfaces or devices (comma-separated shell patterns) "
        "that are never planes, in addition to loopback, bridges, containers and the interfaces "
        "in oob_tcp_if_include and btl_tcp_if_include", MCA_BASE_VAR_TYPE_STRING, NULL,
        OPAL_INFO_LVL_4, &cm->planes_exclude);
    cm->transports = "^sm,self,cma";
    reg("transports", "UCX_TLS for every plane's UCX context (network transports only)",
        MCA_BASE_VAR_TYPE_STRING, NULL, OPAL_INFO_LVL_5, &cm->transports);

    cm->weights = "adaptive";
    reg("weights", "How each message is split over the planes toward a peer: adaptive (per "
        "peer and plane, in proportion to what each plane delivers, learned continuously; a "
        "far slower plane keeps a trickle), equal, or fixed ratios, one positive integer per "
        "plane (\"2:1\"). A bad value disables coll/dualrail on every rank with the reason",
        MCA_BASE_VAR_TYPE_STRING, NULL, OPAL_INFO_LVL_4, &cm->weights);

    mca_base_var_enum_t *algorithms = NULL;
    mca_base_var_enum_create("coll_dualrail_allreduce_algorithms", algorithm_values, &algorithms);
    cm->allreduce_algorithm = DR_ALGO_AUTO;
    reg("allreduce_algorithm", "Allreduce algorithm: auto (recursive doubling up to "
        "allreduce_rd_max_bytes, ring above), ring, recursive_doubling",
        MCA_BASE_VAR_TYPE_INT, algorithms, OPAL_INFO_LVL_5, &cm->allreduce_algorithm);
    OBJ_RELEASE(algorithms);
    cm->rd_max_bytes = 64 * 1024;
    reg("allreduce_rd_max_bytes", "With allreduce_algorithm auto: messages up to this many "
        "bytes use recursive doubling, larger ones the ring", MCA_BASE_VAR_TYPE_SIZE_T, NULL,
        OPAL_INFO_LVL_5, &cm->rd_max_bytes);
    cm->bcast_enable = 1;
    reg("bcast", "Run MPI_Bcast on dualrail (0: leave it to the next component)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->bcast_enable);
    cm->barrier_enable = 1;
    reg("barrier", "Run MPI_Barrier on dualrail (dissemination; 0: leave it to the next "
        "component)", MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->barrier_enable);
    cm->allgather_enable = 1;
    reg("allgather", "Run MPI_Allgather on dualrail (0: leave it to the next component)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->allgather_enable);
    mca_base_var_enum_t *bcasts = NULL;
    mca_base_var_enum_create("coll_dualrail_bcast_algorithms", bcast_values, &bcasts);
    cm->bcast_algorithm = DR_BCAST_AUTO;
    reg("bcast_algorithm", "Bcast algorithm: auto (binomial tree up to bcast_small_max_bytes, "
        "scatter + ring allgather above), binomial, scatter_allgather",
        MCA_BASE_VAR_TYPE_INT, bcasts, OPAL_INFO_LVL_5, &cm->bcast_algorithm);
    OBJ_RELEASE(bcasts);
    cm->bcast_small_max_bytes = DR_COLL_SMALL_MAX_DEFAULT;
    reg("bcast_small_max_bytes", "With bcast_algorithm auto: messages up to this many bytes "
        "use the binomial tree, larger ones scatter + ring allgather",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5, &cm->bcast_small_max_bytes);
    mca_base_var_enum_t *allgathers = NULL;
    mca_base_var_enum_create("coll_dualrail_allgather_algorithms", allgather_values, &allgathers);
    cm->allgather_algorithm = DR_ALLGATHER_AUTO;
    reg("allgather_algorithm", "Allgather algorithm: auto (up to allgather_small_max_bytes in "
        "all: recursive doubling on power-of-two communicators, Bruck on others; ring above), "
        "ring, recursive_doubling (power-of-two sizes only), bruck",
        MCA_BASE_VAR_TYPE_INT, allgathers, OPAL_INFO_LVL_5, &cm->allgather_algorithm);
    OBJ_RELEASE(allgathers);
    cm->allgather_small_max_bytes = DR_COLL_SMALL_MAX_DEFAULT;
    reg("allgather_small_max_bytes", "With allgather_algorithm auto: results (all ranks' "
        "blocks together) up to this many bytes use recursive doubling or Bruck, larger ones "
        "the ring", MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5,
        &cm->allgather_small_max_bytes);
    cm->segment_size = 1024 * 1024;
    reg("segment_size", "Pipeline segment in bytes of the ring allreduce, the ring allgather "
        "and the bcasts: reduction or forwarding of one segment overlaps the transfer of the "
        "next", MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5,
        &cm->segment_size);
    cm->wire_segment_size = d.segment_size;
    reg("wire_segment_size", "Largest piece sent on one plane in one operation (bytes)",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_6, &cm->wire_segment_size);
    cm->window = d.window;
    reg("window", "Pieces in flight per peer and plane", MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL,
        OPAL_INFO_LVL_6, &cm->window);
    cm->stall_timeout = d.stall_timeout;
    reg("stall_timeout", "Seconds a plane may stay silent while another plane to the same peer "
        "answers before it is declared down", MCA_BASE_VAR_TYPE_DOUBLE, NULL, OPAL_INFO_LVL_4,
        &cm->stall_timeout);
    cm->probe_interval = d.probe_interval;
    reg("probe_interval", "Seconds of silence after which a busy plane is pinged (must be below "
        "stall_timeout)", MCA_BASE_VAR_TYPE_DOUBLE, NULL, OPAL_INFO_LVL_6, &cm->probe_interval);
    cm->peer_timeout = d.peer_timeout;
    reg("peer_timeout", "Seconds a peer may stay silent on every plane before the collective "
        "fails with an error (0: never)", MCA_BASE_VAR_TYPE_DOUBLE, NULL, OPAL_INFO_LVL_4,
        &cm->peer_timeout);
    cm->spin_time = 0.0005;
    reg("spin_time", "Seconds a waiting rank polls (yielding the core) before it sleeps on the "
        "planes' event descriptors until data arrives", MCA_BASE_VAR_TYPE_DOUBLE, NULL,
        OPAL_INFO_LVL_6, &cm->spin_time);
    cm->cuda_staging_size = 32 * 1024 * 1024;
    reg("cuda_staging_size", "GPU buffers: pinned host bytes each communicator stages through "
        "(receive and send halves; device scratch of half this size); allocated at the first "
        "call with device buffers, freed with the communicator, grown when one segment pair "
        "does not fit", MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5, &cm->cuda_staging_size);
    cm->gpu_standin = 0;
    reg("gpu_standin", "Testing only: treat the host stand-in's \"device\" memory (a test "
        "program's, see mpi_coll/gpu/dr_gpu.h) as GPU memory instead of CUDA's, so the device "
        "path runs on machines without a GPU", MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_9,
        &cm->gpu_standin);
    mca_coll_dualrail_stats_register();
    cm->op_timeout = -1;
    reg("timeout", "Seconds a collective may go without any of its transfers completing before "
        "it fails with an error (0 or negative: no limit; planes and peers have their own "
        "timeouts)", MCA_BASE_VAR_TYPE_DOUBLE, NULL, OPAL_INFO_LVL_6, &cm->op_timeout);
    return OMPI_SUCCESS;
}

static int dualrail_open(void)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    cm->output = opal_output_open(NULL);
    opal_output_set_verbosity(cm->output, 100);
    cm->state = MCA_COLL_DUALRAIL_STATE_UNKNOWN;
    cm->mr = NULL;
    cm->reason[0] = '\0';
    return OMPI_SUCCESS;
}

static int dualrail_close(void)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    if (cm->state == MCA_COLL_DUALRAIL_STATE_ON) {
        opal_progress_unregister(mca_coll_dualrail_progress);
        if (cm->stats) {
            mca_coll_dualrail_stats_print();
        }
    }
    if (cm->mr != NULL) {
        dr_mr_destroy(cm->mr);
        cm->mr = NULL;
    }
    opal_output_close(cm->output);
    return OMPI_SUCCESS;
}
