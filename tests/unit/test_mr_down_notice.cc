/*
 * A peer's down notice (kDown) against a link that a probe has re-admitted since
 * (ucx_mr/mr_xfer.cc, kDown; wire version 5).
 *
 * The race on two planes: the peer declares plane X down and says so on plane Y; X heals,
 * our probe on X is answered by the peer's pong and X is re-admitted; the notice, sent
 * before the pong but on the other (busier) plane, arrives after it. Taken, it downed the
 * healed link again for a whole backoff (and one more re-admission, which UCX 1.13 can
 * abort in). The notice and the probe's pong carry the sender's down count of the link,
 * so the notice is recognised as older than the pong.
 *
 * The loopback device gives one plane, so the test plays the late notice itself: both
 * contexts declare their link down (the peer's down count becomes 1), the probes
 * re-admit it on both sides, and then a raw UCP endpoint on a's plane delivers kDown
 * messages framed as b's:
 *   stale      count 1 (what the re-admitting pong carried): the link stays up, and a and
 *              b still exchange
 *   fresh      count 2 (a later loss): the link goes down, "the peer lost this plane"
 *
 * Fails without the count: the stale notice downs the re-admitted link. Every wait bounded.
 */
#include <ucp/api/ucp.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "../support/check.hpp"
#include "../support/mr_pair.hpp"
#include "mr_internal.hpp"

using dualrail::mr::kAmId;
using dualrail::mr::kDown;
using dualrail::mr::kWireVersion;
using dualrail::mr::Link;
using dualrail::mr::Mr;
using dualrail::mr::WireHdr;
using dualrail::test::mr_exchange;
using dualrail::test::mr_pair_open;
using dualrail::test::now_s;
using dualrail::test::RawEndpoint;

namespace {

Link *link_of(dr_mr_t *m, uint32_t peer)
{
    Mr *mr = m;
    return mr->peers[peer]->links[0].get();
}

/* Progress both until both links are up again (10 s at most). */
bool readmitted(dr_mr_t *a, dr_mr_t *b)
{
    for (double end = now_s() + 10; now_s() < end;) {
        dr_mr_progress(a);
        dr_mr_progress(b);
        if (link_of(a, 1)->state == DR_LINK_UP && link_of(b, 0)->state == DR_LINK_UP) {
            return true;
        }
    }
    return false;
}

/* b's kDown for plane 0 with down count `count`, from the raw endpoint; a progressed
 * 200 ms more. */
bool down_notice(RawEndpoint &raw, dr_mr_t *a, uint64_t count)
{
    const WireHdr h{kDown, 0, kWireVersion, 1, 0, 0, count, 0, 0};
    ucp_request_param_t sp;
    std::memset(&sp, 0, sizeof(sp));
    const bool sent = raw.wait(ucp_am_send_nbx(raw.ep, kAmId, &h, sizeof(h), nullptr, 0, &sp), a);
    for (double end = now_s() + 0.2; now_s() < end;) {
        ucp_worker_progress(raw.w);
        dr_mr_progress(a);
    }
    return sent;
}

} // namespace

int main()
{
    dr_mr_config_t cfg;
    dr_test_loopback_config(&cfg);
    cfg.readmit_min = 0.05; /* the probes come 50 ms after the downs */
    dr_mr_t *a = nullptr, *b = nullptr;
    if (mr_pair_open(&a, &b, &cfg) != 0) {
        std::printf("FAIL: cannot open a pair of contexts on loopback\n");
        return 1;
    }
    CHECK(mr_exchange(a, b, 0, 1, 11) == DR_OK && mr_exchange(b, a, 1, 0, 12) == DR_OK,
          "first exchange each way");

    /* The plane fails for both: each side's endpoint reports an error, as UCX's callback
     * would (its sockets are not severed: lo carries the raw endpoint too), and progress
     * declares the link down (b's count becomes 1). */
    for (dr_mr_t *m : {b, a}) {
        Link *l = link_of(m, m == a ? 1 : 0);
        l->ep_failed = true;
        l->ep_status = UCS_ERR_ENDPOINT_TIMEOUT;
        static_cast<Mr *>(m)->deferred = true;
        dr_mr_progress(m);
    }
    CHECK(link_of(b, 0)->downs == 1 && link_of(a, 1)->state == DR_LINK_DOWN, "both links down");
    CHECK(readmitted(a, b), "both links re-admitted by the probes");
    std::printf("a's link re-admitted with b's down count %u\n", link_of(a, 1)->peer_downs);
    CHECK(link_of(a, 1)->peer_downs == 1, "the pong that re-admitted a's link carried b's count 1");

    RawEndpoint raw;
    CHECK(raw.open(a, UCP_FEATURE_AM), "raw UCP endpoint to a's plane");
    /* stale: b's notice of that same loss, arriving after the pong */
    CHECK(down_notice(raw, a, 1), "stale notice sent");
    std::printf("after the stale notice: %s %s\n",
                link_of(a, 1)->state == DR_LINK_UP ? "up" : "down", link_of(a, 1)->reason.c_str());
    CHECK(link_of(a, 1)->state == DR_LINK_UP,
          "a notice no newer than the re-admitting pong leaves the link up");
    CHECK(mr_exchange(a, b, 0, 1, 21) == DR_OK && mr_exchange(b, a, 1, 0, 22) == DR_OK,
          "exchange after the stale notice");

    /* fresh: a later loss of the plane at b */
    CHECK(down_notice(raw, a, 2), "fresh notice sent");
    std::printf("after the fresh notice: %s %s\n",
                link_of(a, 1)->state == DR_LINK_UP ? "up" : "down", link_of(a, 1)->reason.c_str());
    CHECK(link_of(a, 1)->state == DR_LINK_DOWN &&
              link_of(a, 1)->reason == "the peer lost this plane",
          "a newer notice downs the link");
    raw.close();
    dr_mr_destroy(a);
    dr_mr_destroy(b);
    return dualrail::test::check_report();
}
