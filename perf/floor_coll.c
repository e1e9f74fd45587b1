/*
 * libdualrail_floor_coll.so — the floor of a small 2-rank MPI_Allreduce that runs on a
 * transport of its own beside the application's MPI: perf/latency_compare.sh's "floor-c".
 *
 * Why. coll/dualrail moves its data on its own UCP contexts (one per plane), while the
 * benchmark's barrier before each timed call runs on the stock point-to-point (pml ucx in
 * the dualrail-2u run). The stock allreduce it is compared with runs on the same worker and
 * socket as that barrier. floor-x (dualrail-ucp-exchange) is the exchange back to back,
 * outside MPI; this is the same exchange in the collective's own position: entered right
 * after the stock barrier returns, on its own UCP worker and TCP connection on plane A,
 * with nothing of ucx_mr or the component (no failover, no second plane, no
 * acknowledgement, no bookkeeping). What coll/dualrail takes above it is its own cost;
 * what this takes above or below the stock path is the position's.
 *
 * How. LD_PRELOADed into dualrail-allreduce-bench under the stock ucx configuration (pml
 * ucx, coll tuned), it takes MPI_Allreduce calls on MPI_COMM_WORLD of exactly 2 ranks with
 * a predefined contiguous datatype and up to kFloorMaxBytes bytes; the others go to
 * PMPI_Allreduce. The first such call creates a UCP context (UCX_TLS=tcp,
 * UCX_NET_DEVICES=$DUALRAIL_FLOOR_DEVICE, default ethA) and one endpoint to the peer (the
 * worker addresses exchanged with PMPI_Sendrecv) and warms the connection with a few
 * exchanges. A call then does what pml ucx + coll tuned's recursive doubling does on 2
 * ranks: posts the receive (tag = the call's sequence number), sends its vector, waits for
 * both, and reduces with PMPI_Reduce_local in the same operand order on both ranks (the
 * lower rank's vector as `in`), so both ranks hold the same bits. MPI_Finalize closes the
 * endpoint. Every wait is bounded (kFloorWaitSec, then abort with a message): a measuring
 * tool, not a transport (nothing progresses its worker between calls, so a send UCX left
 * queued, which a full socket would cause and a latency loop's idle one does not, would end
 * in that abort instead of being delivered).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ucp/api/ucp.h>

enum { kFloorMaxBytes = 65536, kFloorWarm = 64, kFloorWaitSec = 30 };

static struct {
    int state; /* 0 not yet, 1 up, -1 off (set-up failed or not 2 ranks) */
    int rank;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_ep_h ep;
    uint64_t seq;
    char tmp[kFloorMaxBytes];
} F;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, ucs_status_t st)
{
    fprintf(stderr, "dualrail floor-c (rank %d): %s: %s\n", F.rank, what, ucs_status_string(st));
    abort();
}

/* Wait for a request (NULL: it completed in the call), then free it; an error aborts. The
 * clock is read every 1024 polls only: the wait is the measured path. */
static void wait_req(void *req)
{
    if (UCS_PTR_IS_ERR(req)) {
        die("request", UCS_PTR_STATUS(req));
    }
    if (req == NULL) {
        return;
    }
    ucs_status_t st;
    double start = 0;
    for (unsigned n = 1; (st = ucp_request_check_status(req)) == UCS_INPROGRESS; ++n) {
        ucp_worker_progress(F.worker);
        if ((n & 1023) == 0) {
            const double t = now_s();
            if (start == 0) {
                start = t;
            } else if (t - start > kFloorWaitSec) {
                die("no message from the peer", UCS_ERR_TIMED_OUT);
            }
        }
    }
    ucp_request_free(req);
    if (st != UCS_OK) {
        die("request", st);
    }
}

/* The exchange of one call: our len bytes at in, the peer's into F.tmp. */
static void exchange(const void *in, size_t len)
{
    ucp_request_param_t p;
    p.op_attr_mask = 0;
    const uint64_t tag = ++F.seq;
    void *r = ucp_tag_recv_nbx(F.worker, F.tmp, len, tag, ~(ucp_tag_t)0, &p);
    void *s = ucp_tag_send_nbx(F.ep, in, len, tag, &p);
    wait_req(r); /* progress completes the send meanwhile */
    wait_req(s);
}

static void setup(void)
{
    F.state = -1;
    int size;
    PMPI_Comm_rank(MPI_COMM_WORLD, &F.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        return; /* every call to the stock path, on every rank alike */
    }
    const char *dev = getenv("DUALRAIL_FLOOR_DEVICE");
    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        die("ucp_config_read", st);
    }
    if ((st = ucp_config_modify(cfg, "TLS", "tcp")) != UCS_OK ||
        (st = ucp_config_modify(cfg, "NET_DEVICES", dev != NULL ? dev : "ethA")) != UCS_OK) {
        die("ucp_config_modify", st);
    }
    ucp_params_t pp;
    memset(&pp, 0, sizeof(pp));
    pp.field_mask = UCP_PARAM_FIELD_FEATURES;
    pp.features = UCP_FEATURE_TAG;
    st = ucp_init(&pp, cfg, &F.ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        die("ucp_init", st);
    }
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if ((st = ucp_worker_create(F.ctx, &wp, &F.worker)) != UCS_OK) {
        die("ucp_worker_create", st);
    }
    ucp_address_t *addr;
    size_t len;
    if ((st = ucp_worker_get_address(F.worker, &addr, &len)) != UCS_OK) {
        die("ucp_worker_get_address", st);
    }
    const int peer = 1 - F.rank;
    uint64_t mine = len, theirs = 0;
    PMPI_Sendrecv(&mine, 1, MPI_UINT64_T, peer, 0, &theirs, 1, MPI_UINT64_T, peer, 0,
                  MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    char *remote = malloc(theirs);
    if (remote == NULL || theirs > INT32_MAX || len > INT32_MAX) {
        die("peer address", UCS_ERR_NO_MEMORY);
    }
    PMPI_Sendrecv(addr, (int)len, MPI_BYTE, peer, 1, remote, (int)theirs, MPI_BYTE, peer, 1,
                  MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ucp_worker_release_address(F.worker, addr);
    ucp_ep_params_t ep;
    memset(&ep, 0, sizeof(ep));
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = (const ucp_address_t *)remote;
    st = ucp_ep_create(F.worker, &ep, &F.ep);
    free(remote);
    if (st != UCS_OK) {
        die("ucp_ep_create", st);
    }
    /* Both directions connected before the first measured call. */
    const uint64_t warm = 0;
    for (int i = 0; i < kFloorWarm; ++i) {
        exchange(&warm, sizeof(warm));
    }
    F.state = 1;
}

/* A predefined datatype laid out as one block of its size (the benchmark's MPI_FLOAT, the
 * integer and floating types); pair and derived types go to the stock path. */
static int plain(MPI_Datatype t)
{
    return t == MPI_FLOAT || t == MPI_DOUBLE || t == MPI_INT || t == MPI_UNSIGNED ||
           t == MPI_LONG || t == MPI_UNSIGNED_LONG || t == MPI_LONG_LONG || t == MPI_CHAR ||
           t == MPI_BYTE || t == MPI_INT32_T || t == MPI_INT64_T || t == MPI_UINT32_T ||
           t == MPI_UINT64_T;
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    int tsize = 0;
    if (comm != MPI_COMM_WORLD || count <= 0 || !plain(type) ||
        PMPI_Type_size(type, &tsize) != MPI_SUCCESS) {
        return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
    }
    const size_t bytes = (size_t)count * (size_t)tsize;
    if (bytes > kFloorMaxBytes) {
        return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
    }
    if (F.state == 0) {
        setup();
    }
    if (F.state < 0) {
        return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
    }
    const void *in = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    exchange(in, bytes);
    if (F.rank == 0) {
        /* ours op theirs: into the received copy, then out */
        PMPI_Reduce_local(in, F.tmp, count, type, op);
        memcpy(rbuf, F.tmp, bytes);
    } else {
        if (in != rbuf) {
            memcpy(rbuf, in, bytes);
        }
        PMPI_Reduce_local(F.tmp, rbuf, count, type, op); /* theirs op ours */
    }
    return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
    if (F.state == 1) {
        /* Both ranks' last exchanges are complete; the close flushes nothing outstanding. */
        ucp_request_param_t p;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
        void *r = ucp_ep_close_nbx(F.ep, &p);
        const double start = now_s();
        while (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS &&
               now_s() - start < 2.0) {
            ucp_worker_progress(F.worker);
        }
        if (UCS_PTR_IS_PTR(r)) {
            ucp_request_free(r);
        }
        ucp_worker_destroy(F.worker);
        ucp_cleanup(F.ctx);
        F.state = -1;
    }
    return PMPI_Finalize();
}
