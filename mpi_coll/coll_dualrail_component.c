/*
 * coll/dualrail component: MCA variables, open and close.
 * Every variable is registered with its default set on the line before.
 */
#include "coll_dualrail.h"

#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

#include "dr_alltoall.h"
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
    {DR_BCAST_CHAIN, "chain"},
    {0, NULL},
};

static const mca_base_var_enum_value_t allgather_values[] = {
    {DR_ALLGATHER_AUTO, "auto"},
    {DR_ALLGATHER_RING, "ring"},
    {DR_ALLGATHER_RD, "recursive_doubling"},
    {DR_ALLGATHER_BRUCK, "bruck"},
    {0, NULL},
};

static const mca_base_var_enum_value_t alltoall_values[] = {
    {DR_ALLTOALL_AUTO, "auto"},
    {DR_ALLTOALL_PAIRWISE, "pairwise"},
    {DR_ALLTOALL_BRUCK, "bruck"},
    {0, NULL},
};

static const mca_base_var_enum_value_t reduce_values[] = {
    {DR_REDUCE_AUTO, "auto"},
    {DR_REDUCE_BINOMIAL, "binomial"},
    {DR_REDUCE_RABENSEIFNER, "rabenseifner"},
    {DR_REDUCE_CHAIN, "chain"},
    {0, NULL},
};

static const mca_base_var_enum_value_t reduce_scatter_values[] = {
    {DR_REDUCE_SCATTER_AUTO, "auto"},
    {DR_REDUCE_SCATTER_RING, "ring"},
    {DR_REDUCE_SCATTER_HALVING, "recursive_halving"},
    {0, NULL},
};

static const mca_base_var_enum_value_t allgatherv_values[] = {
    {DR_ALLGATHERV_AUTO, "auto"},
    {DR_ALLGATHERV_RING, "ring"},
    {DR_ALLGATHERV_BRUCK, "bruck"},
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
    reg("planes_exclude", "With discovery: interfaces or devices (comma-separated shell patterns, "
        "or IPv4 networks a.b.c.d/len for the interfaces with an address inside) "
        "that are never planes, in addition to loopback, bridges, containers and the interfaces "
        "in oob_tcp_if_include and btl_tcp_if_include (to put Open MPI's point-to-point on the "
        "planes, name them in coll_dualrail_planes)", MCA_BASE_VAR_TYPE_STRING, NULL,
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
    reg("bcast_algorithm", "Bcast algorithm: auto (binomial tree up to bcast_small_max_bytes; "
        "above, a pipelined chain from n segments of the message on, scatter + ring allgather "
        "below that), binomial, scatter_allgather, chain",
        MCA_BASE_VAR_TYPE_INT, bcasts, OPAL_INFO_LVL_5, &cm->bcast_algorithm);
    OBJ_RELEASE(bcasts);
    cm->bcast_small_max_bytes = DR_COLL_SMALL_MAX_DEFAULT;
    reg("bcast_small_max_bytes", "With bcast_algorithm auto: messages up to this many bytes "
        "use the binomial tree, larger ones the chain or scatter + ring allgather",
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
    cm->keep_scratch = DR_COLL_KEEP_SCRATCH_DEFAULT;
    reg("keep_scratch",
        "Scratch memory in bytes each thread keeps between blocking "
        "collectives, in each of its three buffers (the allreduce's, the alltoall(v)'s, the "
        "other kinds': the reduce-scatters' partial results, the rings' receive slots); a call "
        "that needs more gives its scratch back when it returns. Memory mapped afresh costs a "
        "page fault per 4 KiB at its first write, in the call's critical path",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5, &cm->keep_scratch);
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
    cm->host_only = -1;
    cm->gpu_standin = 0;
    reg("gpu_standin", "Testing only: treat the host stand-in's \"device\" memory (a test "
        "program's, see mpi_coll/gpu/dr_gpu.h) as GPU memory instead of CUDA's, so the device "
        "path runs on machines without a GPU", MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_9,
        &cm->gpu_standin);
    cm->reduce_enable = 1;
    reg("reduce", "Run MPI_Reduce on dualrail (0: leave it to the next component)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->reduce_enable);
    cm->reduce_scatter_block_enable = 1;
    reg("reduce_scatter_block", "Run MPI_Reduce_scatter_block on dualrail (0: leave it to the "
        "next component)", MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4,
        &cm->reduce_scatter_block_enable);
    cm->reduce_scatter_enable = 1;
    reg("reduce_scatter", "Run MPI_Reduce_scatter on dualrail (0: leave it to the next "
        "component)", MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->reduce_scatter_enable);
    mca_base_var_enum_t *reduces = NULL;
    mca_base_var_enum_create("coll_dualrail_reduce_algorithms", reduce_values, &reduces);
    cm->reduce_algorithm = DR_REDUCE_AUTO;
    reg("reduce_algorithm", "Reduce algorithm: auto (binomial tree up to reduce_small_max_bytes; "
        "above, a pipelined chain from n segments of the message on, ring reduce-scatter + "
        "gather to the root below that), binomial, rabenseifner (the ring allreduce's bits), "
        "chain",
        MCA_BASE_VAR_TYPE_INT, reduces, OPAL_INFO_LVL_5, &cm->reduce_algorithm);
    OBJ_RELEASE(reduces);
    cm->reduce_small_max_bytes = DR_COLL_SMALL_MAX_DEFAULT;
    reg("reduce_small_max_bytes", "With reduce_algorithm auto: messages up to this many bytes "
        "use the binomial tree, larger ones the chain or Rabenseifner's (also binomial with "
        "fewer elements than ranks)", MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5,
        &cm->reduce_small_max_bytes);
    mca_base_var_enum_t *rsbs = NULL;
    mca_base_var_enum_create("coll_dualrail_reduce_scatter_block_algorithms",
                             reduce_scatter_values, &rsbs);
    cm->reduce_scatter_block_algorithm = DR_REDUCE_SCATTER_AUTO;
    reg("reduce_scatter_block_algorithm", "Reduce_scatter_block algorithm: auto (recursive "
        "halving up to reduce_scatter_block_small_max_bytes of input per rank, pipelined ring "
        "above), ring, recursive_halving (any size: the extra ranks of a non-power-of-two "
        "communicator fold in and out)", MCA_BASE_VAR_TYPE_INT, rsbs, OPAL_INFO_LVL_5,
        &cm->reduce_scatter_block_algorithm);
    OBJ_RELEASE(rsbs);
    cm->reduce_scatter_block_small_max_bytes = DR_COLL_SMALL_MAX_DEFAULT;
    reg("reduce_scatter_block_small_max_bytes", "With reduce_scatter_block_algorithm auto: "
        "inputs (all ranks' blocks, one rank's buffer) up to this many bytes use recursive "
        "halving, larger ones the ring", MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5,
        &cm->reduce_scatter_block_small_max_bytes);
    mca_base_var_enum_t *rss = NULL;
    mca_base_var_enum_create("coll_dualrail_reduce_scatter_algorithms", reduce_scatter_values,
                             &rss);
    cm->reduce_scatter_algorithm = DR_REDUCE_SCATTER_AUTO;
    reg("reduce_scatter_algorithm", "Reduce_scatter algorithm: auto (recursive halving up to "
        "reduce_scatter_small_max_bytes of input per rank, pipelined ring above), ring, "
        "recursive_halving", MCA_BASE_VAR_TYPE_INT, rss, OPAL_INFO_LVL_5,
        &cm->reduce_scatter_algorithm);
    OBJ_RELEASE(rss);
    cm->reduce_scatter_small_max_bytes = DR_COLL_SMALL_MAX_DEFAULT;
    reg("reduce_scatter_small_max_bytes", "With reduce_scatter_algorithm auto: inputs (the sum "
        "of the receive counts) up to this many bytes use recursive halving, larger ones the "
        "ring", MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5,
        &cm->reduce_scatter_small_max_bytes);
    cm->allgatherv_enable = 1;
    reg("allgatherv", "Run MPI_Allgatherv on dualrail (0: leave it to the next component)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->allgatherv_enable);
    mca_base_var_enum_t *agvs = NULL;
    mca_base_var_enum_create("coll_dualrail_allgatherv_algorithms", allgatherv_values, &agvs);
    cm->allgatherv_algorithm = DR_ALLGATHERV_AUTO;
    reg("allgatherv_algorithm", "Allgatherv algorithm: auto (Bruck up to "
        "allgatherv_small_max_bytes in all, pipelined ring above), ring, bruck",
        MCA_BASE_VAR_TYPE_INT, agvs, OPAL_INFO_LVL_5, &cm->allgatherv_algorithm);
    OBJ_RELEASE(agvs);
    cm->allgatherv_small_max_bytes = DR_COLL_SMALL_MAX_DEFAULT;
    reg("allgatherv_small_max_bytes", "With allgatherv_algorithm auto: results (the sum of the "
        "receive counts) up to this many bytes use Bruck, larger ones the ring",
        MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5, &cm->allgatherv_small_max_bytes);
    cm->gather_enable = 1;
    reg("gather", "Run MPI_Gather on dualrail (binomial tree; 0: leave it to the next "
        "component)", MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->gather_enable);
    cm->scatter_enable = 1;
    reg("scatter", "Run MPI_Scatter on dualrail (binomial tree; 0: leave it to the next "
        "component)", MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->scatter_enable);
    cm->gatherv_enable = 1;
    reg("gatherv", "Run MPI_Gatherv on dualrail (linear, at most 8 transfers in flight at the "
        "root; 0: leave it to the next component)", MCA_BASE_VAR_TYPE_BOOL, NULL,
        OPAL_INFO_LVL_4, &cm->gatherv_enable);
    cm->scatterv_enable = 1;
    reg("scatterv",
        "Run MPI_Scatterv on dualrail (linear, at most 8 transfers in flight at the "
        "root; 0: leave it to the next component)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->scatterv_enable);
    cm->nb_enable = 1;
    reg("nonblocking", "Run MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather and MPI_Ibarrier on "
        "dualrail (each only where its blocking form runs here too; advanced from "
        "opal_progress: any MPI call progresses them); 0: leave them to the next component",
        MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->nb_enable);
    cm->progress_thread = 0;
    reg("progress_thread",
        "A progress thread per process advances the non-blocking collectives "
        "while the application computes without calling MPI (it naps while nothing moves, or "
        "sleeps on the planes' event descriptors with coll_dualrail_wakeup, and idles when none "
        "is outstanding; the transport then takes a lock per "
        "call, as under MPI_THREAD_MULTIPLE; below MPI_THREAD_MULTIPLE the application's next "
        "MPI call completes the requests it finished). 0 (default): they advance inside MPI "
        "calls only",
        MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->progress_thread);
    cm->wakeup = 0;
    reg("wakeup",
        "A wait longer than spin_time sleeps on the planes' event descriptors, waking "
        "when data arrives (UCX's wake-up feature, which costs every small message about 10 % "
        "on TCP with UCX 1.13). 0 (default): it naps 50 us at a time instead",
        MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_6, &cm->wakeup);
    cm->direct_lane = -1;
    reg("direct_lane",
        "Whole messages (up to 16 KiB, every one sent unstriped) travel over a TCP connection of the "
        "component's own per (peer, plane), read with one recv per poll, instead of as UCX "
        "messages (README, ucx_mr, The direct lane). 1: on every plane with an IPv4 address; "
        "0: never; -1 (default): on the planes whose device has no RDMA device behind it, "
        "where UCX itself would use TCP",
        MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_6, &cm->direct_lane);
    cm->op_timeout = -1;
    reg("timeout", "Seconds a collective may go without any of its transfers completing before "
        "it fails with an error (0 or negative: no limit; planes and peers have their own "
        "timeouts)", MCA_BASE_VAR_TYPE_DOUBLE, NULL, OPAL_INFO_LVL_6, &cm->op_timeout);
    cm->alltoall_enable = 1;
    reg("alltoall", "Run MPI_Alltoall on dualrail (0: leave it to the next component)",
        MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->alltoall_enable);
    cm->alltoallv_enable = 1;
    reg("alltoallv", "Run MPI_Alltoallv on dualrail (pairwise exchange; 0: leave it to the next "
        "component)", MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, &cm->alltoallv_enable);
    mca_base_var_enum_t *alltoalls = NULL;
    mca_base_var_enum_create("coll_dualrail_alltoall_algorithms", alltoall_values, &alltoalls);
    cm->alltoall_algorithm = DR_ALLTOALL_AUTO;
    reg("alltoall_algorithm", "Alltoall algorithm: auto (Bruck for blocks up to "
        "alltoall_small_max_bytes, pairwise exchange above), pairwise, bruck",
        MCA_BASE_VAR_TYPE_INT, alltoalls, OPAL_INFO_LVL_5, &cm->alltoall_algorithm);
    OBJ_RELEASE(alltoalls);
    cm->alltoall_small_max_bytes = DR_ALLTOALL_SMALL_MAX_DEFAULT;
    reg("alltoall_small_max_bytes", "With alltoall_algorithm auto: blocks (the bytes one rank "
        "sends one other) up to this size use Bruck's log2(n) rounds, larger ones the pairwise "
        "exchange", MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5,
        &cm->alltoall_small_max_bytes);
    cm->alltoall_window = DR_ALLTOALL_WINDOW_DEFAULT;
    reg("alltoall_window", "Pairwise steps of MPI_Alltoall and MPI_Alltoallv in flight at once "
        "(each step: one peer to send to, one to receive from; 1: strictly one step after the "
        "other)", MCA_BASE_VAR_TYPE_UNSIGNED_INT, NULL, OPAL_INFO_LVL_5, &cm->alltoall_window);
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
    mca_coll_dualrail_nb_open();
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
    mca_coll_dualrail_nb_close();
    if (cm->mr != NULL) {
        dr_mr_destroy(cm->mr);
        cm->mr = NULL;
    }
    opal_output_close(cm->output);
    return OMPI_SUCCESS;
}
