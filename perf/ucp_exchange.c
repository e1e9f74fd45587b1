/*
 * dualrail-ucp-exchange — the UCX floor of the exchange a 2-rank allreduce makes: raw UCP
 * (tag API, one worker, one endpoint, busy polling), no ucx_mr, no MPI.
 *
 *   dualrail-ucp-exchange DIR SELF PEER [SIZE [ITERS [exchange|pingpong|am|guarded]]]
 *
 * Two processes (ids 0 and 1, one per lab node) exchange worker addresses through files in
 * DIR (the lab's nodes share a filesystem; tests/support/oob_file.h), then for ITERS
 * iterations (default 20000, a tenth more first as warm-up) of SIZE bytes (default 8):
 *   exchange (default): both post the receive of iteration i, send theirs and wait for both,
 *            as recursive doubling does on 2 ranks (and as dualrail-mr-latency's exchange
 *            mode does over ucx_mr): time per iteration;
 *   pingpong: 0 sends, 1 echoes; half the round trip (ucx_perftest -t tag_lat's number);
 *   am:      the exchange on UCP's active messages as ucx_mr sends them (eager, a 40-byte
 *            user header beside the data, the data copied out in the receive callback):
 *            the floor of ucx_mr's present wire protocol, no bookkeeping;
 *   guarded: the exchange on the tag API with the least a failover-capable transport
 *            keeps per message: the data copied into a retained slot (the copy a plane
 *            loss would re-send) behind a 16-byte header (message number, the peer's
 *            message it acknowledges, key), received into a bounce buffer, checked
 *            against the newest message number (duplicates), the acknowledgement
 *            applied, the arrival recorded in a 1024-entry done ring with the clock
 *            (liveness), and copied out. One plane, so no cold-plane polling: a lower
 *            bound for any design that keeps those guarantees on this UCP.
 * (perf/exchange_floor.sh runs every mode beside ucx_mr and the MPI paths.)
 * `ucx_perftest -t tag_lat` measures only the second; the "floor for the same
 * exchange" is the first: both ends send at once, so both run the kernel's send path (on
 * the lab: TCP over veth and a bridge, the delivery into the peer's socket included) at
 * the same time as their receive. UCX picks the transport and device from the environment
 * as usual (UCX_TLS, UCX_NET_DEVICES: perf/latency_compare.sh gives tcp and one plane).
 * Prints "SIZE usec" on process 0. Bounded: 60 s in all; any UCX error exits 2.
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ucp/api/ucp.h>

#include "oob_file.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, ucs_status_t st)
{
    fprintf(stderr, "dualrail-ucp-exchange: %s: %s\n", what, ucs_status_string(st));
    exit(2);
}

static void nop_send(void *req, ucs_status_t st, void *arg)
{
    (void)req, (void)st, (void)arg;
}

static void nop_recv(void *req, ucs_status_t st, const ucp_tag_recv_info_t *info, void *arg)
{
    (void)req, (void)st, (void)info, (void)arg;
}

/* am mode: ucx_mr's header size; the receive callback copies the data out. */
struct am_hdr {
    uint64_t seq;
    uint8_t rest[32];
};
static char *am_in;
static long am_got = -1;

static ucs_status_t am_recv(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param)
{
    (void)arg, (void)param;
    if (header_length == sizeof(struct am_hdr)) {
        memcpy(am_in, data, length);
        am_got = (long)((const struct am_hdr *)header)->seq;
    }
    return UCS_OK;
}

/* guarded mode: the per-message record (see the top of the file). */
struct g_hdr {
    uint32_t msg_id;
    uint32_t ack;
    uint64_t key;
};
struct g_done {
    uint64_t key;
    uint32_t msg_id;
    uint64_t at;
};
enum { kSlots = 64, kDone = 1024 };

/* Wait for a request (NULL: it completed in the call), polling the worker. */
static void wait_req(ucp_worker_h w, void *req, double end, const char *what)
{
    if (req == NULL) {
        return;
    }
    if (UCS_PTR_IS_ERR(req)) {
        die(what, UCS_PTR_STATUS(req));
    }
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(w);
        if (now_s() > end) {
            die(what, UCS_ERR_TIMED_OUT);
        }
    }
    ucp_request_free(req);
    if (st != UCS_OK) {
        die(what, st);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 7) {
        fprintf(stderr, "usage: dualrail-ucp-exchange DIR SELF PEER [SIZE [ITERS "
                        "[exchange|pingpong|am|guarded]]]\n");
        return 1;
    }
    const unsigned self = (unsigned)atoi(argv[2]), peer = (unsigned)atoi(argv[3]);
    const size_t size = argc > 4 ? (size_t)atol(argv[4]) : 8;
    const long iters = argc > 5 ? atol(argv[5]) : 20000;
    const char *mode = argc > 6 ? argv[6] : "exchange";
    const int pingpong = strcmp(mode, "pingpong") == 0, am = strcmp(mode, "am") == 0,
              guarded = strcmp(mode, "guarded") == 0;
    if (self > 1 || peer > 1 || self == peer || size > (64u << 20) || iters <= 0 ||
        (!pingpong && !am && !guarded && strcmp(mode, "exchange") != 0)) {
        fprintf(stderr, "dualrail-ucp-exchange: bad id, size, count or mode\n");
        return 1;
    }
    const double end = now_s() + 60;

    ucp_config_t *config;
    ucs_status_t st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        die("ucp_config_read", st);
    }
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE,
                           .features = UCP_FEATURE_TAG | UCP_FEATURE_AM,
                           .request_size = 0};
    ucp_context_h ctx;
    st = ucp_init(&params, config, &ctx);
    ucp_config_release(config);
    if (st != UCS_OK) {
        die("ucp_init", st);
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_worker_h w;
    if ((st = ucp_worker_create(ctx, &wp, &w)) != UCS_OK) {
        die("ucp_worker_create", st);
    }
    char *out = calloc(1, size + 1), *in = calloc(1, size + 1);
    am_in = in;
    if (am) {
        ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                                   UCP_AM_HANDLER_PARAM_FIELD_CB,
                                     .id = 1,
                                     .cb = am_recv};
        if ((st = ucp_worker_set_am_recv_handler(w, &hp)) != UCS_OK) {
            die("ucp_worker_set_am_recv_handler", st);
        }
    }
    ucp_address_t *addr;
    size_t alen;
    if ((st = ucp_worker_get_address(w, &addr, &alen)) != UCS_OK) {
        die("ucp_worker_get_address", st);
    }
    void *peer_addr = NULL;
    size_t peer_len = 0;
    if (dr_oob_publish(argv[1], self, addr, alen) != 0 ||
        dr_oob_fetch(argv[1], peer, 60, &peer_addr, &peer_len) != 0) {
        fprintf(stderr, "dualrail-ucp-exchange: address exchange through %s failed\n", argv[1]);
        return 2;
    }
    ucp_ep_params_t ep_params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                                 .address = (const ucp_address_t *)peer_addr};
    ucp_ep_h ep;
    if ((st = ucp_ep_create(w, &ep_params, &ep)) != UCS_OK) {
        die("ucp_ep_create", st);
    }

    const ucp_request_param_t sp = {.op_attr_mask =
                                        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_DATATYPE,
                                    .cb.send = nop_send,
                                    .datatype = ucp_dt_make_contig(1)};
    const ucp_request_param_t rp = {.op_attr_mask =
                                        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_DATATYPE,
                                    .cb.recv = nop_recv,
                                    .datatype = ucp_dt_make_contig(1)};
    const ucp_request_param_t ap = {.op_attr_mask =
                                        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS,
                                    .cb.send = nop_send,
                                    .flags = UCP_AM_SEND_FLAG_EAGER};
    /* guarded: the retained copies, the bounce buffer and the done ring, allocated once */
    const size_t gsz = sizeof(struct g_hdr) + size;
    char *slots = guarded ? calloc(kSlots, gsz) : NULL, *bounce = guarded ? calloc(1, gsz) : NULL;
    struct g_done *done = guarded ? calloc(kDone, sizeof(*done)) : NULL;
    uint32_t newest = 0, acked = 0;
    unsigned done_pos = 0;
    if (guarded && (slots == NULL || bounce == NULL || done == NULL)) {
        die("calloc", UCS_ERR_NO_MEMORY);
    }
    const long warm = iters / 10 + 10;
    double t0 = 0;
    for (long i = 0; i < warm + iters; ++i) {
        if (i == warm) {
            t0 = now_s();
        }
        const ucp_tag_t tag = (ucp_tag_t)i;
        if (pingpong && self == 1) {
            wait_req(w, ucp_tag_recv_nbx(w, in, size, tag, ~(ucp_tag_t)0, &rp), end, "receive");
            wait_req(w, ucp_tag_send_nbx(ep, in, size, tag, &sp), end, "send");
        } else if (am) {
            struct am_hdr h = {.seq = (uint64_t)i};
            void *s = ucp_am_send_nbx(ep, 1, &h, sizeof(h), out, size, &ap);
            while (am_got < i) {
                ucp_worker_progress(w);
                if (now_s() > end) {
                    die("am receive", UCS_ERR_TIMED_OUT);
                }
            }
            wait_req(w, s, end, "am send");
        } else if (guarded) {
            void *r = ucp_tag_recv_nbx(w, bounce, gsz, tag, ~(ucp_tag_t)0, &rp);
            char *slot = slots + (size_t)(i % kSlots) * gsz;
            const struct g_hdr h = {.msg_id = (uint32_t)i + 1, .ack = newest, .key = tag};
            memcpy(slot, &h, sizeof(h));
            memcpy(slot + sizeof(h), out, size); /* what a failover would send again */
            void *s = ucp_tag_send_nbx(ep, slot, gsz, tag, &sp);
            wait_req(w, r, end, "receive");
            const struct g_hdr *g = (const struct g_hdr *)bounce;
            const uint64_t at = (uint64_t)(now_s() * 1e6); /* the peer's sign of life */
            if ((int32_t)(g->msg_id - newest) > 0) {
                newest = g->msg_id;
            } else {
                for (unsigned k = 0; k < kDone; ++k) { /* a re-sent copy: drop it */
                    if (done[k].key == g->key && done[k].msg_id == g->msg_id) {
                        die("guarded: duplicate", UCS_ERR_NO_MESSAGE);
                    }
                }
            }
            if ((int32_t)(g->ack - acked) > 0) {
                acked = g->ack; /* retires our slots up to it */
            }
            done[done_pos] = (struct g_done){g->key, g->msg_id, at};
            done_pos = (done_pos + 1) % kDone;
            memcpy(in, bounce + sizeof(*g), size);
            wait_req(w, s, end, "send");
        } else {
            void *r = ucp_tag_recv_nbx(w, in, size, tag, ~(ucp_tag_t)0, &rp);
            void *s = ucp_tag_send_nbx(ep, out, size, tag, &sp);
            wait_req(w, r, end, "receive");
            wait_req(w, s, end, "send");
        }
    }
    const double per = (now_s() - t0) / (double)iters / (pingpong ? 2 : 1);
    if (self == 0) {
        printf("%zu %.2f\n", size, per * 1e6);
    }
    /* Both sides finish before either closes (a close under the peer's last receive would
     * fail it): one more exchange of a byte with a tag no iteration uses. */
    void *fr = ucp_tag_recv_nbx(w, in, 1, ~(ucp_tag_t)0, ~(ucp_tag_t)0, &rp);
    void *fs = ucp_tag_send_nbx(ep, out, 1, ~(ucp_tag_t)0, &sp);
    wait_req(w, fr, end, "receive");
    wait_req(w, fs, end, "send");
    ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = UCP_EP_CLOSE_FLAG_FORCE};
    void *c = ucp_ep_close_nbx(ep, &cp);
    if (c != NULL && !UCS_PTR_IS_ERR(c)) {
        while (ucp_request_check_status(c) == UCS_INPROGRESS && now_s() < end) {
            ucp_worker_progress(w);
        }
        ucp_request_free(c);
    }
    ucp_worker_release_address(w, addr);
    ucp_worker_destroy(w);
    ucp_cleanup(ctx);
    free(peer_addr);
    free(slots);
    free(bounce);
    free(done);
    free(out);
    free(in);
    return 0;
}
