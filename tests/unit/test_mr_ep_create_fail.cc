/*
 * A link whose endpoint cannot be made at all (ucp_ep_create refuses the peer's address at
 * once) goes down, and is probed again after the backoff like any other down link.
 *
 * Before the fix the "endpoint failed" flag set for it outlived the declaration (no
 * endpoint to close, so nothing cleared it): every progress call then treated the link as a
 * failed probe and moved its next probe one backoff further, so this side never probed it
 * again, and the plane stayed down until the peer happened to ping it.
 *
 * Two contexts on loopback: a is given, for b's one plane, the address of a UCP worker with
 * no transport a can reach (UCX_TLS=self), so its first send to b fails the link (and, the
 * only plane, the peer); b's real address is then put back. Within 5 s a's watchdog must
 * have probed and re-admitted the link, and a and b exchange again. b never sends on its
 * own meanwhile (it would ping a and re-admit the link from its side). Every wait bounded.
 */
#include <ucp/api/ucp.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../support/check.hpp"
#include "../support/mr_pair.hpp"
#include "mr_internal.hpp"

using dualrail::mr::Link;
using dualrail::mr::Mr;
using dualrail::test::mr_exchange;
using dualrail::test::mr_pair_open;
using dualrail::test::now_s;

namespace {

/* The worker address of a context that has only UCX's "self" transport. */
struct SelfOnly {
    ucp_context_h ctx = nullptr;
    ucp_worker_h w = nullptr;
    std::vector<uint8_t> addr;

    bool open()
    {
        if (!dualrail::test::ucp_open(UCP_FEATURE_AM, "self", nullptr, &ctx, &w)) {
            return false;
        }
        addr = dualrail::test::worker_address(w);
        return !addr.empty();
    }

    void close()
    {
        if (w != nullptr) {
            ucp_worker_destroy(w);
        }
        if (ctx != nullptr) {
            ucp_cleanup(ctx);
        }
    }
};

} // namespace

int main()
{
    dr_mr_config_t cfg;
    dr_test_loopback_config(&cfg);
    cfg.readmit_min = 0.05; /* the first probe 50 ms after the down */
    cfg.readmit_max = 0.2;
    dr_mr_t *a = nullptr, *b = nullptr;
    SelfOnly self;
    if (mr_pair_open(&a, &b, &cfg) != 0 || !self.open()) {
        std::printf("FAIL: cannot open two contexts and a self-only worker\n");
        return 1;
    }
    Mr *ma = a;
    Link *l = ma->peers[1]->links[0].get();
    const std::vector<uint8_t> real = ma->peers[1]->addrs[0];
    ma->peers[1]->addrs[0] = self.addr; /* before a's first endpoint to b */

    const dr_status_t st = dualrail::test::mr_send_big(a, 1);
    std::printf("the send to an unreachable address: %s; the link %s (%s)\n", dr_status_str(st),
                l->state == DR_LINK_UP ? "up" : "down", l->reason.c_str());
    CHECK(st == DR_ERR_PEER_UNREACHABLE, "a send over an endpoint that cannot be made fails");
    CHECK(l->state == DR_LINK_DOWN, "and downs the link");

    ma->peers[1]->addrs[0] = real;
    bool up = false;
    for (double end = now_s() + 5; !up && now_s() < end;) {
        dr_mr_progress(a);
        dr_mr_progress(b); /* answers a's probe; sends nothing of its own */
        up = l->state == DR_LINK_UP;
    }
    std::printf("with the real address back: the link %s, %u probe(s)\n", up ? "up" : "down",
                l->probe_id);
    CHECK(up, "the watchdog probes the link again and re-admits it");
    CHECK(mr_exchange(a, b, 0, 1, 21) == DR_OK && mr_exchange(b, a, 1, 0, 22) == DR_OK,
          "an exchange each way after the re-admission");
    dr_mr_destroy(a);
    dr_mr_destroy(b);
    self.close();
    return dualrail::test::check_report();
}
