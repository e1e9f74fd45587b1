/*
 * What the C++ tests of ucx_mr's wire share: two contexts on the loopback device that know
 * each other (processes 0 and 1), and a raw UCP worker + endpoint to a context's plane 0
 * for messages framed by hand. Every wait bounded.
 */
#ifndef DUALRAIL_TESTS_SUPPORT_MR_PAIR_HPP
#define DUALRAIL_TESTS_SUPPORT_MR_PAIR_HPP

#include <ucp/api/ucp.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "loopback_config.h"
#include "mr_internal.hpp"

namespace dualrail {
namespace test {

inline double now_s()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Contexts a (process 0) and b (process 1) with cfg (the loopback configuration when null),
 * each added as the other's peer. 0, or -1 with the reason printed. */
inline int mr_pair_open(dr_mr_t **a, dr_mr_t **b, const dr_mr_config_t *cfg = nullptr)
{
    dr_mr_config_t lo;
    dr_test_loopback_config(&lo);
    if (cfg == nullptr) {
        cfg = &lo;
    }
    char err[256];
    if (dr_mr_create(cfg, 0, a, err, sizeof(err)) != DR_OK ||
        dr_mr_create(cfg, 1, b, err, sizeof(err)) != DR_OK) {
        std::printf("create: %s\n", err);
        return -1;
    }
    const void *addr;
    size_t len;
    dr_mr_address(*a, &addr, &len);
    if (dr_mr_add_peer(*b, 0, addr, len, err, sizeof(err)) != DR_OK) {
        std::printf("add peer: %s\n", err);
        return -1;
    }
    dr_mr_address(*b, &addr, &len);
    if (dr_mr_add_peer(*a, 1, addr, len, err, sizeof(err)) != DR_OK) {
        std::printf("add peer: %s\n", err);
        return -1;
    }
    return 0;
}

/* An 8-byte message from src to dst under key, taken by dst (5 s at most):
 * DR_OK, the send's or the receive's error, or DR_ERR_INVALID for other bytes. */
inline dr_status_t mr_exchange(dr_mr_t *src, dr_mr_t *dst, uint32_t from, uint32_t to, uint64_t key)
{
    const uint64_t v = key * 7 + 1;
    dr_mr_req_t *s = nullptr;
    dr_status_t st = dr_mr_isend(src, to, key, &v, sizeof(v), &s);
    if (st != DR_OK) {
        return st;
    }
    uint64_t got = 0;
    size_t len = 0;
    st = DR_INPROGRESS;
    dr_status_t ss = DR_INPROGRESS;
    for (double end = now_s() + 5; (st == DR_INPROGRESS || ss == DR_INPROGRESS) && now_s() < end;) {
        dr_mr_progress(src);
        dr_mr_progress(dst);
        if (st == DR_INPROGRESS) {
            st = dr_mr_take(dst, from, key, &got, sizeof(got), &len);
        }
        if (ss == DR_INPROGRESS) {
            ss = dr_mr_test(src, s, nullptr);
        }
        if (ss != DR_INPROGRESS && ss != DR_OK) {
            break; /* the send failed: nothing will come */
        }
    }
    dr_mr_req_free(src, s);
    if (ss != DR_OK) {
        return ss;
    }
    return st == DR_OK && (len != sizeof(v) || got != v) ? DR_ERR_INVALID : st;
}

/* A UCP context and worker of their own: UCX_TLS tls, UCX_NET_DEVICES devices unless null. */
inline bool ucp_open(uint64_t features, const char *tls, const char *devices, ucp_context_h *ctx,
                     ucp_worker_h *w)
{
    ucp_params_t params;
    std::memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = features;
    ucp_config_t *config = nullptr;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) {
        return false;
    }
    if (devices != nullptr) {
        ucp_config_modify(config, "NET_DEVICES", devices);
    }
    ucp_config_modify(config, "TLS", tls);
    const ucs_status_t st = ucp_init(&params, config, ctx);
    ucp_config_release(config);
    ucp_worker_params_t wp;
    std::memset(&wp, 0, sizeof(wp));
    return st == UCS_OK && ucp_worker_create(*ctx, &wp, w) == UCS_OK;
}

/* A UCP worker's address, as a context's peer's plane address (empty if UCP refuses). */
inline std::vector<uint8_t> worker_address(ucp_worker_h w)
{
    ucp_address_t *a = nullptr;
    size_t len = 0;
    std::vector<uint8_t> out;
    if (ucp_worker_get_address(w, &a, &len) == UCS_OK) {
        out.assign(reinterpret_cast<uint8_t *>(a), reinterpret_cast<uint8_t *>(a) + len);
        ucp_worker_release_address(w, a);
    }
    return out;
}

/* A send of 64 KiB + 1 from src to peer `to` (not copied: it completes only with the peer's
 * acknowledgement), progressed until it ends (5 s at most): its status, DR_INPROGRESS if
 * it has not ended by then. */
inline dr_status_t mr_send_big(dr_mr_t *src, uint32_t to)
{
    std::vector<char> big(64 * 1024 + 1, 'x');
    dr_mr_req_t *s = nullptr;
    dr_status_t st = dr_mr_isend(src, to, 5, big.data(), big.size(), &s);
    if (st != DR_OK) {
        return st;
    }
    st = DR_INPROGRESS;
    for (double end = now_s() + 5; s != nullptr && st == DR_INPROGRESS && now_s() < end;) {
        dr_mr_progress(src);
        st = dr_mr_test(src, s, nullptr);
    }
    if (s != nullptr) {
        dr_mr_req_free(src, s);
    }
    return s == nullptr ? DR_OK : st;
}

/* A UCP context, worker and endpoint of its own (TCP on lo) to a context's plane 0. */
struct RawEndpoint {
    ucp_context_h ctx = nullptr;
    ucp_worker_h w = nullptr;
    ucp_ep_h ep = nullptr;

    /* features: UCP_FEATURE_TAG for kWholeTag messages, UCP_FEATURE_AM for the others.
     * peer_errors: the endpoint handles errors as ucx_mr's own (UCP refuses an endpoint pair
     * whose modes differ once the context makes its own endpoint back); errors ignored. */
    bool open(dr_mr_t *to, uint64_t features, bool peer_errors = false)
    {
        if (!ucp_open(features, "tcp", "lo", &ctx, &w)) {
            return false;
        }
        ucp_ep_params_t ep_params;
        std::memset(&ep_params, 0, sizeof(ep_params));
        ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep_params.address = static_cast<mr::Mr *>(to)->planes[0]->address;
        if (peer_errors) {
            ep_params.field_mask |=
                UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
            ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
            ep_params.err_handler.cb = [](void *, ucp_ep_h, ucs_status_t) {};
        }
        return ucp_ep_create(w, &ep_params, &ep) == UCS_OK;
    }

    /* Progress this worker and `also` until request r is done (10 s at most); frees r.
     * True when it completed (a null r: at once). */
    bool wait(ucs_status_ptr_t r, dr_mr_t *also)
    {
        if (UCS_PTR_IS_ERR(r)) {
            return false;
        }
        for (double end = now_s() + 10;
             r != nullptr && ucp_request_check_status(r) == UCS_INPROGRESS && now_s() < end;) {
            ucp_worker_progress(w);
            dr_mr_progress(also);
        }
        const bool ok = r == nullptr || ucp_request_check_status(r) == UCS_OK;
        if (r != nullptr) {
            ucp_request_free(r);
        }
        return ok;
    }

    void close()
    {
        if (ep != nullptr) {
            ucp_request_param_t cp;
            std::memset(&cp, 0, sizeof(cp));
            cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
            ucs_status_ptr_t c = ucp_ep_close_nbx(ep, &cp);
            if (c != nullptr && !UCS_PTR_IS_ERR(c)) {
                for (double end = now_s() + 5;
                     ucp_request_check_status(c) == UCS_INPROGRESS && now_s() < end;) {
                    ucp_worker_progress(w);
                }
                ucp_request_free(c);
            }
            ep = nullptr;
        }
        if (w != nullptr) {
            ucp_worker_destroy(w);
            w = nullptr;
        }
        if (ctx != nullptr) {
            ucp_cleanup(ctx);
            ctx = nullptr;
        }
    }
};

} // namespace test
} // namespace dualrail

#endif
