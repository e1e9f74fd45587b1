/*
 * coll/dualrail: Open MPI 4.1 and 5.0 collective component that runs allreduce,
 * bcast, barrier and allgather plane-striped over ucx_mr and survives the
 * loss of a plane.
 *
 * This glue is C (Open MPI's internal headers are not C++) and is the only
 * code that includes them. The algorithms live behind dr_coll.h.
 *
 * Lifecycle:
 *   open            register MCA variables, open the output stream
 *   comm_query      MPI_COMM_WORLD: create the ucx_mr context (once), offer a
 *                   module on every rank whatever the local outcome, so the
 *                   agreement in enable can never leave a rank out;
 *                   other communicators: offered only if the job agreed
 *   enable (world)  agreement + address exchange through the previous
 *                   module's allgather: every rank learns whether every rank
 *                   has the same plane count; if not, the component stays
 *                   pass-through everywhere (never a hang, never mixed planes)
 *   allreduce,      each in its own file: checks the call, falls back to the
 *   bcast, barrier, previous module for anything it does not handle, before
 *   allgather       any data moves
 *   close           destroys the ucx_mr context
 */
#ifndef MCA_COLL_DUALRAIL_H
#define MCA_COLL_DUALRAIL_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "opal/class/opal_object.h"

#include "compat/coll_dualrail_compat.h"
#include "dr_coll.h"
#include "dualrail/key.h"
#include "dualrail/ucx_mr.h"

BEGIN_C_DECLS

enum {
    MCA_COLL_DUALRAIL_STATE_UNKNOWN = 0, /* before the world agreement */
    MCA_COLL_DUALRAIL_STATE_ON = 1,
    MCA_COLL_DUALRAIL_STATE_OFF = -1
};

typedef struct mca_coll_dualrail_component_t {
    mca_coll_dualrail_base_component_t super; /* 4.1 and 5.0 differ: compat header */

    /* MCA variables */
    int priority;
    int verbose;
    int stats;
    char *planes;
    char *planes_exclude;
    char *transports;
    char *weights;                /* "adaptive", "equal" or ratios "2:1" (ucx_mr's weights) */
    int allreduce_algorithm;      /* DR_ALGO_* */
    int bcast_enable;             /* per-collective switches: 0 leaves it to the next module */
    int barrier_enable;
    int allgather_enable;
    int bcast_algorithm;          /* DR_BCAST_* */
    size_t bcast_small_max_bytes;
    int allgather_algorithm;      /* DR_ALLGATHER_* */
    size_t allgather_small_max_bytes;
    size_t rd_max_bytes;
    size_t segment_size;
    size_t wire_segment_size;
    unsigned window;
    double stall_timeout;
    double probe_interval;
    double peer_timeout;
    double op_timeout;
    double spin_time;
    size_t cuda_staging_size;     /* GPU buffers: pinned host bytes staged per communicator */
    int gpu_standin;              /* tests: the host stand-in's device memory counts as GPU memory */

    /* state */
    int output;
    int state;
    dr_mr_t *mr;
    int world_rank;
    int world_size;               /* kept: MPI_COMM_WORLD is gone when the table is printed */
    char weights_used[64];        /* coll_dualrail_weights as set up (MCA storage is gone by then) */
    char reason[512];             /* why this process cannot run dualrail, if it cannot */
    char signature[256];          /* discovered planes' identities ("" for an explicit list) */
} mca_coll_dualrail_component_t;

typedef struct mca_coll_dualrail_module_t {
    mca_coll_base_module_t super;

    ompi_communicator_t *comm;
    bool active;                  /* false: every call goes to the previous module */
    uint32_t *peer_ids;           /* ucx_mr id (world rank) of each rank of comm */
    uint32_t comm_id;
    /*
     * One sequence counter per collective kind (indexed by DR_KIND_*), not one shared
     * by all: MPI's ordering rule would make a shared one agree too, but only while
     * every rank takes the same dualrail-or-fallback decision for every call of every
     * kind. Per kind, a decision two ranks take differently (datatypes that match by
     * signature but not by handle) can disturb only that kind's keys, and the key's
     * kind field keeps the kinds apart whatever their numbers.
     */
    uint32_t seq[DR_KIND_COUNT];
    uint64_t calls[DR_KIND_COUNT], fallbacks[DR_KIND_COUNT]; /* per kind, fallbacks included */
    struct dr_staging *staging;   /* GPU buffers: created at the first device call, NULL before */
    unsigned long staging_fallbacks; /* GPU buffers: ring calls that ran without pinned slots */

    mca_coll_base_module_allreduce_fn_t previous_allreduce;
    mca_coll_base_module_t *previous_allreduce_module;
    mca_coll_base_module_bcast_fn_t previous_bcast;
    mca_coll_base_module_t *previous_bcast_module;
    mca_coll_base_module_barrier_fn_t previous_barrier;
    mca_coll_base_module_t *previous_barrier_module;
    mca_coll_base_module_allgather_fn_t previous_allgather;
    mca_coll_base_module_t *previous_allgather_module;
} mca_coll_dualrail_module_t;

OMPI_DECLSPEC extern mca_coll_dualrail_component_t mca_coll_dualrail_component;
OBJ_CLASS_DECLARATION(mca_coll_dualrail_module_t);

/* coll_dualrail_stats.c */
void mca_coll_dualrail_stats_register(void);
void mca_coll_dualrail_stats_print(void);

/* Registered with opal_progress while dualrail is on. */
int mca_coll_dualrail_progress(void);

int mca_coll_dualrail_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_dualrail_comm_query(struct ompi_communicator_t *comm,
                                                     int *priority);

int mca_coll_dualrail_allreduce(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm,
                                mca_coll_base_module_t *module);

int mca_coll_dualrail_bcast(void *buff, int count, struct ompi_datatype_t *dtype, int root,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dualrail_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dualrail_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module);

/* coll_dualrail_common.c: what every collective's glue shares. */
typedef struct mca_coll_dualrail_idle {
    unsigned calls;
    double since; /* when this collective first went idle */
    double now;   /* read every fourth call: a clock read per poll is measurable */
} mca_coll_dualrail_idle_t;
/* The algorithms' wait callback (dr_coll.h idle): spin, yield, then sleep on the planes. */
void mca_coll_dualrail_idle(void *arg);
/* The MPI error class an application sees for a status. */
int mca_coll_dualrail_mpi_error(dr_status_t st);
/* Bytes of count elements of a predefined datatype without holes; false for anything
 * else (derived, non-contiguous), which goes to the previous module. */
bool mca_coll_dualrail_dtype_bytes(struct ompi_datatype_t *dtype, size_t count, size_t *bytes);
/* The arguments every data-movement call shares, taking the kind's next sequence number. */
void mca_coll_dualrail_args_init(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm,
                                 int kind, dr_coll_args_t *a, mca_coll_dualrail_idle_t *idle_state);
/* Copy bytes between a device buffer (dev_ptr: the device side, dst or src) and host memory,
 * synchronously on the buffer's device: bcast and allgather stage whole messages. */
dr_status_t mca_coll_dualrail_stage(void *dst, const void *src, size_t bytes, const void *dev_ptr,
                                    char *err, size_t errlen);
/* Report a failed call (one line naming the collective and communicator); its MPI error. */
int mca_coll_dualrail_failed(struct ompi_communicator_t *comm, const char *what, dr_status_t st,
                             const char *err);

/* Reduction through Open MPI's op engine, MPI-correct where 4.1.4's is not. */
void mca_coll_dualrail_reduce(const void *in, void *inout, size_t count, void *arg);
/* Whether (op, dtype) is a predefined commutative reduction this component runs. */
bool mca_coll_dualrail_op_supported(struct ompi_op_t *op, struct ompi_datatype_t *dtype,
                                    size_t *elem_size);

/* What the allreduce needs to reduce: the op and the datatype. */
typedef struct mca_coll_dualrail_reduce_ctx_t {
    struct ompi_op_t *op;
    struct ompi_datatype_t *dtype;
    int own;                      /* DUALRAIL_OWN_*: a pair Open MPI 4.1.4 gets wrong, done here */
} mca_coll_dualrail_reduce_ctx_t;

void mca_coll_dualrail_reduce_ctx_init(mca_coll_dualrail_reduce_ctx_t *ctx, struct ompi_op_t *op,
                                       struct ompi_datatype_t *dtype);

/* coll_dualrail_gpu.c: device buffers (staged through pinned host memory). */
struct dr_mem_ops;
/* The memory interface the component uses: CUDA's, or with gpu_standin the host stand-in. */
const struct dr_mem_ops *mca_coll_dualrail_gpu_mem(void);
int mca_coll_dualrail_allreduce_device(mca_coll_dualrail_module_t *m, const void *sbuf,
                                       void *rbuf, struct ompi_datatype_t *dtype,
                                       struct ompi_op_t *op, dr_allreduce_args_t *a, char *err,
                                       size_t errlen, dr_status_t *st);
void mca_coll_dualrail_gpu_module_fini(mca_coll_dualrail_module_t *m);
void mca_coll_dualrail_gpu_report(void);

#define DUALRAIL_VERBOSE(level, ...)                                                               \
    do {                                                                                           \
        if (mca_coll_dualrail_component.verbose >= (level)) {                                      \
            opal_output(mca_coll_dualrail_component.output, __VA_ARGS__);                          \
        }                                                                                          \
    } while (0)

END_C_DECLS

#endif
