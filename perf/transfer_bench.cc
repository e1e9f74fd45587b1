/*
 * dualrail-transfer-bench — point-to-point bandwidth of ucx_mr, OSU-style.
 *
 * Two processes, client (id 0) and server (id 1), exchange addresses through
 * files in a shared directory (the lab's nodes share a filesystem) and stream
 * messages client -> server, like osu_bw: the client keeps `window` sends in
 * flight, the server keeps `window` receives posted and reposts each one as it
 * completes. Every message has a key of its own, so no two messages in flight
 * can be confused.
 *
 * Schedule of one size (index z), both sides in step:
 *
 *   client                                   server
 *   ------                                   ------
 *   PLAN(z, warm)  {size, warm count}   ->   checks the size against its --sizes
 *   WARM(z, 0..w-1)                     ->   receives, checks (--validate)
 *                                       <-   DONE(z, warm)      1 byte
 *   (time mode: iterations from the warm-up's rate)
 *   PLAN(z, timed) {size, iterations}   ->
 *   start clock
 *   DATA(z, 0..n-1), window in flight   ->   receives, checks (--validate)
 *                                       <-   DONE(z, timed)     1 byte
 *   stop clock when DONE(z, timed) is in and every send is acknowledged
 *
 * The warm-up opens the endpoints on every plane and fills the TCP pipes, so
 * the timed part measures streaming; the DONE message makes the next size
 * start with nothing in flight, and puts delivery (not only injection) inside
 * the timing. The server learns counts from the PLAN messages, so the client
 * alone decides iterations (fixed, from the size, or from a time budget).
 *
 * Output (client, stdout only): a header and one "size MB/s" row per size,
 * MB = 1e6 bytes. Diagnostics go to stderr. Every wait is bounded by one
 * overall deadline; any transfer error or timeout exits non-zero with the
 * reason on stderr.
 */
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "dualrail/ucx_mr.h"
#include "oob_file.h"

namespace po = boost::program_options;

namespace {

constexpr uint32_t kClientId = 0;
constexpr uint32_t kServerId = 1;
constexpr uint64_t kPlanMagic = 0x4452424e43485031ull; /* "DRBNCHP1" */
/* Default budget per size: about 1.5 s worth of one 1 Gbit/s plane. */
constexpr double kDefaultSeconds = 1.5;
constexpr double kOnePlaneBytesPerS = 125e6;
/* Iteration bounds: enough messages to fill the window twice, few enough that small sizes
 * (where per-message cost, not the wire, is the limit) stay within a few seconds. */
constexpr uint64_t kMaxIters = 100000;
constexpr uint64_t kWarmBytes = 16ull << 20;
constexpr uint64_t kMaxWarm = 1000;

/* Key layout: size index (24 bits) | kind (8 bits) | message index (32 bits). */
enum Kind : uint64_t { kPlanWarm = 1, kPlanTimed = 2, kWarm = 3, kData = 4, kDoneWarm = 5,
                       kDoneTimed = 6 };

uint64_t make_key(size_t z, Kind kind, uint64_t index)
{
    return ((uint64_t)z << 40) | ((uint64_t)kind << 32) | (index & 0xffffffffull);
}

struct Plan {
    uint64_t magic;
    uint64_t size;
    uint64_t count;
    uint64_t kind;
};

struct Options {
    std::string role;
    std::string dir;
    std::string planes;
    std::vector<uint64_t> sizes;
    uint64_t iters = 0;          /* 0: from the size or the time budget */
    double time_per_size = 0;    /* 0: not given */
    uint64_t warmup = 0;         /* 0: from the size */
    uint32_t window = 8;
    bool validate = false;
    bool verbose = false;
    int mr_verbose = -1;         /* -1: 1 with --verbose, else 0 */
    double timeout = 300;
    uint64_t segment_size = 0;   /* 0: ucx_mr's default */
    uint32_t mr_window = 0;      /* 0: ucx_mr's default */
    std::string json;
};

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "4096", "4K", "64k", "1M", "1MiB", "2G": binary multiples. */
uint64_t parse_size(const std::string &text)
{
    size_t pos = 0;
    unsigned long long v;
    try {
        v = std::stoull(text, &pos, 10);
    } catch (const std::exception &) {
        throw std::runtime_error("bad size '" + text + "'");
    }
    std::string unit = text.substr(pos);
    for (auto &c : unit) {
        c = (char)toupper((unsigned char)c);
    }
    uint64_t mult;
    if (unit.empty() || unit == "B") {
        mult = 1;
    } else if (unit == "K" || unit == "KB" || unit == "KIB") {
        mult = 1ull << 10;
    } else if (unit == "M" || unit == "MB" || unit == "MIB") {
        mult = 1ull << 20;
    } else if (unit == "G" || unit == "GB" || unit == "GIB") {
        mult = 1ull << 30;
    } else {
        throw std::runtime_error("bad size '" + text + "' (suffix K, M or G)");
    }
    if (v == 0 || v > (4ull << 30) / mult) {
        throw std::runtime_error("size '" + text + "' out of range (1 B .. 4 GiB)");
    }
    return v * mult;
}

std::vector<uint64_t> parse_sizes(const std::string &list)
{
    std::vector<uint64_t> out;
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string item = list.substr(start, comma == std::string::npos ? std::string::npos
                                                                          : comma - start);
        if (item.empty()) {
            throw std::runtime_error("empty entry in --sizes '" + list + "'");
        }
        out.push_back(parse_size(item));
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    if (out.size() >= (1u << 24)) {
        throw std::runtime_error("too many sizes");
    }
    return out;
}

/* A cheap pattern that differs per message and per position, so a segment placed at the
 * wrong offset or taken from another message is caught. */
uint64_t pattern_seed(uint64_t key)
{
    uint64_t x = key * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    x ^= x >> 29;
    return x;
}

void pattern_fill(unsigned char *buf, uint64_t len, uint64_t key)
{
    const uint64_t seed = pattern_seed(key);
    const uint64_t words = len / 8;
    for (uint64_t k = 0; k < words; ++k) {
        const uint64_t w = seed + k * 0x100000001b3ull;
        memcpy(buf + 8 * k, &w, 8);
    }
    for (uint64_t k = words * 8; k < len; ++k) {
        buf[k] = (unsigned char)(seed >> (8 * (k % 8)));
    }
}

/* Offset of the first wrong byte, or len when all match. */
uint64_t pattern_check(const unsigned char *buf, uint64_t len, uint64_t key)
{
    const uint64_t seed = pattern_seed(key);
    const uint64_t words = len / 8;
    for (uint64_t k = 0; k < words; ++k) {
        const uint64_t w = seed + k * 0x100000001b3ull;
        if (memcmp(buf + 8 * k, &w, 8) != 0) {
            for (uint64_t b = 8 * k; b < 8 * k + 8; ++b) {
                if (buf[b] != ((const unsigned char *)&w)[b - 8 * k]) {
                    return b;
                }
            }
        }
    }
    for (uint64_t k = words * 8; k < len; ++k) {
        if (buf[k] != (unsigned char)(seed >> (8 * (k % 8)))) {
            return k;
        }
    }
    return len;
}

std::string size_text(uint64_t n)
{
    char b[32];
    if (n % (1ull << 20) == 0) {
        snprintf(b, sizeof(b), "%" PRIu64 "M", n >> 20);
    } else if (n % 1024 == 0) {
        snprintf(b, sizeof(b), "%" PRIu64 "K", n >> 10);
    } else {
        snprintf(b, sizeof(b), "%" PRIu64, n);
    }
    return b;
}

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/* Owns the ucx_mr context and the deadline every wait is held to. */
class Bench {
public:
    Bench(const Options &o, uint32_t self, uint32_t peer) : o_(o), self_(self), peer_(peer)
    {
        deadline_ = now_s() + o.timeout;
    }
    ~Bench()
    {
        if (mr_ != nullptr) {
            dr_mr_destroy(mr_);
        }
    }
    Bench(const Bench &) = delete;
    Bench &operator=(const Bench &) = delete;

    void connect();
    /* Progress once; give the CPU away when nothing happens, since in the lab client, server
     * and the kernel's TCP work share few cores. */
    void poll()
    {
        if (dr_mr_progress(mr_) == 0) {
            if (++idle_ > 64) {
                sched_yield();
            }
        } else {
            idle_ = 0;
        }
    }
    void check_deadline(const char *what)
    {
        if (now_s() > deadline_) {
            throw Failure(std::string("timed out after ") + std::to_string((int)o_.timeout) +
                          " s " + what);
        }
    }
    /* Wait for one request; frees it on success. */
    size_t wait(dr_mr_req_t *r, const char *what);
    dr_status_t test(dr_mr_req_t *r, size_t *len) { return dr_mr_test(mr_, r, len); }
    [[noreturn]] void fail(const char *what, dr_status_t st)
    {
        throw Failure(std::string(what) + ": " + dr_status_str(st) + ": " +
                      dr_mr_last_error(mr_));
    }
    dr_mr_req_t *isend(uint64_t key, const void *buf, size_t len, const char *what)
    {
        dr_mr_req_t *r = nullptr;
        dr_status_t st = dr_mr_isend(mr_, peer_, key, buf, len, &r);
        if (st != DR_OK) {
            fail(what, st);
        }
        return r;
    }
    dr_mr_req_t *irecv(uint64_t key, void *buf, size_t cap, const char *what)
    {
        dr_mr_req_t *r = nullptr;
        dr_status_t st = dr_mr_irecv(mr_, peer_, key, buf, cap, &r);
        if (st != DR_OK) {
            fail(what, st);
        }
        return r;
    }
    void free_req(dr_mr_req_t *r) { dr_mr_req_free(mr_, r); }
    /* Keep answering for a moment so the peer's last acknowledgements leave. */
    void linger(double seconds)
    {
        for (double end = now_s() + seconds; now_s() < end;) {
            poll();
        }
    }
    void print_plane_stats(const char *when);

    const Options &o_;
    const uint32_t self_, peer_;
    dr_mr_t *mr_ = nullptr;
    double deadline_ = 0;
    unsigned idle_ = 0;
};

void Bench::connect()
{
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.planes = o_.planes.c_str();
    cfg.name = self_ == kClientId ? "bench client" : "bench server";
    cfg.verbose = o_.mr_verbose >= 0 ? o_.mr_verbose : (o_.verbose ? 1 : 0);
    if (o_.segment_size != 0) {
        cfg.segment_size = o_.segment_size;
    }
    if (o_.mr_window != 0) {
        cfg.window = o_.mr_window;
    }
    char err[512] = "";
    dr_status_t st = dr_mr_create(&cfg, self_, &mr_, err, sizeof(err));
    if (st != DR_OK) {
        throw Failure(std::string("cannot create the transport: ") + err);
    }
    const void *addr;
    size_t len;
    dr_mr_address(mr_, &addr, &len);
    if (dr_oob_publish(o_.dir.c_str(), self_, addr, len) != 0) {
        throw Failure("cannot write address " + std::to_string(self_) + " in " + o_.dir + ": " +
                      strerror(errno));
    }
    void *peer_addr = nullptr;
    size_t peer_len = 0;
    const double wait_s = std::min(60.0, std::max(1.0, deadline_ - now_s()));
    if (dr_oob_fetch(o_.dir.c_str(), peer_, wait_s, &peer_addr, &peer_len) != 0) {
        throw Failure("no address of process " + std::to_string(peer_) + " in " + o_.dir +
                      " after " + std::to_string((int)wait_s) + " s (is the other side running?)");
    }
    st = dr_mr_add_peer(mr_, peer_, peer_addr, peer_len, err, sizeof(err));
    free(peer_addr);
    if (st != DR_OK) {
        throw Failure(std::string("peer address: ") + err);
    }
    if (o_.verbose) {
        for (int i = 0; i < dr_mr_num_planes(mr_); ++i) {
            fprintf(stderr, "%s: plane %d on %s\n", cfg.name, i, dr_mr_plane_device(mr_, i));
        }
    }
}

size_t Bench::wait(dr_mr_req_t *r, const char *what)
{
    size_t len = 0;
    dr_status_t st;
    while ((st = dr_mr_test(mr_, r, &len)) == DR_INPROGRESS) {
        check_deadline(what);
        poll();
    }
    if (st != DR_OK) {
        fail(what, st);
    }
    dr_mr_req_free(mr_, r);
    return len;
}

void Bench::print_plane_stats(const char *when)
{
    for (int i = 0; i < dr_mr_num_planes(mr_); ++i) {
        dr_mr_plane_stats_t s;
        if (dr_mr_plane_stats(mr_, i, &s) != DR_OK) {
            continue;
        }
        fprintf(stderr,
                "%s: %s plane %d (%s): tx %" PRIu64 " B in %" PRIu64 " segs, rx %" PRIu64
                " B in %" PRIu64 " segs, errors %" PRIu64 ", reroutes %" PRIu64
                ", duplicates %" PRIu64 "\n",
                self_ == kClientId ? "client" : "server", when, i, dr_mr_plane_device(mr_, i),
                s.tx_bytes, s.tx_segments, s.rx_bytes, s.rx_segments, s.errors, s.reroutes,
                s.duplicates);
    }
}

/* ------------------------------------------------------------------ client */

struct SizeResult {
    uint64_t size;
    uint64_t iters;
    double seconds;
    double mbps;
};

class Client {
public:
    explicit Client(const Options &o) : o_(o), b_(o, kClientId, kServerId) {}
    int run();

private:
    /* Stream count messages of size bytes under kind, window in flight; returns when every
     * send is acknowledged and the server's DONE for this phase is in. */
    void stream(size_t z, Kind kind, Kind done_kind, uint64_t size, uint64_t count);
    void send_plan(size_t z, Kind kind, uint64_t size, uint64_t count);
    uint64_t default_iters(uint64_t size) const;

    const Options &o_;
    /* Declared before b_ so they outlive it: dr_mr_destroy() still progresses the planes,
     * and UCX may read send buffers until the endpoints are closed. */
    std::vector<std::unique_ptr<unsigned char[]>> bufs_;
    Plan plan_{};
    unsigned char done_byte_ = 0;
    Bench b_;
};

uint64_t Client::default_iters(uint64_t size) const
{
    const double target = kDefaultSeconds * kOnePlaneBytesPerS;
    uint64_t n = (uint64_t)std::ceil(target / (double)size);
    return std::clamp<uint64_t>(n, o_.window, kMaxIters);
}

void Client::send_plan(size_t z, Kind kind, uint64_t size, uint64_t count)
{
    plan_ = Plan{kPlanMagic, size, count, (uint64_t)kind};
    b_.wait(b_.isend(make_key(z, kind, 0), &plan_, sizeof(plan_), "sending a plan"),
            "sending a plan");
}

void Client::stream(size_t z, Kind kind, Kind done_kind, uint64_t size, uint64_t count)
{
    dr_mr_req_t *done = b_.irecv(make_key(z, done_kind, 0), &done_byte_, 1,
                                 "posting the done receive");
    const uint32_t w = o_.window;
    std::vector<dr_mr_req_t *> slot(w, nullptr);
    uint64_t next = 0, finished = 0;
    char what[96];
    snprintf(what, sizeof(what), "streaming %s messages", size_text(size).c_str());
    while (finished < count) {
        for (uint32_t j = 0; j < w && next < count; ++j) {
            if (slot[j] != nullptr) {
                continue;
            }
            const uint64_t key = make_key(z, kind, next);
            unsigned char *buf = bufs_[o_.validate ? j : 0].get();
            if (o_.validate) {
                pattern_fill(buf, size, key);
            }
            slot[j] = b_.isend(key, buf, size, what);
            ++next;
        }
        b_.check_deadline(what);
        b_.poll();
        for (uint32_t j = 0; j < w; ++j) {
            if (slot[j] == nullptr) {
                continue;
            }
            dr_status_t st = b_.test(slot[j], nullptr);
            if (st == DR_INPROGRESS) {
                continue;
            }
            if (st != DR_OK) {
                b_.fail(what, st);
            }
            b_.free_req(slot[j]);
            slot[j] = nullptr;
            ++finished;
        }
    }
    b_.wait(done, "waiting for the server's done message");
}

int Client::run()
{
    b_.connect();
    const uint64_t max_size = *std::max_element(o_.sizes.begin(), o_.sizes.end());
    /* Without validation every in-flight send reads the same buffer (as osu_bw does);
     * with it each slot carries its own message's pattern. */
    const size_t nbufs = o_.validate ? o_.window : 1;
    for (size_t i = 0; i < nbufs; ++i) {
        bufs_.emplace_back(new unsigned char[max_size]);
        memset(bufs_.back().get(), 0x5a, max_size); /* touch every page before timing */
    }
    printf("# DualRail transfer bandwidth (planes: %s)\n", o_.planes.c_str());
    printf("# %-10s %14s\n", "Size", "MB/s");
    fflush(stdout);
    std::vector<SizeResult> results;
    for (size_t z = 0; z < o_.sizes.size(); ++z) {
        const uint64_t size = o_.sizes[z];
        const uint64_t warm = o_.warmup != 0 ? o_.warmup
                                             : std::clamp<uint64_t>(kWarmBytes / size, 2, kMaxWarm);
        send_plan(z, kPlanWarm, size, warm);
        double t0 = now_s();
        stream(z, kWarm, kDoneWarm, size, warm);
        const double warm_s = now_s() - t0;
        uint64_t iters;
        if (o_.iters != 0) {
            iters = o_.iters;
        } else if (o_.time_per_size > 0) {
            /* The warm-up includes connection setup, so this rate is a low estimate. */
            const double rate = (double)(warm * size) / std::max(warm_s, 1e-6);
            iters = (uint64_t)std::ceil(rate * o_.time_per_size / (double)size);
            iters = std::clamp<uint64_t>(iters, o_.window, kMaxIters);
        } else {
            iters = default_iters(size);
        }
        send_plan(z, kPlanTimed, size, iters);
        t0 = now_s();
        stream(z, kData, kDoneTimed, size, iters);
        const double secs = now_s() - t0;
        const double mbps = (double)(iters * size) / secs / 1e6;
        results.push_back(SizeResult{size, iters, secs, mbps});
        printf("%-12" PRIu64 " %14.2f\n", size, mbps);
        fflush(stdout);
        if (o_.verbose) {
            fprintf(stderr, "client: size %s: warm-up %" PRIu64 " msgs in %.3f s, %" PRIu64
                    " msgs in %.3f s, %.2f MB/s\n", size_text(size).c_str(), warm, warm_s, iters,
                    secs, mbps);
            b_.print_plane_stats(("after " + size_text(size)).c_str());
        }
    }
    b_.linger(0.3);
    if (!o_.json.empty()) {
        FILE *f = fopen(o_.json.c_str(), "w");
        if (f == nullptr) {
            throw Failure("cannot write " + o_.json + ": " + strerror(errno));
        }
        fprintf(f, "{\n  \"benchmark\": \"dualrail-transfer-bench\",\n  \"planes\": \"%s\",\n"
                "  \"window\": %u,\n  \"results\": [\n", o_.planes.c_str(), o_.window);
        for (size_t i = 0; i < results.size(); ++i) {
            const SizeResult &r = results[i];
            fprintf(f, "    {\"size\": %" PRIu64 ", \"iterations\": %" PRIu64
                    ", \"seconds\": %.6f, \"mb_per_s\": %.3f}%s\n", r.size, r.iters, r.seconds,
                    r.mbps, i + 1 < results.size() ? "," : "");
        }
        fprintf(f, "  ]\n}\n");
        if (fclose(f) != 0) {
            throw Failure("cannot write " + o_.json + ": " + strerror(errno));
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ server */

class Server {
public:
    explicit Server(const Options &o) : o_(o), b_(o, kServerId, kClientId) {}
    int run();

private:
    Plan recv_plan(size_t z, Kind kind, uint64_t size);
    void drain(size_t z, Kind kind, Kind done_kind, uint64_t size, uint64_t count);

    const Options &o_;
    /* Declared before b_ so they outlive it: dr_mr_destroy() still progresses the planes and
     * places data that arrives meanwhile into the buffers of receives still posted. */
    std::vector<std::unique_ptr<unsigned char[]>> bufs_;
    uint64_t cap_ = 0;
    Plan plan_{};
    Bench b_;
};

Plan Server::recv_plan(size_t z, Kind kind, uint64_t size)
{
    plan_ = Plan{};
    size_t got = b_.wait(b_.irecv(make_key(z, kind, 0), &plan_, sizeof(plan_),
                                  "waiting for a plan"),
                         "waiting for a plan");
    const Plan p = plan_;
    if (got != sizeof(p) || p.magic != kPlanMagic || p.kind != (uint64_t)kind) {
        throw Failure("malformed plan message from the client");
    }
    if (p.size != size) {
        throw Failure("the client sends " + std::to_string(p.size) + "-byte messages as size #" +
                      std::to_string(z + 1) + ", this server expects " + std::to_string(size) +
                      ": run both sides with the same --sizes");
    }
    if (p.count == 0 || p.count > UINT32_MAX) {
        throw Failure("plan with " + std::to_string(p.count) + " messages");
    }
    return p;
}

void Server::drain(size_t z, Kind kind, Kind done_kind, uint64_t size, uint64_t count)
{
    const uint32_t w = o_.window;
    std::vector<dr_mr_req_t *> slot(w, nullptr);
    std::vector<uint64_t> index(w, 0);
    uint64_t next = 0, finished = 0;
    char what[96];
    snprintf(what, sizeof(what), "receiving %s messages", size_text(size).c_str());
    while (finished < count) {
        for (uint32_t j = 0; j < w && next < count; ++j) {
            if (slot[j] == nullptr) {
                slot[j] = b_.irecv(make_key(z, kind, next), bufs_[j].get(), cap_, what);
                index[j] = next++;
            }
        }
        b_.check_deadline(what);
        b_.poll();
        for (uint32_t j = 0; j < w; ++j) {
            if (slot[j] == nullptr) {
                continue;
            }
            size_t len = 0;
            dr_status_t st = b_.test(slot[j], &len);
            if (st == DR_INPROGRESS) {
                continue;
            }
            if (st != DR_OK) {
                b_.fail(what, st);
            }
            b_.free_req(slot[j]);
            slot[j] = nullptr;
            if (len != size) {
                throw Failure("message " + std::to_string(index[j]) + " of size " +
                              size_text(size) + " arrived with " + std::to_string(len) +
                              " bytes");
            }
            if (o_.validate) {
                const uint64_t key = make_key(z, kind, index[j]);
                const uint64_t bad = pattern_check(bufs_[j].get(), size, key);
                if (bad != size) {
                    throw Failure("message " + std::to_string(index[j]) + " of size " +
                                  size_text(size) + ": wrong contents at byte " +
                                  std::to_string(bad));
                }
            }
            ++finished;
        }
    }
    static const unsigned char done_byte = 1;
    b_.wait(b_.isend(make_key(z, done_kind, 0), &done_byte, 1, "sending done"), "sending done");
}

int Server::run()
{
    b_.connect();
    cap_ = *std::max_element(o_.sizes.begin(), o_.sizes.end());
    for (uint32_t j = 0; j < o_.window; ++j) {
        bufs_.emplace_back(new unsigned char[cap_]);
        memset(bufs_.back().get(), 0, cap_);
    }
    for (size_t z = 0; z < o_.sizes.size(); ++z) {
        const uint64_t size = o_.sizes[z];
        Plan p = recv_plan(z, kPlanWarm, size);
        drain(z, kWarm, kDoneWarm, size, p.count);
        p = recv_plan(z, kPlanTimed, size);
        drain(z, kData, kDoneTimed, size, p.count);
        if (o_.verbose) {
            fprintf(stderr, "server: size %s: %" PRIu64 " messages received%s\n",
                    size_text(size).c_str(), p.count, o_.validate ? ", contents verified" : "");
        }
    }
    if (o_.verbose) {
        b_.print_plane_stats("at exit");
    }
    b_.linger(0.1);
    return 0;
}

/* ------------------------------------------------------------------ command line */

bool parse_args(int argc, char **argv, Options &o)
{
    std::string sizes = "4K,64K,1M,4M,16M";
    std::string segment;
    po::options_description desc(
        "usage: dualrail-transfer-bench --role client|server --dir DIR --planes LIST [options]\n"
        "Streams messages client (id 0) -> server (id 1) over ucx_mr, window in flight;\n"
        "the client prints one 'size MB/s' row per size (MB = 1e6 bytes).\n\noptions");
    // clang-format off
    desc.add_options()
        ("help,h", "this text")
        ("role", po::value(&o.role)->required(), "client or server")
        ("dir", po::value(&o.dir)->required(), "shared directory for the address exchange")
        ("planes", po::value(&o.planes)->required(), "plane list, e.g. ethA or ethA,ethB")
        ("sizes", po::value(&sizes)->default_value(sizes), "message sizes (suffix K, M, G)")
        ("iters", po::value(&o.iters), "messages per size (default: about 1.5 s of a 1 Gbit/s plane)")
        ("time-per-size", po::value(&o.time_per_size), "seconds per size instead of --iters")
        ("warmup", po::value(&o.warmup), "untimed messages per size (default: about 16 MiB)")
        ("window", po::value(&o.window)->default_value(8), "messages in flight")
        ("validate", po::bool_switch(&o.validate), "fill a per-message pattern; the server checks it")
        ("timeout", po::value(&o.timeout)->default_value(300), "overall deadline in seconds")
        ("segment-size", po::value(&segment), "ucx_mr segment size (suffix K, M; default ucx_mr's)")
        ("mr-window", po::value(&o.mr_window), "ucx_mr segments in flight per plane")
        ("mr-verbose", po::value(&o.mr_verbose), "ucx_mr log level: 0 warnings, 1 info, 2 debug")
        ("json", po::value(&o.json), "client: also write the results as JSON to this file")
        ("verbose,v", po::bool_switch(&o.verbose), "diagnostics and per-plane counters on stderr");
    // clang-format on
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    if (vm.count("help")) {
        std::cout << desc << "\n";
        return false;
    }
    po::notify(vm);
    if (o.role != "client" && o.role != "server") {
        throw std::runtime_error("--role must be client or server");
    }
    o.sizes = parse_sizes(sizes);
    if (!segment.empty()) {
        o.segment_size = parse_size(segment);
    }
    if (o.window == 0 || o.window > 1024) {
        throw std::runtime_error("--window must be 1..1024");
    }
    if (vm.count("iters") && vm.count("time-per-size")) {
        throw std::runtime_error("give --iters or --time-per-size, not both");
    }
    if (vm.count("iters") && (o.iters == 0 || o.iters > UINT32_MAX)) {
        throw std::runtime_error("--iters must be 1..4294967295");
    }
    if (vm.count("time-per-size") && !(o.time_per_size > 0 && o.time_per_size < 3600)) {
        throw std::runtime_error("--time-per-size must be in (0, 3600) seconds");
    }
    if (vm.count("warmup") && (o.warmup == 0 || o.warmup > UINT32_MAX)) {
        throw std::runtime_error("--warmup must be 1..4294967295");
    }
    if (!(o.timeout > 0)) {
        throw std::runtime_error("--timeout must be positive");
    }
    if (vm.count("mr-window") && o.mr_window == 0) {
        throw std::runtime_error("--mr-window must be at least 1");
    }
    return true;
}

} // namespace

int main(int argc, char **argv)
{
    Options o;
    try {
        if (!parse_args(argc, argv, o)) {
            return 0;
        }
    } catch (const std::exception &e) {
        fprintf(stderr, "dualrail-transfer-bench: %s (try --help)\n", e.what());
        return 1;
    }
    try {
        if (o.role == "client") {
            Client c(o);
            return c.run();
        }
        Server s(o);
        return s.run();
    } catch (const Failure &e) {
        fprintf(stderr, "dualrail-transfer-bench %s: %s\n", o.role.c_str(), e.what());
        return 2;
    } catch (const std::exception &e) {
        fprintf(stderr, "dualrail-transfer-bench %s: %s\n", o.role.c_str(), e.what());
        return 2;
    }
}
