/*
 * coll/dualrail observability: ucx_mr's per-plane counters as MPI_T
 * performance variables (one value per plane), the striping weights (share of
 * each message per peer and plane) as MPI_T percentages, and a summary table
 * printed at MPI_Finalize when coll_dualrail_stats is set.
 */
#include "coll_dualrail.h"

#include <stddef.h>
#include <stdio.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "opal/util/output.h"

typedef struct counter {
    const char *name;
    const char *help;
    size_t offset; /* in dr_mr_plane_stats_t */
    int var_class;
} counter_t;

static const counter_t counters[] = {
    {"plane_tx_bytes", "Payload bytes sent on each plane", offsetof(dr_mr_plane_stats_t, tx_bytes),
     MPI_T_PVAR_CLASS_COUNTER},
    {"plane_rx_bytes", "Payload bytes received on each plane",
     offsetof(dr_mr_plane_stats_t, rx_bytes), MPI_T_PVAR_CLASS_COUNTER},
    {"plane_tx_stripes", "Segments (pieces of stripes) sent on each plane",
     offsetof(dr_mr_plane_stats_t, tx_segments), MPI_T_PVAR_CLASS_COUNTER},
    {"plane_failovers", "Times a (peer, plane) of each plane was declared down",
     offsetof(dr_mr_plane_stats_t, errors), MPI_T_PVAR_CLASS_COUNTER},
    {"plane_reroutes", "Segments moved off each plane after it failed",
     offsetof(dr_mr_plane_stats_t, reroutes), MPI_T_PVAR_CLASS_COUNTER},
    {"plane_readmissions", "Times a (peer, plane) of each plane returned to service",
     offsetof(dr_mr_plane_stats_t, readmissions), MPI_T_PVAR_CLASS_COUNTER},
    {"plane_detect_min_us", "Shortest failure detection latency of each plane (microseconds)",
     offsetof(dr_mr_plane_stats_t, min_detect_us), MPI_T_PVAR_CLASS_LOWWATERMARK},
    {"plane_detect_max_us", "Longest failure detection latency of each plane (microseconds)",
     offsetof(dr_mr_plane_stats_t, max_detect_us), MPI_T_PVAR_CLASS_HIGHWATERMARK},
    {"plane_detect_total_us",
     "Sum of failure detection latencies of each plane (microseconds; "
     "divide by plane_failovers for the average)",
     offsetof(dr_mr_plane_stats_t, total_detect_us), MPI_T_PVAR_CLASS_COUNTER},
    {"plane_endpoint_waits",
     "New endpoints on each plane that waited for UCX to read the end of "
     "a dead connection first",
     offsetof(dr_mr_plane_stats_t, endpoint_waits), MPI_T_PVAR_CLASS_COUNTER},
    {"plane_lane_tx", "Whole small messages sent on each plane's direct lane",
     offsetof(dr_mr_plane_stats_t, lane_tx), MPI_T_PVAR_CLASS_COUNTER},
    {"plane_lane_failures",
     "Direct lane connections of each plane that failed while their link was up "
     "(each took the link down)",
     offsetof(dr_mr_plane_stats_t, lane_failures), MPI_T_PVAR_CLASS_COUNTER},
};

static int nplanes(void)
{
    return mca_coll_dualrail_component.mr != NULL ? dr_mr_num_planes(mca_coll_dualrail_component.mr)
                                                  : 0;
}

static int pvar_get(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void)obj;
    const counter_t *c = pvar->ctx;
    unsigned long long *out = value;
    for (int p = 0; p < nplanes(); ++p) {
        dr_mr_plane_stats_t s;
        dr_mr_plane_stats(mca_coll_dualrail_component.mr, p, &s);
        out[p] = *(const uint64_t *)((const char *)&s + c->offset);
    }
    return OMPI_SUCCESS;
}

/* One value per plane (the variables exist once the transport does: see
 * mca_coll_dualrail_stats_register). */
static int pvar_notify(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj,
                       int *count)
{
    (void)pvar;
    (void)obj;
    if (event == MCA_BASE_PVAR_HANDLE_BIND) {
        *count = nplanes();
    }
    return OMPI_SUCCESS;
}

/* Peers are world ranks (ucx_mr ids); the weights toward this process itself are 0. */
static int npeers(void)
{
    return mca_coll_dualrail_component.mr != NULL ? mca_coll_dualrail_component.world_size : 0;
}

static double link_share(int peer, int plane)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    double share = 0;
    if (peer == cm->world_rank ||
        dr_mr_link_weight(cm->mr, (uint32_t)peer, plane, &share, NULL) != DR_OK) {
        return 0;
    }
    return share;
}

/* coll_dualrail_link_weight: npeers x nplanes values, [peer * nplanes + plane]. */
static int weight_get(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void)pvar;
    (void)obj;
    double *out = value;
    for (int q = 0; q < npeers(); ++q) {
        for (int p = 0; p < nplanes(); ++p) {
            out[q * nplanes() + p] = link_share(q, p);
        }
    }
    return OMPI_SUCCESS;
}

static int weight_notify(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj,
                         int *count)
{
    (void)pvar;
    (void)obj;
    if (event == MCA_BASE_PVAR_HANDLE_BIND) {
        *count = npeers() * nplanes();
    }
    return OMPI_SUCCESS;
}

/* coll_dualrail_plane_weight_min: per plane, its smallest share toward any other rank (a
 * plane that is slow to one node shows here; coll_dualrail_link_weight says which). */
static int weight_min_get(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void)pvar;
    (void)obj;
    double *out = value;
    for (int p = 0; p < nplanes(); ++p) {
        out[p] = 1.0;
        for (int q = 0; q < npeers(); ++q) {
            if (q != mca_coll_dualrail_component.world_rank && link_share(q, p) < out[p]) {
                out[p] = link_share(q, p);
            }
        }
    }
    return OMPI_SUCCESS;
}

/*
 * Registered when the transport starts (MPI_Init), not with the component's parameters: a
 * handle's count is fixed when it is bound and the getters write one value per plane (and
 * rank) as there are now. A tool binding between MPI_T_init_thread and MPI_Init got a count
 * of 0 and its first read wrote past its buffer (or Open MPI's own, for the counters); Open
 * MPI 4.1.4 crashes if a bind is refused instead. Before MPI_Init, and in a process whose
 * transport never started, the variables do not exist. Once per process.
 */
void mca_coll_dualrail_stats_register(void)
{
    static int registered;
    if (registered) {
        return;
    }
    registered = 1;
    (void)mca_base_component_pvar_register(
        &mca_coll_dualrail_component.super.collm_version, "link_weight",
        "Share of each message (0..1) each plane carries toward each rank of MPI_COMM_WORLD: "
        "world size x planes values, [rank * planes + plane]; 0 toward this rank itself and "
        "on a plane that is down (coll_dualrail_weights decides how they are set)",
        OPAL_INFO_LVL_4, MPI_T_PVAR_CLASS_PERCENTAGE, MCA_BASE_VAR_TYPE_DOUBLE, NULL,
        MPI_T_BIND_NO_OBJECT, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
        weight_get, NULL, weight_notify, NULL);
    (void)mca_base_component_pvar_register(
        &mca_coll_dualrail_component.super.collm_version, "plane_weight_min",
        "Smallest share of each message (0..1) each plane carries toward any other rank (one "
        "value per plane)",
        OPAL_INFO_LVL_4, MPI_T_PVAR_CLASS_PERCENTAGE, MCA_BASE_VAR_TYPE_DOUBLE, NULL,
        MPI_T_BIND_NO_OBJECT, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
        weight_min_get, NULL, pvar_notify, NULL);
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); ++i) {
        (void)mca_base_component_pvar_register(
            &mca_coll_dualrail_component.super.collm_version, counters[i].name, counters[i].help,
            OPAL_INFO_LVL_4, counters[i].var_class, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
            MPI_T_BIND_NO_OBJECT, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
            pvar_get, NULL, pvar_notify, (void *)&counters[i]);
    }
}

void mca_coll_dualrail_stats_print(void)
{
    mca_coll_dualrail_component_t *cm = &mca_coll_dualrail_component;
    if (cm->mr == NULL) {
        return;
    }
    char table[16384];
    int n = snprintf(
        table, sizeof(table),
        "coll/dualrail rank %d: plane statistics\n"
        "  plane device     tx MiB     rx MiB  tx stripes  failovers  reroutes  "
        "readmits  detect ms min/avg/max  ack msgs  acks carried  ep waits  lane tx  lane rx  "
        "lane fails\n",
        cm->world_rank);
    for (int p = 0; p < nplanes() && n < (int)sizeof(table); ++p) {
        dr_mr_plane_stats_t s;
        dr_mr_plane_stats(cm->mr, p, &s);
        char detect[64] = "-";
        if (s.errors != 0) {
            snprintf(detect, sizeof(detect), "%.0f/%.0f/%.0f", s.min_detect_us / 1e3,
                     s.total_detect_us / 1e3 / (double)s.errors, s.max_detect_us / 1e3);
        }
        n += snprintf(table + n, sizeof(table) - (size_t)n,
                      "  %-5d %-8s %10.1f %10.1f %11llu %10llu %9llu %9llu  %-20s %9llu %13llu "
                      "%9llu %8llu %8llu %11llu\n",
                      p, dr_mr_plane_device(cm->mr, p), s.tx_bytes / 1048576.0,
                      s.rx_bytes / 1048576.0, (unsigned long long)s.tx_segments,
                      (unsigned long long)s.errors, (unsigned long long)s.reroutes,
                      (unsigned long long)s.readmissions, detect, (unsigned long long)s.tx_acks,
                      (unsigned long long)s.piggybacked_acks, (unsigned long long)s.endpoint_waits,
                      (unsigned long long)s.lane_tx, (unsigned long long)s.lane_rx,
                      (unsigned long long)s.lane_failures);
    }
    /* The weights: one line per other rank, its planes' shares and learned rates. */
    if (n < (int)sizeof(table)) {
        n += snprintf(table + n, sizeof(table) - (size_t)n,
                      "  weights (%s): share of each message per peer and plane, learned rate\n"
                      "  peer  plane device     share  rate MB/s\n",
                      cm->weights_used);
    }
    for (int q = 0; q < npeers() && n < (int)sizeof(table); ++q) {
        for (int p = 0; q != cm->world_rank && p < nplanes() && n < (int)sizeof(table); ++p) {
            double share = 0, rate = 0;
            if (dr_mr_link_weight(cm->mr, (uint32_t)q, p, &share, &rate) != DR_OK) {
                break;
            }
            char r[32] = "-";
            if (rate > 0) {
                snprintf(r, sizeof(r), "%.1f", rate / 1e6);
            }
            n += snprintf(table + n, sizeof(table) - (size_t)n, "  %-5d %-5d %-8s %7.3f %10s\n", q,
                          p, dr_mr_plane_device(cm->mr, p), share, r);
        }
    }
    /* The small-message path (ucx_mr's dr_mr_work): sends kept without a request, messages
     * received without one, and of those the ones that landed in a waiting buffer. */
    if (n < (int)sizeof(table)) {
        dr_mr_work_stats_t w;
        dr_mr_work(cm->mr, &w);
        n += snprintf(
            table + n, sizeof(table) - (size_t)n,
            "  small messages: %llu sent flat, %llu taken (%llu landed in a waiting "
            "buffer)\n"
            "  weights: %llu acknowledgement(s) with delivery spans, %llu vague, %llu left "
            "out of the samples\n",
            (unsigned long long)w.flat_sends, (unsigned long long)w.takes,
            (unsigned long long)w.landed, (unsigned long long)w.span_acks,
            (unsigned long long)w.vague_acks, (unsigned long long)w.vague_skipped);
    }
    /* Calls per collective kind, summed over the communicators freed so far (all of them at
     * finalize): which collectives ran here at all, and how many went to the previous module. */
    /* The non-blocking forms (i + the kind's name) after the blocking ones. */
    int header = 0;
    for (int row = 0; row < 2 * DR_KIND_COUNT && n < (int)sizeof(table); ++row) {
        const int k = row % DR_KIND_COUNT, nb = row >= DR_KIND_COUNT;
        const uint64_t calls = nb ? cm->nb_kind_calls[k] : cm->kind_calls[k];
        if (calls == 0) {
            continue;
        }
        if (!header) {
            n += snprintf(table + n, sizeof(table) - (size_t)n,
                          "  collective             calls  handed to the previous module\n");
            header = 1;
        }
        if (n < (int)sizeof(table)) {
            char name[32];
            snprintf(name, sizeof(name), "%s%s", nb ? "i" : "", mca_coll_dualrail_kind_name(k));
            n += snprintf(
                table + n, sizeof(table) - (size_t)n, "  %-21s %6llu %6llu\n", name,
                (unsigned long long)calls,
                (unsigned long long)(nb ? cm->nb_kind_fallbacks[k] : cm->kind_fallbacks[k]));
        }
    }
    opal_output(cm->output, "%s", table);
}
