/*
 * Striping weight estimator. See include/dualrail/weights.h for what is
 * measured and why; the constants below say why each has its value.
 */
#include "dualrail/weights.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

/* A sample needs this many completions while backlogged: one 256 KiB segment at 500 Mbit/s
 * drains in ~4 ms, so one completion's timing is quantised to +-1 segment; four keep a
 * sample within ~25 % and arrive every ~17 ms on such a plane (~170 ms at 50 Mbit/s). */
constexpr uint32_t kSampleSegs = 4;
/* ...and at least this much backlogged time: completions bunched inside one progress call
 * would otherwise read as an absurd rate. */
constexpr uint64_t kSampleMinBusyUs = 2000;
/* A link backlogged this long gives a sample whatever it completed: a plane that stops (or
 * crawls) is seen within a few of these; far below stall_timeout's detection of a dead one
 * would not matter (that is the watchdog's business, not the weights'). */
constexpr uint64_t kSampleMaxBusyUs = 250000;
/* EWMA weights of a new sample. Down: a plane that slowed delays every message by its full
 * stripe, so half of the gap is closed per sample (~4 samples from 10x too high to within
 * 10 %). Up: speed-ups cost little while unseen and noise is symmetric, so a quarter. */
constexpr double kAlphaDown = 0.5;
constexpr double kAlphaUp = 0.25;
/* Growth of a link with spare capacity per update (updates come every ~25 ms of traffic):
 * x1.25 takes a re-admitted plane (1/32) back to an equal share in ~16 updates, ~0.5 s
 * with the wait below. */
constexpr double kGrow = 1.25;
/* A link has spare capacity when it carried data yet was backlogged under this fraction of
 * the most backlogged other link's time... */
constexpr double kSpareFrac = 0.25;
/* ...and that other link was backlogged at least this fraction of the update interval (a
 * real bottleneck, not a stray wait). */
constexpr double kBottleneckFrac = 0.1;
/* ...for this many updates in a row (75 ms): with noisy planes the bottleneck moves from one
 * to the other between updates, and growing on every such flip inflated both estimates. */
constexpr uint32_t kSpareUpdates = 3;
/* Growth stops at this multiple of the best other rate: a link that never backlogs (its
 * traffic always absorbed) must not drift to absurd numbers. Twice the trickle ratio: by
 * then the other links are at their trickle anyway, so the cap never limits a real gap. */
constexpr double kGrowCap = 2.0 * DR_WEIGHTS_TRICKLE;
/* Applied shares change only when one moves by more than this fraction of itself: equal
 * planes measure within a few per cent of each other, and re-striping on that noise would
 * cost more than it gains (0.5 -> 0.45 costs at most ~10 % on the slower plane, and noise
 * of that size is what the EWMA leaves). Relative, so that a trickle still follows its
 * plane. */
constexpr double kDeadBand = 0.1;
/* A smaller gap that persists this many updates (200 ms) is real, not noise: applied, so
 * that shares settle within ~2 % of the rates instead of sticking at the band's edge. */
constexpr double kSettleBand = 0.02;
constexpr uint32_t kSettleUpdates = 8;

void fold(dr_wlink_t *l, uint64_t now)
{
    if (l->busy && now > l->mark_us) {
        const uint64_t dt = now - l->mark_us;
        l->acc_busy_us += dt;
        l->tick_busy_us += dt;
        l->mark_us = now;
    }
}

/* Shares from rates: unknown (0) rates count as the best known one (they get measured
 * soon), every live rate at least the best / trickle. */
void shares_from_rates(const double *rates, const int *up, int n, double *shares)
{
    double best = 0;
    int live = 0;
    for (int i = 0; i < n; ++i) {
        if (up[i]) {
            ++live;
            if (rates[i] > best) {
                best = rates[i];
            }
        }
    }
    double r[DR_MAX_PLANES];
    double sum = 0;
    for (int i = 0; i < n; ++i) {
        r[i] = 0;
        if (!up[i]) {
            continue;
        }
        if (best <= 0) {
            r[i] = 1; /* nothing measured: equal */
        } else {
            r[i] = rates[i] > 0 ? rates[i] : best;
            if (r[i] < best / DR_WEIGHTS_TRICKLE) {
                r[i] = best / DR_WEIGHTS_TRICKLE;
            }
        }
        sum += r[i];
    }
    for (int i = 0; i < n; ++i) {
        shares[i] = live != 0 && sum > 0 ? r[i] / sum : 0;
    }
}

} // namespace

extern "C" dr_status_t dr_weights_parse(const char *text, int nplanes, dr_weights_mode_t *mode,
                                        uint32_t *ratios, char *err, size_t errlen)
{
    auto fail = [&](const char *why) {
        if (err != nullptr && errlen != 0) {
            snprintf(err, errlen, "invalid weights '%s': %s", text ? text : "(null)", why);
        }
        return DR_ERR_INVALID;
    };
    if (mode == nullptr || nplanes < 1 || nplanes > DR_MAX_PLANES) {
        return fail("bad arguments");
    }
    if (text == nullptr || text[0] == '\0' || strcmp(text, "adaptive") == 0) {
        *mode = DR_WEIGHTS_ADAPTIVE;
        return DR_OK;
    }
    if (strcmp(text, "equal") == 0) {
        *mode = DR_WEIGHTS_EQUAL;
        return DR_OK;
    }
    uint32_t v[DR_MAX_PLANES];
    int k = 0;
    const char *s = text;
    for (;;) {
        if (*s < '0' || *s > '9') {
            return fail("expected adaptive, equal, or one positive integer ratio per plane "
                        "separated by ':' (e.g. 2:1)");
        }
        char *end = nullptr;
        unsigned long x = strtoul(s, &end, 10);
        if (x == 0 || x > 1000000) {
            return fail("each ratio must be between 1 and 1000000");
        }
        if (k == nplanes) {
            break; /* too many: reported below */
        }
        v[k++] = (uint32_t)x;
        s = end;
        if (*s == '\0') {
            break;
        }
        if (*s != ':') {
            return fail("expected adaptive, equal, or one positive integer ratio per plane "
                        "separated by ':' (e.g. 2:1)");
        }
        ++s;
    }
    if (k != nplanes || *s != '\0') {
        char why[96];
        snprintf(why, sizeof(why), "%s ratios for %d plane(s)",
                 k < nplanes ? "too few" : "too many", nplanes);
        return fail(why);
    }
    *mode = DR_WEIGHTS_FIXED;
    if (ratios != nullptr) {
        memcpy(ratios, v, sizeof(uint32_t) * (size_t)k);
    }
    return DR_OK;
}

extern "C" void dr_weights_link_init(dr_wlink_t *l)
{
    memset(l, 0, sizeof(*l));
    l->up = 1;
}

extern "C" void dr_weights_link_pending(dr_wlink_t *l, uint64_t now_us)
{
    if (!l->busy) {
        l->busy = 1;
        l->mark_us = now_us;
    }
}

extern "C" void dr_weights_link_done(dr_wlink_t *l, uint64_t bytes, uint64_t now_us,
                                     uint32_t pending_left)
{
    l->tick_bytes += bytes;
    if (!l->busy) {
        return; /* completed at once: says nothing of the plane's pace */
    }
    fold(l, now_us);
    l->acc_bytes += bytes;
    ++l->acc_segs;
    if (pending_left == 0) {
        l->busy = 0;
    }
}

extern "C" void dr_weights_link_down(dr_wlink_t *l)
{
    const double rate = l->rate;
    dr_weights_link_init(l);
    l->up = 0;
    l->rate = rate; /* kept for the record; re-admission restarts it */
}

extern "C" void dr_weights_link_readmit(dr_wlink_t *l, const dr_wlink_t *others, int n)
{
    double best = 0;
    for (int i = 0; i < n; ++i) {
        if (&others[i] != l && others[i].up && others[i].rate > best) {
            best = others[i].rate;
        }
    }
    dr_weights_link_init(l);
    l->rate = best > 0 ? best / DR_WEIGHTS_READMIT : 0;
}

extern "C" int dr_weights_update(dr_wlink_t *links, int n, uint64_t now_us, uint64_t tick_us)
{
    if (n < 1 || n > DR_MAX_PLANES) {
        return 0;
    }
    int sampled[DR_MAX_PLANES] = {0};
    for (int i = 0; i < n; ++i) {
        dr_wlink_t *l = &links[i];
        if (!l->up) {
            continue;
        }
        fold(l, now_us);
        const bool enough = (l->acc_segs >= kSampleSegs && l->acc_busy_us >= kSampleMinBusyUs) ||
                            l->acc_busy_us >= kSampleMaxBusyUs;
        if (!enough) {
            continue;
        }
        double s = (double)l->acc_bytes * 1e6 / (double)l->acc_busy_us;
        if (s < 1) {
            s = 1; /* stopped: known to be (almost) nothing, not unknown */
        }
        if (l->rate <= 0) {
            l->rate = s;
        } else {
            l->rate += (s < l->rate ? kAlphaDown : kAlphaUp) * (s - l->rate);
        }
        ++l->samples;
        sampled[i] = 1;
        l->spare = 0;
        l->acc_bytes = l->acc_busy_us = 0;
        l->acc_segs = 0;
    }
    /* Spare capacity: data carried, hardly ever backlogged, while another link was. */
    for (int i = 0; i < n; ++i) {
        dr_wlink_t *l = &links[i];
        if (!l->up || sampled[i] || l->tick_bytes == 0) {
            l->spare = 0;
            continue;
        }
        uint64_t other_busy = 0;
        double other_best = 0;
        for (int j = 0; j < n; ++j) {
            if (j != i && links[j].up) {
                if (links[j].tick_busy_us > other_busy) {
                    other_busy = links[j].tick_busy_us;
                }
                if (links[j].rate > other_best) {
                    other_best = links[j].rate;
                }
            }
        }
        if ((double)other_busy < kBottleneckFrac * (double)tick_us ||
            (double)l->tick_busy_us >= kSpareFrac * (double)other_busy) {
            l->spare = 0;
            continue;
        }
        if (++l->spare >= kSpareUpdates) {
            /* Never measured: it counts as the best other one (shares_from_rates), so
             * it grows from there. */
            const double base = l->rate > 0 ? l->rate : other_best;
            if (base <= 0) {
                continue;
            }
            double r = base * kGrow;
            if (other_best > 0 && r > kGrowCap * other_best) {
                r = kGrowCap * other_best;
            }
            if (r > l->rate) {
                l->rate = r;
            }
        }
    }
    for (int i = 0; i < n; ++i) {
        links[i].tick_bytes = links[i].tick_busy_us = 0;
    }
    double rates[DR_MAX_PLANES], shares[DR_MAX_PLANES];
    int up[DR_MAX_PLANES];
    for (int i = 0; i < n; ++i) {
        rates[i] = links[i].rate;
        up[i] = links[i].up;
    }
    shares_from_rates(rates, up, n, shares);
    bool change = false;
    for (int i = 0; i < n; ++i) {
        const double d = shares[i] - links[i].share;
        const double big = shares[i] > links[i].share ? shares[i] : links[i].share;
        /* A link that came or went always re-splits. */
        if ((links[i].share > 0) != (shares[i] > 0) || d > kDeadBand * big ||
            d < -kDeadBand * big) {
            change = true;
        }
        if (d > kSettleBand * big || d < -kSettleBand * big) {
            if (++links[i].drift >= kSettleUpdates) {
                change = true;
            }
        } else {
            links[i].drift = 0;
        }
    }
    if (!change) {
        return 0;
    }
    for (int i = 0; i < n; ++i) {
        links[i].share = shares[i];
        links[i].drift = 0;
    }
    return 1;
}

extern "C" void dr_weights_reshare(dr_wlink_t *links, int n)
{
    if (n < 1 || n > DR_MAX_PLANES) {
        return;
    }
    double rates[DR_MAX_PLANES], shares[DR_MAX_PLANES];
    int up[DR_MAX_PLANES];
    for (int i = 0; i < n; ++i) {
        rates[i] = links[i].rate;
        up[i] = links[i].up;
    }
    shares_from_rates(rates, up, n, shares);
    for (int i = 0; i < n; ++i) {
        links[i].share = shares[i];
    }
}

extern "C" void dr_weights_fixed_shares(dr_wlink_t *links, int n, const uint32_t *ratios)
{
    double sum = 0;
    for (int i = 0; i < n; ++i) {
        if (links[i].up) {
            sum += ratios != nullptr ? (double)ratios[i] : 1.0;
        }
    }
    for (int i = 0; i < n; ++i) {
        links[i].share = links[i].up && sum > 0 ? (ratios != nullptr ? ratios[i] : 1.0) / sum : 0;
    }
}

extern "C" void dr_weights_to_u32(const dr_wlink_t *links, int n, uint32_t *out)
{
    for (int i = 0; i < n; ++i) {
        if (!links[i].up || links[i].share <= 0) {
            out[i] = 0;
            continue;
        }
        const double w = links[i].share * DR_WEIGHTS_SCALE + 0.5;
        out[i] = w < 1 ? 1 : (uint32_t)w;
    }
}

extern "C" void dr_weights_shares_for_rates(const double *rates, int n, double *shares)
{
    if (n < 1 || n > DR_MAX_PLANES) {
        return;
    }
    int up[DR_MAX_PLANES];
    for (int i = 0; i < n; ++i) {
        up[i] = 1;
    }
    shares_from_rates(rates, up, n, shares);
}
