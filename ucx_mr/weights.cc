/*
 * Striping weight estimator. See include/dualrail/weights.h for what is
 * measured and why; the constants below say why each has its value.
 */
#include "dualrail/weights.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

/* A sample covers at least this much delivery time: a span is read when the receiver
 * progresses, and on a busy machine (the lab runs four ranks and the shaping on two cores)
 * single spans come out anywhere from half to twice the truth; 60 ms holds ten or more
 * messages on a fast plane, whose median is steady, and still gives ~15 samples a second...
 */
constexpr uint64_t kSampleBusyUs = 60000;
/* ...of at least this many messages: on a loaded machine one descheduled receiver stretches
 * a single span past 60 ms, and samples of one or two messages read a plane at a tenth or
 * at twice its rate (seen on equal planes at a load of 15 on two cores)... */
constexpr uint32_t kSampleMinMsgs = 4;
/* ...or this many messages (whose rates a sample keeps: the median is taken of them)... */
constexpr uint32_t kSampleMsgs = 16;
/* ...or whatever came in this long: a fast plane beside a crawling one sees a message a
 * second, and must still be measured. */
constexpr uint64_t kSampleAgeUs = 250000;
constexpr uint32_t kMaxMsgs = 16;
static_assert(kMaxMsgs == sizeof(dr_wlink_t::msg_rate) / sizeof(double), "sample size");
/* EWMA weights of a new sample. Down: a plane that slowed delays every message by its full
 * stripe, so a third of the gap is closed per sample (~6 samples, under half a second, from
 * 10x too high to within 10 %). Up: speed-ups cost little while unseen, so a quarter. */
constexpr double kAlphaDown = 0.35;
constexpr double kAlphaUp = 0.25;
/* The first samples after (re-)admission replace the cautious start quickly. */
constexpr double kAlphaFirst = 0.5;
constexpr uint32_t kFirstSamples = 4;
/* A link at its cautious start (no sample since its (re-)admission) climbs faster where it
 * has room: a balance sample that finds it well early moves it as far as finishing with the
 * reference would need, and spare-capacity growth steps at every update that delivered
 * something, by how much earlier it finished; both at least x1.5 (kGrowFirst) and at most
 * this factor a step. Growing x1.5 per balance sample (8 messages or 250 ms) and per two
 * updates with bytes left a plane re-admitted under an alltoall, whose links see a message
 * per call, below 0.9x of two planes for 4.8-5.6 s after the heal on the lab (1.9 s with
 * both steps, 0.9 s with equal weights); the allreduce ring's 1.9 s was 1.3-1.9 s after. */
constexpr double kBalFirstJump = 4.0;
/* Balance (a link too short to time, beside a timed one). A sample is the median of this
 * many messages (a finish is read when the receiver progresses: on a busy machine single
 * ones are off by a millisecond or more, a tenth of a stripe's time). */
constexpr uint32_t kBalMsgs = 8;
static_assert(kBalMsgs <= sizeof(dr_wlink_t::bal_split) / sizeof(double), "balance sample");
/* A step towards finishing together is this power of the time ratio that would have done it
 * (on an idle shaped link a burst of ~4 ms worth goes at once on every plane, which takes
 * the same time off every finish and makes their difference overstate the split's error),
 * and at most this factor: on a busy link the finishes mostly carry the queue of the plane
 * that is behind (the pipeline keeps it busy; it drains only over several messages after a
 * re-split), so the size of the difference says little and the step is nearly one by its
 * sign. Measured on the lab at 500/250 Mbit/s (share of plane B, which wants 0.33; the
 * variants in one run each): steps of up to 2x hunted between 0.14 and 0.54, 1.25x between
 * 0.26 and 0.41; 5 % stays mostly within 0.25-0.37 (averages 0.30-0.35 per link) and gives
 * the caps' payload limit as fixed 2:1 weights do in the same runs (0.83-0.89 each, on a
 * loaded machine). A step is taken from the messages' own split, not from the rate, so
 * nothing winds up, and applied at once (the dead band would hold steps this small for
 * good). */
constexpr double kBalGain = 0.5;
constexpr double kBalStep = 1.05;
/* A balance sample's new share is applied when it moves by more than this fraction (a 5 %
 * step moves a share by (1 - share) x 5 %). */
constexpr double kBalApply = 0.02;
/* A link finishing earlier than the reference by more than this fraction of the reference's
 * stripe time has room to spare (at a re-admitted link's cautious start: grown fast)... */
constexpr double kBalSpare = 0.5;
/* ...one finishing later by more than a whole stripe time is the one with the queue (busy
 * all the time, so what it delivered per second is its rate: a plane that became slower
 * is followed at once, not at 5 % a step). */
constexpr double kBalLag = 1.0;
/* A lagging link is cut so only when it delivered under this fraction of its split's rate:
 * queues swing at the balance too, and on a loaded machine the sender reads
 * acknowledgements late (a balanced plane was cut to 0.22 of each message at 500/250 that
 * way); the small steps follow small lags well enough. */
constexpr double kBalCut = 0.6;
/* A link finishing earlier than the reference by more than this many of the reference's
 * stripe times on kBalFarRun samples in a row has become faster (in the lab, a plane raised
 * from 50 to 500 Mbit/s read 1-6, mostly over 3, on every sample for seconds; at its balance
 * a single sample gets there now and then, when a queue swings; a threshold of 3 left a plane
 * raised from 250 to 500 Mbit/s below 0.38 of each message for over 3.5 s): it climbs by
 * growing steps.
 * An overshoot makes it the lagging one, taken at what it delivered. */
constexpr double kBalFar = 2.0;
constexpr uint32_t kBalFarRun = 2;
constexpr double kBalFarStep = 1.25;
/* Growth of a link with spare capacity and no sample (a stripe too short to time), one
 * step per kSpareUpdates updates, and its mirror, the shrinking of a straggler (by its lag,
 * at least this much, at most half): 15 % every 50 ms keeps the hunting of an untimed plane
 * around its balance within 15 % and still moves it 4x in half a second. */
constexpr double kGrow = 1.15;
/* A link not sampled since its (re-)admission grows faster: the cautious start is a floor
 * to climb from, not a measurement (1/16 to a timed stripe in ~6 steps, 0.3 s). */
constexpr double kGrowFirst = 1.5;
/* A link has spare capacity when it finishes its stripes in under this fraction of the time
 * the slowest other link takes (balanced links finish together; finishes count from the
 * message's first arrival, which shrinks the smaller ones, so not much lower)... */
constexpr double kSpareFrac = 0.5;
/* ...and that other link was delivering for at least this fraction of the update interval
 * (a real bottleneck, not a stray message). */
constexpr double kBottleneckFrac = 0.1;
/* ...for this many updates in a row (50 ms), and again as many before the next step. */
constexpr uint32_t kSpareUpdates = 2;
/* A link lags when it finishes after this multiple of the slowest other link's time. */
constexpr double kLagFactor = 1.15;
/* Growth stops at this multiple of the best other rate: a link that is never sampled must
 * not drift to absurd numbers. Twice the trickle ratio: by then the other links are at
 * their trickle anyway, so the cap never limits a real gap. */
constexpr double kGrowCap = 2.0 * DR_WEIGHTS_TRICKLE;
/* Applied shares change only when one moves by more than this fraction of itself: re-striping
 * on the noise the EWMA leaves costs more than it gains (equal planes swung between 0.3 and
 * 0.7 in the lab with 10 %). Relative, so that a trickle still follows its plane. */
constexpr double kDeadBand = 0.15;
/* A smaller gap that persists this many updates (0.5 s) is real, not noise: applied, so
 * that shares settle within ~4 % of the rates instead of sticking at the band's edge. */
constexpr double kSettleBand = 0.04;
constexpr uint32_t kSettleUpdates = 20;

/* One step of a link's cautious start (kBalFirstJump): the factor wanted, kept within
 * kGrowFirst .. kBalFirstJump. */
double first_step(double want)
{
    return std::clamp(want, kGrowFirst, kBalFirstJump);
}

/* The median of v[0..m-1], m >= 1 (v is sorted in place). */
double median(double *v, uint32_t m)
{
    std::sort(v, v + m);
    return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
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

extern "C" void dr_weights_link_delivered(dr_wlink_t *l, uint64_t bytes, uint64_t timed,
                                          uint64_t span_us, uint64_t finish_us)
{
    if (!l->up || bytes == 0) {
        return;
    }
    l->tick_bytes += bytes;
    l->tick_busy_us += finish_us;
    if (span_us == 0 || timed == 0) {
        return; /* carried, not timed */
    }
    l->tick_timed += timed;
    if (l->acc_msgs < sizeof(l->msg_rate) / sizeof(l->msg_rate[0])) {
        l->msg_rate[l->acc_msgs] = (double)timed * 1e6 / (double)span_us;
    }
    l->acc_busy_us += span_us;
    ++l->acc_msgs;
}

extern "C" void dr_weights_message(dr_wlink_t *links, int n, const uint64_t *bytes,
                                   const uint64_t *timed, const uint64_t *span_us,
                                   const uint64_t *finish_us, uint64_t now_us)
{
    if (n < 1 || n > DR_MAX_PLANES) {
        return;
    }
    int ref = -1;
    for (int i = 0; i < n; ++i) {
        dr_weights_link_delivered(&links[i], bytes[i], timed[i], span_us[i], finish_us[i]);
        if (links[i].up && bytes[i] != 0 && timed[i] != 0 && span_us[i] != 0 && links[i].rate > 0 &&
            finish_us[i] != 0 && (ref < 0 || bytes[i] > bytes[ref])) {
            ref = i;
        }
    }
    if (ref < 0) {
        return;
    }
    /* Finishes count from the same instant (the message's first arrival), so their difference
     * says which plane held the message up. Noted for every other link that carried bytes
     * untimed: its split and how much earlier it finished, in the reference's stripe times,
     * and when, for what it delivered per second. */
    for (int i = 0; i < n; ++i) {
        dr_wlink_t *l = &links[i];
        if (i == ref || !l->up || bytes[i] == 0 || (timed[i] != 0 && span_us[i] != 0)) {
            continue;
        }
        if (l->bal_msgs < kBalMsgs) {
            const double t_ref = (double)bytes[ref] / links[ref].rate * 1e6;
            l->bal_split[l->bal_msgs] = (double)bytes[i] / (double)bytes[ref];
            l->bal_err[l->bal_msgs] = ((double)finish_us[ref] - (double)finish_us[i]) / t_ref;
        }
        if (l->bal_msgs == 0) {
            l->bal_first_us = now_us;
            l->bal_bytes = 0;
        } else {
            l->bal_bytes += bytes[i];
        }
        l->bal_last_us = now_us;
        ++l->bal_msgs;
        l->bal_ref = ref;
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

extern "C" int dr_weights_update(dr_wlink_t *links, int n, uint64_t tick_us)
{
    if (n < 1 || n > DR_MAX_PLANES) {
        return 0;
    }
    int sampled[DR_MAX_PLANES] = {0};
    int balanced[DR_MAX_PLANES] = {0}; /* balance samples: applied past the settle band */
    for (int i = 0; i < n; ++i) {
        dr_wlink_t *l = &links[i];
        if (!l->up) {
            continue;
        }
        if (l->acc_msgs != 0) {
            l->acc_age_us += tick_us;
        }
        if (l->bal_msgs != 0) {
            l->bal_age_us += tick_us;
        }
        if (l->bal_msgs >= kBalMsgs || (l->bal_msgs != 0 && l->bal_age_us >= kSampleAgeUs)) {
            /* Balance sample: the messages' split (bytes over the reference's), d, how much
             * earlier than the reference this link finished, in the reference's stripe
             * times, and what it delivered per second (the acknowledgements of a link that
             * lags come at its pace: its bytes over their intervals). */
            const uint32_t m = std::min<uint32_t>(l->bal_msgs, kBalMsgs);
            const double split = median(l->bal_split, m);
            const double d = median(l->bal_err, m);
            const double ref_rate = links[l->bal_ref].up ? links[l->bal_ref].rate : 0;
            const double delivered =
                l->bal_last_us > l->bal_first_us
                    ? (double)l->bal_bytes * 1e6 / (double)(l->bal_last_us - l->bal_first_us)
                    : 0;
            l->bal_msgs = 0;
            l->bal_age_us = 0;
            /* A link timed meanwhile is measured by its spans: the notes are dropped.
             * (Cutting a timed plane that lags to what it delivered, meant for a plane
             * cut to a tenth, re-split equal planes on their queues' swings: 25-30 share
             * changes per 8 s run in the lab went to 37-48.) */
            if (l->acc_msgs == 0 && l->tick_timed == 0 && ref_rate > 0) {
                l->spare = 0;
                sampled[i] = balanced[i] = 1;
                if (l->samples == 0 && d > kBalSpare) {
                    /* The cautious start of a re-admitted link with room to spare: towards
                     * finishing with the reference (its time scaled by 1 - d), by at least
                     * what growth takes (x1.5) and at most kBalFirstJump. */
                    const double from = std::max(l->rate / ref_rate, split);
                    l->bal_ratio =
                        from * first_step(d < 1 ? split / (1 - d) / from : kBalFirstJump);
                    continue;
                }
                /* Towards finishing with the reference: the link's time scaled by
                 * 1 / (1 - d) would have done it (a partial step of that, at most
                 * kBalStep, or growing steps when far too early twice in a row: not a
                 * queue's swing but a plane that became faster); a lagging link with the
                 * queue is taken at what it delivered, at most halved. */
                l->bal_far = d > kBalFar ? l->bal_far + 1 : 0;
                const double up =
                    l->bal_far >= kBalFarRun
                        ? std::min(2.0,
                                   std::pow(kBalFarStep, (double)(l->bal_far - kBalFarRun + 1)))
                        : kBalStep;
                const double c = d >= 0.5 ? up : std::pow(1.0 / (1.0 - d), kBalGain);
                double x = split * (c > up ? up : c < 1 / kBalStep ? 1 / kBalStep : c);
                if (d < -kBalLag && delivered > 0 && delivered < kBalCut * x * ref_rate &&
                    links[l->bal_ref].samples >= kFirstSamples) {
                    x = std::max(delivered / ref_rate, split / 2);
                }
                l->bal_ratio = x;
                ++l->samples;
                continue;
            }
        }
        const bool enough = l->acc_msgs != 0 &&
                            ((l->acc_busy_us >= kSampleBusyUs && l->acc_msgs >= kSampleMinMsgs) ||
                             l->acc_msgs >= kSampleMsgs || l->acc_age_us >= kSampleAgeUs);
        if (!enough) {
            continue;
        }
        const double s = median(l->msg_rate, std::min<uint32_t>(l->acc_msgs, kMaxMsgs));
        if (l->rate <= 0) {
            l->rate = s;
        } else {
            const double up = l->samples < kFirstSamples ? kAlphaFirst : kAlphaUp;
            l->rate += (s < l->rate ? kAlphaDown : up) * (s - l->rate);
        }
        ++l->samples;
        sampled[i] = 1;
        l->spare = 0;
        l->acc_busy_us = l->acc_age_us = 0;
        l->acc_msgs = 0;
        l->bal_ratio = 0; /* timed now: its own span says more than finishes */
    }
    /* A balanced link's rate is its ratio to its reference's, whatever the reference's
     * samples did since (a reference misread on a loaded machine must not shift the split
     * it was balanced with). */
    for (int i = 0; i < n; ++i) {
        dr_wlink_t *l = &links[i];
        if (l->up && l->bal_ratio > 0 && l->bal_ref >= 0 && l->bal_ref < n && l->bal_ref != i &&
            links[l->bal_ref].up && links[l->bal_ref].rate > 0) {
            l->rate = l->bal_ratio * links[l->bal_ref].rate;
        }
    }
    /* Spare capacity: data delivered in a fraction of the time another link took. */
    for (int i = 0; i < n; ++i) {
        dr_wlink_t *l = &links[i];
        if (!l->up || sampled[i] || l->tick_timed != 0 || l->bal_msgs != 0 || l->bal_ratio > 0) {
            l->spare = l->lag = 0; /* measured, or about to be, or balanced: samples decide */
            continue;
        }
        if (l->tick_bytes == 0) {
            continue; /* nothing finished this time (a slow plane's message spans updates) */
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
        /* The straggler: a link that is not sampled (its stripes stay short) and finishes
         * well after the others is over-weighted; shrunk the way growth goes up. */
        if (l->rate > 0 && other_busy != 0 &&
            (double)l->tick_busy_us > kLagFactor * (double)other_busy) {
            l->spare = 0;
            if (++l->lag >= kSpareUpdates) {
                /* By the lag itself, at most halved: a plane that became ten times slower
                 * takes a few steps, not fifteen, each as long as its slow messages. */
                double f = (double)other_busy / (double)l->tick_busy_us;
                f = f < 0.5 ? 0.5 : f > 1 / kGrow ? 1 / kGrow : f;
                l->lag = 0;
                l->rate *= f;
            }
            continue;
        }
        l->lag = 0;
        if ((double)other_busy < kBottleneckFrac * (double)tick_us ||
            (double)l->tick_busy_us >= kSpareFrac * (double)other_busy) {
            l->spare = 0;
            continue;
        }
        /* At its cautious start a link grows at every update that delivered something,
         * by how much earlier it finished (the square root of the finishes' ratio: they
         * count from the message's first arrival, which shrinks the smaller one; at least
         * kGrowFirst, at most kBalFirstJump): where a link sees a message only now and then
         * (an alltoall: one per call), two such updates per x1.5 step took 2.2 s of the
         * model's sparse return (unit_weights), 0.18 s so. */
        const bool first = l->samples == 0;
        if (++l->spare >= (first ? 1u : kSpareUpdates)) {
            l->spare = 0;
            /* Never measured: it counts as the best other one (shares_from_rates), so
             * it grows from there. */
            const double base = l->rate > 0 ? l->rate : other_best;
            if (base <= 0) {
                continue;
            }
            const double step =
                !first ? kGrow
                       : first_step(l->tick_busy_us > 0
                                        ? std::sqrt((double)other_busy / (double)l->tick_busy_us)
                                        : kBalFirstJump);
            double r = base * step;
            if (other_best > 0 && r > kGrowCap * other_best) {
                r = kGrowCap * other_best;
            }
            if (r > l->rate) {
                l->rate = r;
            }
        }
    }
    for (int i = 0; i < n; ++i) {
        links[i].tick_bytes = links[i].tick_busy_us = links[i].tick_timed = 0;
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
        /* A balance step is damped already, and one held by a band would never grow past
         * it (it is taken from the split the messages had): applied unless tiny. */
        if (balanced[i] && (d > kBalApply * big || d < -kBalApply * big)) {
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

extern "C" int dr_weights_span_vague(uint64_t first_late_us, uint64_t last_late_us,
                                     uint64_t span_us)
{
    return span_us != 0 && (first_late_us + last_late_us) * DR_WEIGHTS_SPAN_SLACK > span_us;
}

extern "C" int dr_weights_rate_moved(double before, double after)
{
    return before > 0 && std::fabs(after - before) > DR_WEIGHTS_MOVED * before;
}
