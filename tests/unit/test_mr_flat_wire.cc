/*
 * A whole small message's wire (ucx_mr/mr_internal.hpp, kWholeTag): a whole message of up
 * to kTagWholeMax bytes travels as one UCP tag message [WireHdr][data][acknowledged
 * msg_ids], and the receiver keeps a receive posted for them on each plane (mr_tag.cc).
 *
 *   wire       b's flat send to a sits in a's plane worker as a kWholeTag message of
 *              sizeof(WireHdr) + its length (+ 4 bytes per acknowledgement it carries),
 *              as a's plane takes it in (its posted receive, mr_tag.cc, which is posted
 *              again at the next poll); then dr_mr_take has it;
 *              flat sends of 1000 bytes and of kTagWholeMax (their copies in blocks) are
 *              such messages too, on every UCX; one past kTagWholeMax an active message;
 *              all received whole
 *   foreign    a raw UCP endpoint to a's plane sends kWholeTag messages that are too short,
 *              too long for a flat send's buffer, or whose header claims more data than
 *              they hold: each is dropped; a well-formed one from "process 1" in between
 *              is taken whole; a and b still exchange afterwards
 *   stuck      a's posted receive replaced by one that never completes: whole messages
 *              wait in UCP's queue until two watchdog looks turn the plane to probing,
 *              then are delivered; once that receive ends, the plane posts again
 *
 * Loopback only (UCX_TLS tcp on lo), every wait bounded; without the direct lane
 * (direct_lane 0), which would carry the whole messages instead (test_mr_lane.cc).
 */
#include <ucp/api/ucp.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "../support/check.hpp"
#include "../support/mr_pair.hpp"
#include "mr_internal.hpp"

using dualrail::mr::AckList;
using dualrail::mr::kData;
using dualrail::mr::kWholeTag;
using dualrail::mr::kWireVersion;
using dualrail::mr::Mr;
using dualrail::mr::Plane;
using dualrail::mr::WireHdr;
using dualrail::test::mr_pair_open;
using dualrail::test::now_s;
using dualrail::test::RawEndpoint;

namespace {

/* Progress both until src's message under key is taken by dst (10 s at most). */
dr_status_t take(dr_mr_t *dst, dr_mr_t *src, uint32_t from, uint64_t key, void *buf, size_t cap,
                 size_t *len)
{
    dr_status_t st = DR_INPROGRESS;
    for (double end = now_s() + 10; st == DR_INPROGRESS && now_s() < end;) {
        if (src != nullptr) {
            dr_mr_progress(src);
        }
        dr_mr_progress(dst);
        st = dr_mr_take(dst, from, key, buf, cap, len);
    }
    return st;
}

void send(dr_mr_t *from, uint32_t to, uint64_t key, const void *buf, size_t len)
{
    dr_mr_req_t *s = nullptr;
    CHECK(dr_mr_isend(from, to, key, buf, len, &s) == DR_OK, "isend");
    if (s != nullptr) {
        dr_mr_req_free(from, s);
    }
}

/* Progress b and a until a takes in a kWholeTag message (its plane's tag_msgs moves): that
 * message's length on the wire, or 0 if none came in `wait` seconds. */
size_t tagged_len(dr_mr_t *a, dr_mr_t *b, double wait)
{
    Mr *ma = a;
    const Plane *pl = ma->planes[0].get();
    const uint64_t before = pl->tag_msgs;
    for (double end = now_s() + wait; pl->tag_msgs == before && now_s() < end;) {
        dr_mr_progress(b);
        dr_mr_progress(a);
    }
    return pl->tag_msgs != before ? pl->tag_last_len : 0;
}

/* A message's length on the wire is the header, the data and whole acknowledgements. */
bool framed(size_t wire, size_t len)
{
    return wire >= sizeof(WireHdr) + len && (wire - sizeof(WireHdr) - len) % 4 == 0 &&
           (wire - sizeof(WireHdr) - len) / 4 <= dualrail::mr::kAckList;
}

void test_wire(dr_mr_t *a, dr_mr_t *b)
{
    /* A first message each way makes the endpoints (a send without one takes the general
     * path and waits for it); the next ones go straight out. */
    static char got[4096], big[4096];
    size_t len = 0;
    const char hello[6] = "hello";
    send(b, 0, 7000, hello, sizeof(hello));
    send(a, 1, 7000, hello, sizeof(hello));
    CHECK(take(a, b, 1, 7000, got, sizeof(got), &len) == DR_OK, "first message b to a");
    CHECK(take(b, a, 0, 7000, got, sizeof(got), &len) == DR_OK, "first message a to b");

    /* a flat send held in its slot (up to kFlatInline bytes) */
    const char msg[24] = "flat send, tag message";
    send(b, 0, 7001, msg, sizeof(msg));
    const size_t wire = tagged_len(a, b, 10);
    CHECK(wire != 0, "b's flat send is a kWholeTag message in a's worker");
    CHECK(wire == 0 || framed(wire, sizeof(msg)), "framed as header, data, acknowledgements");
    CHECK(take(a, b, 1, 7001, got, sizeof(got), &len) == DR_OK, "then taken");
    CHECK(len == sizeof(msg) && std::memcmp(got, msg, sizeof(msg)) == 0, "whole and exact");
    /* Received by the plane's posted receive (mr_tag.cc), not probed out of UCP's queue:
     * after a poll the receive is posted again. */
    dr_mr_progress(a);
    CHECK(static_cast<Mr *>(a)->planes[0]->rx == Plane::Rx::kPosted,
          "a's plane keeps a receive posted for whole messages");

    /* a flat send past the slot's inline bytes (its copy in a block), and one of
     * kTagWholeMax, the largest whole message: tagged on every UCX (a flat send does not ask
     * UCX to send at once); one past it an active message, which never shows in UCP's tag
     * queue */
    for (size_t i = 0; i < sizeof(big); ++i) {
        big[i] = (char)(i * 7 + 3);
    }
    const size_t sizes[3] = {1000, dualrail::mr::kTagWholeMax, dualrail::mr::kTagWholeMax + 1};
    for (int k = 0; k < 3; ++k) {
        const size_t n = sizes[k];
        dr_mr_req_t *r = nullptr;
        CHECK(dr_mr_irecv(a, 1, 7100 + (uint64_t)k, got, sizeof(got), &r) == DR_OK, "irecv");
        send(b, 0, 7100 + (uint64_t)k, big, n);
        const size_t tw = tagged_len(a, b, k < 2 ? 10 : 0.5);
        if (k < 2) {
            CHECK(tw != 0 && framed(tw, n), "a whole message of up to kTagWholeMax is tagged");
        } else {
            CHECK(tw == 0, "a message past kTagWholeMax is not a tag message");
        }
        dr_status_t st = DR_INPROGRESS;
        for (double end = now_s() + 10; st == DR_INPROGRESS && now_s() < end;) {
            dr_mr_progress(b);
            dr_mr_progress(a);
            st = dr_mr_test(a, r, &len);
        }
        CHECK(st == DR_OK && len == n && std::memcmp(got, big, n) == 0, "received whole");
        if (r != nullptr && st != DR_INPROGRESS) {
            dr_mr_req_free(a, r);
        }
    }
}

/* A tag message from the raw endpoint; a progresses too (the endpoint's wire-up needs it). */
void raw_send(dr_mr_t *a, RawEndpoint &raw, const void *buf, size_t len)
{
    ucp_request_param_t sp;
    sp.op_attr_mask = 0;
    ucs_status_ptr_t r = ucp_tag_send_nbx(raw.ep, buf, len, kWholeTag, &sp);
    CHECK(!UCS_PTR_IS_ERR(r), "raw tag send");
    CHECK(raw.wait(r, a), "raw tag send completes");
}

void test_foreign(dr_mr_t *a, dr_mr_t *b)
{
    RawEndpoint raw;
    if (!raw.open(a, UCP_FEATURE_TAG)) {
        CHECK(false, "raw UCP endpoint to a's plane");
        raw.close();
        return;
    }
    ucp_worker_h w = raw.w;
    dr_mr_plane_stats_t before{}, after{};
    dr_mr_plane_stats(a, 0, &before);

    /* a message of process 1 (b's id), as ucx_mr would frame it */
    auto frame = [](uint32_t msg_id, uint64_t key, uint64_t total, const void *data, size_t n,
                    uint32_t acks) {
        std::vector<char> f(sizeof(WireHdr) + n + 4 * acks, 0);
        WireHdr h{kData, 0, kWireVersion, 1, msg_id, 0, key, total, 0};
        std::memcpy(f.data(), &h, sizeof(h));
        std::memcpy(f.data() + sizeof(h), data, n);
        return f;
    };
    const char good[16] = "well-formed one";
    const char junk[10] = "too short";
    std::vector<char> huge(dualrail::mr::kTagWireMax + 100, 'x');
    std::vector<char> lying = frame(4000001, 8101, 200, good, sizeof(good), 0);
    std::vector<char> odd = frame(4000002, 8102, sizeof(good), good, sizeof(good), 0);
    odd.push_back(0); /* 1 byte past the data: not a whole acknowledgement */
    std::vector<char> ok = frame(4000003, 8103, sizeof(good), good, sizeof(good), 1);
    raw_send(a, raw, junk, sizeof(junk));
    raw_send(a, raw, huge.data(), huge.size());
    raw_send(a, raw, lying.data(), lying.size());
    raw_send(a, raw, odd.data(), odd.size());
    raw_send(a, raw, ok.data(), ok.size());

    char got[64] = {};
    size_t len = 0;
    dr_status_t st = DR_INPROGRESS;
    for (double end = now_s() + 10; st == DR_INPROGRESS && now_s() < end;) {
        ucp_worker_progress(w);
        dr_mr_progress(a);
        st = dr_mr_take(a, 1, 8103, got, sizeof(got), &len);
    }
    CHECK(st == DR_OK && len == sizeof(good) && std::memcmp(got, good, sizeof(good)) == 0,
          "the well-formed message is taken whole");
    for (int i = 0; i < 100; ++i) { /* anything still on its way is in by now */
        ucp_worker_progress(w);
        dr_mr_progress(a);
    }
    CHECK(dr_mr_take(a, 1, 8101, got, sizeof(got), &len) == DR_INPROGRESS,
          "a header claiming more data than came is dropped");
    CHECK(dr_mr_take(a, 1, 8102, got, sizeof(got), &len) == DR_INPROGRESS,
          "a part of an acknowledgement is dropped");
    dr_mr_plane_stats(a, 0, &after);
    CHECK(after.rx_segments - before.rx_segments == 1,
          "one data segment arrived, the rest dropped");

    raw.close();

    /* a and b are unharmed: one more message each way */
    const char ping[6] = "after";
    send(b, 0, 8201, ping, sizeof(ping));
    send(a, 1, 8202, ping, sizeof(ping));
    CHECK(take(a, b, 1, 8201, got, sizeof(got), &len) == DR_OK && len == sizeof(ping),
          "b to a after the foreign messages");
    CHECK(take(b, a, 0, 8202, got, sizeof(got), &len) == DR_OK && len == sizeof(ping),
          "a to b after the foreign messages");
}

/* The stand-in receive's completion, as ucx_mr's own callback (mr_tag.cc) notes one. */
void stuck_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info, void *arg)
{
    (void)request;
    Plane *pl = static_cast<Plane *>(arg);
    pl->rx_status = status;
    pl->rx_len = info != nullptr ? info->length : 0;
    pl->rx_done = true;
}

/* A plane whose posted receive is taken by a message that never completes (here: replaced
 * by a receive of another tag, which nothing sends) has whole messages wait in UCP's queue;
 * after two watchdog looks (tag_watch, 2 ms apart) the plane probes the queue and they are
 * delivered; once that receive completes (here: cancelled), the plane posts again. */
void test_stuck_receive(dr_mr_t *a, dr_mr_t *b)
{
    Mr *ma = a;
    Plane *pl = ma->planes[0].get();
    char got[64] = {};
    size_t len = 0;
    dr_mr_progress(a); /* the receive posted */
    CHECK(pl->rx == Plane::Rx::kPosted, "a's receive for whole messages is posted");
    /* its receive cancelled as Mr::tag_cancel does (ucx_mr's internals are not exported) */
    ucp_request_cancel(pl->worker, pl->rx_req);
    for (int i = 0; i < 1000 && !pl->rx_done; ++i) {
        ucp_worker_progress(pl->worker);
    }
    CHECK(pl->rx_done, "a's receive cancelled");
    ucp_request_free(pl->rx_req);
    pl->rx_req = nullptr;
    pl->rx_done = false;
    ucp_request_param_t rp;
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv = stuck_cb;
    rp.user_data = pl;
    ucs_status_ptr_t r = ucp_tag_recv_nbx(pl->worker, pl->tag_in, sizeof(pl->tag_in), 0x5354554bull,
                                          ~(ucp_tag_t)0, &rp);
    CHECK(r != nullptr && !UCS_PTR_IS_ERR(r), "a stand-in receive that never completes");
    if (r == nullptr || UCS_PTR_IS_ERR(r)) {
        return;
    }
    pl->rx_req = r;
    pl->rx = Plane::Rx::kPosted;
    ++pl->rx_posts;
    const char msg[8] = "queued";
    send(b, 0, 8301, msg, sizeof(msg));
    CHECK(take(a, b, 1, 8301, got, sizeof(got), &len) == DR_OK && len == sizeof(msg) &&
              std::memcmp(got, msg, sizeof(msg)) == 0,
          "the queued message is delivered while the receive is stuck");
    CHECK(pl->rx == Plane::Rx::kStuck, "the plane probes while its receive is stuck");
    send(b, 0, 8302, msg, sizeof(msg));
    CHECK(take(a, b, 1, 8302, got, sizeof(got), &len) == DR_OK, "and the next one too");
    ucp_request_cancel(pl->worker, r); /* the stuck receive ends after all */
    dr_mr_progress(a);
    dr_mr_progress(a);
    CHECK(pl->rx == Plane::Rx::kPosted, "then the plane posts its receive again");
    send(b, 0, 8303, msg, sizeof(msg));
    CHECK(take(a, b, 1, 8303, got, sizeof(got), &len) == DR_OK, "and receives through it");
}

} // namespace

int main()
{
    dr_mr_t *a = nullptr, *b = nullptr;
    dr_mr_config_t cfg;
    dr_test_loopback_config(&cfg);
    cfg.direct_lane = 0; /* UCP's tag path, which whole messages take without a lane */
    if (mr_pair_open(&a, &b, &cfg) != 0) {
        std::printf("FAIL: cannot open a pair of contexts on loopback\n");
        return 1;
    }
    test_wire(a, b);
    test_foreign(a, b);
    test_stuck_receive(a, b);
    dr_mr_destroy(a);
    dr_mr_destroy(b);
    return dualrail::test::check_report();
}
