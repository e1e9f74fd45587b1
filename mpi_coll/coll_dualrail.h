/*
 * coll/dualrail: Open MPI 4.1 and 5.0 collective component that runs allreduce,
 * bcast, barrier, allgather(v), reduce, the reduce-scatters, gather(v), scatter(v),
 * alltoall(v) and some non-blocking ones plane-striped over ucx_mr and survives
 * the loss of a plane.
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
 *   allgather,      any data moves
 *   alltoall(v)
 *   close           destroys the ucx_mr context
 */
#ifndef MCA_COLL_DUALRAIL_H
#define MCA_COLL_DUALRAIL_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "opal/class/opal_free_list.h"
#include "opal/class/opal_object.h"

#include "compat/coll_dualrail_compat.h"
#include "dr_alltoall.h"
#include "dr_coll.h"
#include "dr_coll_gpu.h"
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
    size_t keep_scratch;
    size_t wire_segment_size;
    unsigned window;
    double stall_timeout;
    double probe_interval;
    double peer_timeout;
    double op_timeout;
    double spin_time;
    size_t cuda_staging_size;     /* GPU buffers: pinned host bytes staged per communicator */
    int gpu_standin;              /* tests: the host stand-in's device memory counts as GPU memory */
    /* 1: no device buffer can exist in this process (dr_mem_cuda_no_device, no gpu_standin),
     * so calls skip the per-buffer query; 0: ask per buffer; -1: not known yet (set at the
     * first call that asks, mca_coll_dualrail_on_device) */
    int host_only;
    int alltoall_enable;          /* MPI_Alltoall, MPI_Alltoallv on dualrail (0: next module) */
    int alltoallv_enable;
    int alltoall_algorithm;       /* DR_ALLTOALL_* */
    size_t alltoall_small_max_bytes;
    unsigned alltoall_window;     /* pairwise steps in flight (alltoall and alltoallv) */
    uint64_t kind_calls[DR_KIND_COUNT], kind_fallbacks[DR_KIND_COUNT]; /* freed modules' sums */
    /* the same sums for the non-blocking forms (MPI_Ialltoall counts as DR_KIND_ALLTOALL) */
    uint64_t nb_kind_calls[DR_KIND_COUNT], nb_kind_fallbacks[DR_KIND_COUNT];
    /* reduce, reduce_scatter_block, reduce_scatter: switches, algorithms, thresholds */
    int reduce_enable;
    int reduce_scatter_block_enable;
    int reduce_scatter_enable;
    int reduce_algorithm;         /* DR_REDUCE_* */
    size_t reduce_small_max_bytes;
    int reduce_scatter_block_algorithm; /* DR_REDUCE_SCATTER_* */
    size_t reduce_scatter_block_small_max_bytes;
    int reduce_scatter_algorithm; /* DR_REDUCE_SCATTER_* */
    size_t reduce_scatter_small_max_bytes;
    int allgatherv_enable;
    int allgatherv_algorithm;     /* DR_ALLGATHERV_* */
    size_t allgatherv_small_max_bytes;
    int gather_enable;            /* gather and scatter: binomial trees */
    int scatter_enable;
    int gatherv_enable;           /* gatherv and scatterv: linear with a window */
    int scatterv_enable;

    /* state */
    int output;
    int state;
    dr_mr_t *mr;
    int world_rank;
    int world_size;               /* kept: MPI_COMM_WORLD is gone when the table is printed */
    char weights_used[64];        /* coll_dualrail_weights as set up (MCA storage is gone by then) */
    char reason[512];             /* why this process cannot run dualrail, if it cannot */
    char signature[256];          /* discovered planes' identities ("" for an explicit list) */
    bool thread_multiple;         /* MPI_THREAD_MULTIPLE (init_query): ucx_mr takes its lock */
    int nb_enable;                /* non-blocking collectives (MPI_Iallreduce...) on dualrail */
    int progress_thread;          /* a thread advances them while the application computes */
    int wakeup;                   /* waits sleep on the planes' event descriptors (ucx_mr) */
    int direct_lane;              /* dr_mr_config_t.direct_lane */
    opal_free_list_t nb_requests; /* their requests (coll_dualrail_nb.c) */
    bool nb_requests_ready;
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

    /* MPI_Allreduce's last (op, datatype) pair that passed mca_coll_dualrail_op_supported,
     * with its element size and mca_coll_dualrail_holes: both depend on the pair alone, and
     * only predefined handles pass, which live as long as MPI. Spares a small call's checks
     * (before its first send, so its latency). */
    struct ompi_op_t *ar_op;
    struct ompi_datatype_t *ar_dtype, *ar_holes;
    size_t ar_elem;
    int ar_own; /* mca_coll_dualrail_reduce_class(ar_op, ar_dtype) */

    mca_coll_base_module_allreduce_fn_t previous_allreduce;
    mca_coll_base_module_t *previous_allreduce_module;
    mca_coll_base_module_bcast_fn_t previous_bcast;
    mca_coll_base_module_t *previous_bcast_module;
    mca_coll_base_module_barrier_fn_t previous_barrier;
    mca_coll_base_module_t *previous_barrier_module;
    mca_coll_base_module_allgather_fn_t previous_allgather;
    mca_coll_base_module_t *previous_allgather_module;
    mca_coll_base_module_alltoall_fn_t previous_alltoall;
    mca_coll_base_module_t *previous_alltoall_module;
    mca_coll_base_module_alltoallv_fn_t previous_alltoallv;
    mca_coll_base_module_t *previous_alltoallv_module;
    size_t *alltoallv_layout;     /* 4 x size: alltoallv's byte counts and displacements */
    mca_coll_base_module_reduce_fn_t previous_reduce;
    mca_coll_base_module_t *previous_reduce_module;
    mca_coll_base_module_reduce_scatter_block_fn_t previous_reduce_scatter_block;
    mca_coll_base_module_t *previous_reduce_scatter_block_module;
    mca_coll_base_module_reduce_scatter_fn_t previous_reduce_scatter;
    mca_coll_base_module_t *previous_reduce_scatter_module;
    mca_coll_base_module_allgatherv_fn_t previous_allgatherv;
    mca_coll_base_module_t *previous_allgatherv_module;
    mca_coll_base_module_gather_fn_t previous_gather;
    mca_coll_base_module_t *previous_gather_module;
    mca_coll_base_module_gatherv_fn_t previous_gatherv;
    mca_coll_base_module_t *previous_gatherv_module;
    mca_coll_base_module_scatter_fn_t previous_scatter;
    mca_coll_base_module_t *previous_scatter_module;
    mca_coll_base_module_scatterv_fn_t previous_scatterv;
    mca_coll_base_module_t *previous_scatterv_module;

    /* Non-blocking collectives (coll_dualrail_nb.c): their queue (in issue order, created
     * at the first call), per-kind counters, and the previous module of each. */
    struct dr_nb_queue *nb_queue;
    uint64_t nb_calls[DR_KIND_COUNT], nb_fallbacks[DR_KIND_COUNT];
    mca_coll_base_module_iallreduce_fn_t previous_iallreduce;
    mca_coll_base_module_t *previous_iallreduce_module;
    mca_coll_base_module_ibcast_fn_t previous_ibcast;
    mca_coll_base_module_t *previous_ibcast_module;
    mca_coll_base_module_ibarrier_fn_t previous_ibarrier;
    mca_coll_base_module_t *previous_ibarrier_module;
    mca_coll_base_module_iallgather_fn_t previous_iallgather;
    mca_coll_base_module_t *previous_iallgather_module;
    mca_coll_base_module_ireduce_scatter_block_fn_t previous_ireduce_scatter_block;
    mca_coll_base_module_t *previous_ireduce_scatter_block_module;
    mca_coll_base_module_ialltoall_fn_t previous_ialltoall;
    mca_coll_base_module_t *previous_ialltoall_module;
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

int mca_coll_dualrail_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dualrail_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                                struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                                const int *rdispls, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dualrail_reduce_intra(const void *sbuf, void *rbuf, int count,
                                   struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                                   struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dualrail_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                           struct ompi_communicator_t *comm,
                                           mca_coll_base_module_t *module);
int mca_coll_dualrail_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                     struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                     struct ompi_communicator_t *comm,
                                     mca_coll_base_module_t *module);
int mca_coll_dualrail_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                 void *rbuf, const int *rcounts, const int *disps,
                                 struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                                 mca_coll_base_module_t *module);
int mca_coll_dualrail_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                             struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dualrail_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, const int *rcounts, const int *disps,
                              struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dualrail_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_dualrail_scatterv(const void *sbuf, const int *scounts, const int *disps,
                               struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                               struct ompi_datatype_t *rdtype, int root,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module);

/* coll_dualrail_common.c: what every collective's glue shares. */
typedef struct mca_coll_dualrail_idle {
    unsigned calls;
    double since; /* when this collective first went idle */
    double now;   /* read every fourth call: a clock read per poll is measurable */
} mca_coll_dualrail_idle_t;
/* The algorithms' wait callback (dr_coll.h idle): spin, yield, then sleep on the planes. */
void mca_coll_dualrail_idle(void *arg);
/* "allreduce", "alltoall"...: a DR_KIND_*'s name in messages and the statistics table. */
const char *mca_coll_dualrail_kind_name(int kind);
/* The MPI error class an application sees for a status. */
int mca_coll_dualrail_mpi_error(dr_status_t st);
/* Bytes of count elements of a predefined datatype without holes; false for anything
 * else (derived, non-contiguous), which goes to the previous module. */
bool mca_coll_dualrail_dtype_bytes(struct ompi_datatype_t *dtype, size_t count, size_t *bytes);

/*
 * A v-collective's counts and displacements (in elements of esize bytes) as byte counts bc
 * and byte offsets bd from the lowest displacement of a non-empty block, *lo (in bytes, to
 * add to the buffer): MPI allows negative displacements (a buffer pointing into an array)
 * and never reads an empty block's. *span: the bytes from there to the end of the last
 * non-empty block (0 when all are empty; an empty block's offset is 0). false for a
 * negative count.
 */
bool mca_coll_dualrail_v_layout(const int *counts, const int *displs, int n, size_t esize,
                                size_t *bc, size_t *bd, ptrdiff_t *lo, size_t *span);
/* The block of a call that sends scount x sdtype to, and receives rcount x rdtype from, each
 * rank (allgather, alltoall and their non-blocking forms), in bytes; false (the previous
 * module serves the call) for a negative count, a type dtype_bytes refuses, or send and
 * receive blocks of different sizes. sbuf MPI_IN_PLACE: the send side is not looked at. */
bool mca_coll_dualrail_block_bytes(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                   int rcount, struct ompi_datatype_t *rdtype, size_t *bytes);
/* The arguments every data-movement call shares, taking the kind's next sequence number. */
void mca_coll_dualrail_args_init(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm,
                                 int kind, dr_coll_args_t *a, mca_coll_dualrail_idle_t *idle_state);
/* Copy bytes between a device buffer (dev_ptr: the device side, dst or src) and host memory,
 * synchronously on the buffer's device: bcast and allgather stage whole messages. */
dr_status_t mca_coll_dualrail_stage(void *dst, const void *src, size_t bytes, const void *dev_ptr,
                                    char *err, size_t errlen);
/*
 * A non-blocking collective's device buffers, staged whole through host memory
 * (coll_dualrail_gpu.c): what the call reads copied to host memory when it starts, the
 * result copied to the device when it completes; its task runs on the host copies.
 */
typedef struct mca_coll_dualrail_nb_staging_t {
    void *host_s, *host_r; /* malloc'ed host copies; NULL where that buffer is host memory */
    void *dev_r;           /* the device receive buffer the result goes to, or NULL */
    void *user_r;          /* the host receive buffer a result with holes goes to, or NULL */
    size_t out_bytes;      /* the result's bytes, from host_r's start */
    struct ompi_datatype_t *holes; /* a pair type with holes: its type map only goes out */
    size_t elem;                   /* holes' extent */
} mca_coll_dualrail_nb_staging_t;
/* Replace *sendbuf (s_bytes; NULL: in place or nothing) and *recvbuf (r_bytes) by host
 * copies where they are device memory: the send buffer copied whole, the receive buffer's
 * first in_bytes (what the call reads there: in place, a bcast's root), out_bytes of it
 * copied back by nb_stage_out. holes (a reduction's pair type with holes, extent elem, or
 * NULL): a host receive buffer gets a host copy too, and the result goes out through the
 * type map only (mca_coll_dualrail_result_out). On failure nothing is left allocated (*s is
 * zeroed). */
dr_status_t mca_coll_dualrail_nb_stage_in(mca_coll_dualrail_nb_staging_t *s, const void **sendbuf,
                                          size_t s_bytes, void **recvbuf, size_t r_bytes,
                                          size_t in_bytes, size_t out_bytes,
                                          struct ompi_datatype_t *holes, size_t elem, char *err,
                                          size_t errlen);
/* The result to the device (st: the call's outcome; nothing is copied after a failure), then
 * the host copies freed; the outcome, or the copy's failure. */
dr_status_t mca_coll_dualrail_nb_stage_out(mca_coll_dualrail_nb_staging_t *s, dr_status_t st,
                                           char *err, size_t errlen);
/* The host copies freed, nothing copied (a request given back unused; idempotent). */
void mca_coll_dualrail_nb_stage_free(mca_coll_dualrail_nb_staging_t *s);
/*
 * After this rank's staging failed (st, why) and before its call's first transfer: the call is
 * run anyway in fail mode (dr_coll_args_t.fail), on the buffers the caller passed (user: a
 * copy of the arguments taken before staging replaced them), so that it tells the peers its
 * schedule would have exchanged with instead of leaving them waiting for it. Nothing of
 * the buffers is read or written. A no-op when st is DR_OK.
 */
static inline void mca_coll_dualrail_fail_mode(dr_coll_args_t *a, const dr_coll_args_t *user,
                                               dr_status_t st, const char *why)
{
    if (st != DR_OK) {
        a->sendbuf = user->sendbuf;
        a->recvbuf = user->recvbuf;
        a->fail = st;
        a->fail_why = why;
    }
}
/* Whether a call failed on communicator id cid since the last time this was asked (the
 * failures mca_coll_dualrail_failed reported). */
bool mca_coll_dualrail_take_failure(uint32_t cid);
/* Report a failed call (one line naming the collective and communicator); its MPI error.
 * cold: GCC keeps the paths that report out of the collectives' hot code. */
int mca_coll_dualrail_failed(struct ompi_communicator_t *comm, const char *what, dr_status_t st,
                             const char *err) __attribute__((cold));

/* Reduction through Open MPI's op engine, MPI-correct where 4.1.4's is not. */
void mca_coll_dualrail_reduce(const void *in, void *inout, size_t count, void *arg);
/* Whether (op, dtype) is a predefined commutative reduction this component runs. */
bool mca_coll_dualrail_op_supported(struct ompi_op_t *op, struct ompi_datatype_t *dtype,
                                    size_t *elem_size);
/* dtype when its type map has fewer bytes than its extent (a pair type with a hole:
 * MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT, MPI_LONG_DOUBLE_INT), else NULL. Such a
 * reduction's result reaches the caller through mca_coll_dualrail_result_out. */
struct ompi_datatype_t *mca_coll_dualrail_holes(struct ompi_datatype_t *dtype);
/* *host: a malloc'ed copy of bytes of in (device memory where dev); the caller frees it. The
 * way into a call run on host memory, mca_coll_dualrail_result_out the way out. */
dr_status_t mca_coll_dualrail_host_copy(void **host, const void *in, size_t bytes, bool dev,
                                        char *err, size_t errlen);
/* bytes of a result (host memory) into dst (device memory where dev): whole, or only the
 * type map's bytes of each elem-byte element of holes (non-NULL), dst's holes untouched. */
dr_status_t mca_coll_dualrail_result_out(void *dst, const void *result, size_t bytes, bool dev,
                                         struct ompi_datatype_t *holes, size_t elem, char *err,
                                         size_t errlen);

/* What the allreduce needs to reduce: the op and the datatype. */
typedef struct mca_coll_dualrail_reduce_ctx_t {
    struct ompi_op_t *op;
    struct ompi_datatype_t *dtype;
    int own;                      /* DUALRAIL_OWN_*: a pair Open MPI 4.1.4 gets wrong, done here */
} mca_coll_dualrail_reduce_ctx_t;

void mca_coll_dualrail_reduce_ctx_init(mca_coll_dualrail_reduce_ctx_t *ctx, struct ompi_op_t *op,
                                       struct ompi_datatype_t *dtype);
/* Which reduction mca_coll_dualrail_reduce does itself for (op, dtype) (ctx->own; one that
 * is not is Open MPI's), and a context with it already known (the allreduce keeps it with
 * the op and type of its last call). */
int mca_coll_dualrail_reduce_class(struct ompi_op_t *op, struct ompi_datatype_t *dtype);
void mca_coll_dualrail_reduce_ctx_known(mca_coll_dualrail_reduce_ctx_t *ctx, struct ompi_op_t *op,
                                        struct ompi_datatype_t *dtype, int own);

/* The arguments of a reduce_scatter_block (rcount elements of elem bytes per rank) and of an
 * alltoall (blocks of bytes), taking the kind's next sequence number; the blocking calls and
 * their non-blocking forms share them. rctx: where the reduction's op and type are kept (it
 * must live until the collective is over). */
void mca_coll_dualrail_reduce_scatter_block_args(
    mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm, const void *sbuf, void *rbuf,
    int rcount, size_t elem, struct ompi_op_t *op, struct ompi_datatype_t *dtype,
    mca_coll_dualrail_reduce_ctx_t *rctx, dr_coll_args_t *a, mca_coll_dualrail_idle_t *idle_state);
void mca_coll_dualrail_alltoall_args(mca_coll_dualrail_module_t *m,
                                     struct ompi_communicator_t *comm, const void *sbuf, void *rbuf,
                                     size_t bytes, dr_alltoall_args_t *a,
                                     mca_coll_dualrail_idle_t *idle_state);

/* coll_dualrail_nb.c: non-blocking collectives, tasks advanced from opal_progress. */
int mca_coll_dualrail_iallreduce(const void *sbuf, void *rbuf, int count,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module);
int mca_coll_dualrail_ibcast(void *buff, int count, struct ompi_datatype_t *dtype, int root,
                             struct ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module);
int mca_coll_dualrail_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                 void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module);
int mca_coll_dualrail_ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request,
                               mca_coll_base_module_t *module);
int mca_coll_dualrail_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                            struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                            struct ompi_communicator_t *comm,
                                            ompi_request_t **request,
                                            mca_coll_base_module_t *module);
int mca_coll_dualrail_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, ompi_request_t **request,
                                mca_coll_base_module_t *module);
void mca_coll_dualrail_nb_open(void);
void mca_coll_dualrail_nb_close(void);
/* opal_output of one line from any thread: on the progress thread below
 * MPI_THREAD_MULTIPLE the line (its first 511 characters) is queued for the application's
 * thread; elsewhere printed at once (its first 2047 characters). */
void mca_coll_dualrail_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mca_coll_dualrail_nb_module_init(mca_coll_dualrail_module_t *m);
void mca_coll_dualrail_nb_module_fini(mca_coll_dualrail_module_t *m);
/* Set the module's non-blocking entries (comm_query) and save the previous ones (enable). */
void mca_coll_dualrail_nb_query(mca_coll_dualrail_module_t *m);
int mca_coll_dualrail_nb_enable(mca_coll_dualrail_module_t *m, struct ompi_communicator_t *comm);
/* coll_dualrail_progress_thread: started once the job runs dualrail, stopped at close. */
void mca_coll_dualrail_nb_thread_start(void);
/* Tasks resumed from the progress callback (events: what the planes' progress did); the
 * number completed. Idles like a blocking wait when called back to back with nothing done. */
int mca_coll_dualrail_nb_progress(int events);

/* coll_dualrail_gpu.c: device buffers (staged through pinned host memory). */
struct dr_mem_ops;
/* The memory interface the component uses: CUDA's, or with gpu_standin the host stand-in. */
const struct dr_mem_ops *mca_coll_dualrail_gpu_mem(void);
/* mca_coll_dualrail_on_device's first answer: sets host_only. */
int mca_coll_dualrail_host_only_detect(void);
/*
 * Whether sbuf or rbuf (either may be NULL) is device memory, as dr_buffers_on_device
 * with mca_coll_dualrail_gpu_mem(). Where no device buffer can exist (no GPU driver, the
 * common case of a CPU job) a load and a branch: the query through the memory interface
 * was about 45 instructions of every small collective (perf/instr_count.sh).
 */
static inline bool mca_coll_dualrail_on_device(const void *sbuf, const void *rbuf)
{
    int host_only = __atomic_load_n(&mca_coll_dualrail_component.host_only, __ATOMIC_RELAXED);
    if (host_only < 0) {
        host_only = mca_coll_dualrail_host_only_detect();
    }
    return !host_only && dr_buffers_on_device(mca_coll_dualrail_gpu_mem(), sbuf, rbuf) != 0;
}
int mca_coll_dualrail_allreduce_device(mca_coll_dualrail_module_t *m, const void *sbuf,
                                       void *rbuf, struct ompi_datatype_t *dtype,
                                       struct ompi_op_t *op, dr_allreduce_args_t *a, char *err,
                                       size_t errlen, dr_status_t *st);
void mca_coll_dualrail_gpu_module_fini(mca_coll_dualrail_module_t *m);
void mca_coll_dualrail_gpu_report(void);

/*
 * A communicator the component declines although the user asked for it (priority > 0):
 * one line at verbose 0, from the communicator's rank 0 (every rank at verbose 1), so
 * that a user who selected it never finds out from a benchmark that it was off.
 */
#define DUALRAIL_DECLINE(comm, ...)                                                                \
    do {                                                                                           \
        if (mca_coll_dualrail_component.verbose >= 1 || ompi_comm_rank(comm) == 0) {               \
            opal_output(mca_coll_dualrail_component.output, __VA_ARGS__);                          \
        }                                                                                          \
    } while (0)

#define DUALRAIL_VERBOSE(level, ...)                                                               \
    do {                                                                                           \
        if (mca_coll_dualrail_component.verbose >= (level)) {                                      \
            opal_output(mca_coll_dualrail_component.output, __VA_ARGS__);                          \
        }                                                                                          \
    } while (0)

END_C_DECLS

#endif
