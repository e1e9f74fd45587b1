/*
 * dualrail-check's parts (tools/dualrail_check.cc says what the program checks): the
 * state every check shares (Env: this node's links, the nodes' published addresses, the
 * findings), the helpers they share, and one entry point per check. One file per check:
 * planes.cc (which planes, one ucx_mr context per link), reach.cc, isolation.cc,
 * bandwidth.cc.
 */
#pragma once

/* the C API only: no C++ bindings to link */
#define OMPI_SKIP_MPICXX  1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dualrail/ucx_mr.h"

namespace drcheck {

constexpr int kNameMax = 64;

struct Options {
    std::string planes, include, exclude;
    double timeout = 5.0;
    double bw_time = 0.3;
    size_t bw_size = 1 << 20;
    int bw_window = 4;
    double tolerance = 0.25;
    int iso_peers = 8;
    bool no_bw = false, no_iso = false;
    int verbose = 0;
};

/* One rail of one plane on this node. */
struct Link {
    int plane = 0, rail = 0;
    std::string device, netdev, ipv4;
    dr_mr_t *mr = nullptr;
    std::vector<std::string> log;
};

/* What every node publishes about one of its links. */
struct LinkPub {
    char device[kNameMax];
    char netdev[kNameMax];
    char ipv4[16];
};

struct Env {
    Options o;
    MPI_Comm comm = MPI_COMM_NULL; /* one rank per node */
    int me = 0, n = 0;
    std::vector<std::string> names; /* node names by index */
    std::vector<Link> links;        /* this node's */
    int nplanes = 0;
    std::vector<std::vector<LinkPub>> pub; /* [node][link] */
    std::vector<std::string> findings;     /* root only */
};

/* ------------------------------------------------------------------ helpers (common.cc) */

double now_s();
/* 50 us asleep: a wait loop's pause between polls. */
void nap();
std::string strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "1.23 Gbit/s" or "456.7 Mbit/s" */
std::string rate_text(double bps);
/* ucx_mr's log callback: collects a link's lines (arg: its std::vector<std::string>). */
void mr_log(int level, const char *msg, void *arg);
/* A barrier that keeps every plane progressing while it waits (a peer may still
 * need our acknowledgements); bounded. */
bool barrier(Env &e, double limit);
/* "plane 1 (ethB)" or "plane 1 rail 2 (mlx5_3:1)" */
std::string plane_text(const Env &e, int l);

/* ------------------------------------------------------------------ the checks */

/* planes.cc. Returns false (and has printed why on rank 0 of the node set) when the
 * check cannot go on; *rc is then the exit status. */
bool setup_planes(Env &e, std::string &header, int *rc);
/* planes.cc: one ucx_mr context per link, addresses exchanged. */
bool setup_contexts(Env &e, int *rc);

/* reach.cc. reach[l][i*n+j]: i's ping to j on link l was acknowledged (a round trip on
 * that link). */
std::vector<std::vector<uint8_t>> check_reach(Env &e);
void report_reach(Env &e, const std::vector<std::vector<uint8_t>> &reach);

/* isolation.cc. obs[src_link][peer*L + dst_link]: an ARP probe from our src_link port
 * for the peer's dst_link address was answered. */
struct IsoResult {
    std::vector<std::vector<uint8_t>> obs;
    std::vector<std::string> skip; /* per link */
};
IsoResult probe_isolation(Env &e);
void report_isolation(Env &e, const IsoResult &mine);

/* bandwidth.cc */
void check_bandwidth(Env &e, const std::vector<std::vector<uint8_t>> &reach);

} // namespace drcheck
