/*
 * Non-blocking collectives (mpi_coll/dr_coll_nb.h) over ucx_mr on loopback,
 * four contexts in one process and ONE thread driving all of them: a thread
 * starts every rank's collectives, then only calls dr_mr_progress and
 * dr_nb_progress. Blocking schedules would deadlock here (rank 0 would wait
 * for rank 1 inside its call); tasks that yield at every wait complete.
 *
 *   - many outstanding: per rank, on two communicators, iallreduce (recursive
 *     doubling and multi-segment ring), ibcast (every root), iallgather,
 *     ibarrier, ireduce_scatter_block (recursive halving and ring, in place on
 *     odd ops) and ialltoall (Bruck and pairwise, in place on odd ops)
 *     interleaved; every result exact; done callbacks in start order per
 *     communicator on every rank;
 *   - stacks follow the communicators, not the backlog: over two rounds of
 *     42 collectives on 8 queues (4 ranks x 2 communicators) at most 8 task
 *     stacks are ever mapped, one per queue's running task (a finished task's
 *     stack serves the next one at once; before, every task a progress turn
 *     finished kept its own until the turn ended: 13 or 14 here);
 *   - errors through the completion: a rank that never joins makes the
 *     others' collective complete with DR_ERR_TIMEOUT (their timeout), bad
 *     arguments complete with DR_ERR_INVALID; nothing hangs (bounded loops);
 *   - completion order across threads: while this thread is still inside the
 *     done callback of a communicator's collective (slow, as the copy of a
 *     device result before the request completes), a second thread starts
 *     the next one on that communicator, which finishes at once: its callback
 *     must not run before the first one's has returned (before the fix it ran
 *     in the second thread at once, and MPI saw the later request complete
 *     while the earlier one was not).
 */
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../support/loopback_config.h"
#include "dr_coll_nb.h"

namespace {

constexpr int kRanks = 4;
int g_fail = 0;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            ++g_fail;                                                                              \
            std::printf("FAIL %s:%d: ", __FILE__, __LINE__);                                       \
            std::printf(__VA_ARGS__);                                                              \
            std::printf("\n");                                                                     \
        }                                                                                          \
    } while (0)

dr_mr_t *g_mr[kRanks];
uint32_t g_ids[kRanks];

void sum_u64(const void *in, void *inout, size_t count, void *arg)
{
    (void)arg;
    const uint64_t *a = static_cast<const uint64_t *>(in);
    uint64_t *b = static_cast<uint64_t *>(inout);
    for (size_t i = 0; i < count; ++i) {
        b[i] += a[i];
    }
}

struct Done {
    std::vector<int> order; /* op numbers in completion order */
    std::vector<dr_status_t> status;
    std::vector<std::string> err;
};

struct Cookie {
    Done *d;
    int op;
};

void on_done(void *arg, dr_status_t st, const char *err)
{
    Cookie *c = static_cast<Cookie *>(arg);
    c->d->order.push_back(c->op);
    c->d->status[(size_t)c->op] = st;
    c->d->err[(size_t)c->op] = err;
}

uint64_t value(int op, int r, size_t i)
{
    return ((uint64_t)(op + 1) << 40) + ((uint64_t)(r + 1) << 24) + i;
}

/* Drive every context and the scheduler until nothing is outstanding or limit s pass. */
bool drive(double limit)
{
    const auto start = std::chrono::steady_clock::now();
    while (dr_nb_outstanding() != 0) {
        for (dr_mr_t *m : g_mr) {
            dr_mr_progress(m);
        }
        dr_nb_progress();
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            limit) {
            return false;
        }
    }
    return true;
}

/* What rank s sends rank d at element i of op k (alltoall): a block in the wrong place fails. */
uint64_t pair_value(int op, int s, int d, size_t i)
{
    return value(op, s, i) + ((uint64_t)(d + 1) << 36);
}

constexpr int kOpKinds = 6;

struct Op {
    int kind; /* 0 allreduce, 1 bcast, 2 allgather, 3 barrier, 4 reduce_scatter_block, 5 alltoall */
    size_t count;
    int root;
    int comm;
};

/* One round: every rank starts ops (on comm 1 or 2) in the same order, then drive. */
void round_of(const std::vector<Op> &ops, uint32_t *seq /* [2][kOpKinds] */)
{
    dr_nb_queue_t *q[kRanks][2];
    std::vector<std::vector<uint64_t>> buf[kRanks], in[kRanks];
    Done done[kRanks][2];
    std::vector<Cookie> cookies[kRanks];
    for (int r = 0; r < kRanks; ++r) {
        for (int c = 0; c < 2; ++c) {
            q[r][c] = dr_nb_queue_new();
            done[r][c].status.assign(ops.size(), DR_INPROGRESS);
            done[r][c].err.assign(ops.size(), "");
        }
        buf[r].resize(ops.size());
        in[r].resize(ops.size());
        cookies[r].resize(ops.size());
    }
    for (size_t k = 0; k < ops.size(); ++k) {
        const Op &o = ops[k];
        const uint32_t s = seq[o.comm * kOpKinds + o.kind]++;
        const bool in_place = ((k / kOpKinds) & 1) != 0; /* each kind both ways */
        for (int r = 0; r < kRanks; ++r) {
            std::vector<uint64_t> &b = buf[r][k];
            cookies[r][k] = Cookie{&done[r][o.comm], (int)k};
            char err[256];
            dr_status_t st;
            if (o.kind == 0) {
                b.resize(o.count);
                for (size_t i = 0; i < o.count; ++i) {
                    b[i] = value((int)k, r, i);
                }
                dr_allreduce_args_t a;
                std::memset(&a, 0, sizeof(a));
                a.recvbuf = b.data();
                a.count = o.count;
                a.elem_size = 8;
                a.reduce = sum_u64;
                a.rank = r;
                a.size = kRanks;
                a.peer_ids = g_ids;
                a.comm_id = (uint32_t)(o.comm + 1);
                a.seq = s;
                a.segment_size = 4096; /* many ring segments: many yields */
                a.timeout = 20;
                st = dr_iallreduce(g_mr[r], q[r][o.comm], &a, on_done, &cookies[r][k], err,
                                   sizeof(err));
            } else {
                dr_coll_args_t a;
                std::memset(&a, 0, sizeof(a));
                a.rank = r;
                a.size = kRanks;
                a.peer_ids = g_ids;
                a.comm_id = (uint32_t)(o.comm + 1);
                a.seq = s;
                a.timeout = 20;
                a.segment_size = 4096;
                a.root = o.root;
                int kind = DR_KIND_BARRIER;
                if (o.kind == 1) {
                    kind = DR_KIND_BCAST;
                    b.assign(o.count, 0);
                    for (size_t i = 0; r == o.root && i < o.count; ++i) {
                        b[i] = value((int)k, o.root, i);
                    }
                    a.recvbuf = b.data();
                    a.bytes = o.count * 8;
                } else if (o.kind == 2) {
                    kind = DR_KIND_ALLGATHER;
                    in[r][k].resize(o.count);
                    for (size_t i = 0; i < o.count; ++i) {
                        in[r][k][i] = value((int)k, r, i);
                    }
                    b.assign(o.count * kRanks, 0);
                    a.sendbuf = in[r][k].data();
                    a.recvbuf = b.data();
                    a.bytes = o.count * 8;
                } else if (o.kind >= 4) {
                    /* size blocks of count elements in; in place: they are in b */
                    std::vector<uint64_t> &src = in_place ? b : in[r][k];
                    src.resize(o.count * kRanks);
                    for (size_t i = 0; i < o.count * kRanks; ++i) {
                        src[i] = o.kind == 4
                                     ? value((int)k, r, i)
                                     : pair_value((int)k, r, (int)(i / o.count), i % o.count);
                    }
                    if (!in_place) {
                        b.assign(o.count * kRanks, 0);
                    }
                    a.sendbuf = in_place ? nullptr : in[r][k].data();
                    a.recvbuf = b.data();
                    a.bytes = o.count * 8;
                    /* Small blocks take recursive halving and Bruck, large ones the ring and
                     * the pairwise exchange: both of each kind run as tasks. */
                    a.small_max_bytes = 4096;
                    a.elem_size = 8;
                    a.reduce = sum_u64;
                }
                if (o.kind == 5) {
                    dr_alltoall_args_t x;
                    std::memset(&x, 0, sizeof(x));
                    x.c = a;
                    x.c.elem_size = 0;
                    x.c.reduce = nullptr;
                    x.c.small_max_bytes = 64; /* Bruck up to 8 elements per block */
                    x.window = 2;
                    st = dr_ialltoall(g_mr[r], q[r][o.comm], &x, on_done, &cookies[r][k], err,
                                      sizeof(err));
                } else {
                    st = dr_icoll(g_mr[r], q[r][o.comm],
                                  o.kind == 4 ? DR_KIND_REDUCE_SCATTER_BLOCK : kind, &a, on_done,
                                  &cookies[r][k], err, sizeof(err));
                }
            }
            CHECK(st == DR_OK, "start of op %zu on rank %d: %s", k, r, err);
        }
    }
    CHECK(drive(60), "collectives still outstanding after 60 s");
    for (int r = 0; r < kRanks; ++r) {
        for (int c = 0; c < 2; ++c) {
            int last = -1;
            for (int k : done[r][c].order) {
                CHECK(k > last, "rank %d comm %d: op %d completed after op %d", r, c + 1, k, last);
                last = k;
            }
            CHECK(dr_nb_queue_pending(q[r][c]) == 0, "rank %d comm %d: pending left", r, c + 1);
            dr_nb_queue_free(q[r][c]);
        }
        for (size_t k = 0; k < ops.size(); ++k) {
            const Op &o = ops[k];
            const Done &d = done[r][o.comm];
            CHECK(d.status[k] == DR_OK, "rank %d op %zu: status %d (%s)", r, k, (int)d.status[k],
                  d.err[k].c_str());
            const std::vector<uint64_t> &b = buf[r][k];
            bool ok = true;
            if (o.kind == 0) {
                for (size_t i = 0; ok && i < o.count; ++i) {
                    uint64_t want = 0;
                    for (int x = 0; x < kRanks; ++x) {
                        want += value((int)k, x, i);
                    }
                    ok = b[i] == want;
                }
            } else if (o.kind == 1) {
                for (size_t i = 0; ok && i < o.count; ++i) {
                    ok = b[i] == value((int)k, o.root, i);
                }
            } else if (o.kind == 2) {
                for (size_t i = 0; ok && i < o.count * kRanks; ++i) {
                    ok = b[i] == value((int)k, (int)(i / o.count), i % o.count);
                }
            } else if (o.kind == 4) {
                /* this rank's block of the sum, at the start of b */
                for (size_t i = 0; ok && i < o.count; ++i) {
                    uint64_t want = 0;
                    for (int x = 0; x < kRanks; ++x) {
                        want += value((int)k, x, (size_t)r * o.count + i);
                    }
                    ok = b[i] == want;
                }
            } else if (o.kind == 5) {
                for (size_t i = 0; ok && i < o.count * kRanks; ++i) {
                    ok = b[i] == pair_value((int)k, (int)(i / o.count), r, i % o.count);
                }
            }
            CHECK(ok, "rank %d op %zu (kind %d, count %zu): wrong result", r, k, o.kind, o.count);
        }
    }
}

void test_many_outstanding()
{
    std::vector<Op> ops;
    const size_t counts[] = {0, 1, 5, 1000, 20000, 70001, 7};
    for (int i = 0; i < 42; ++i) {
        ops.push_back(Op{i % kOpKinds, counts[i % 7], i % kRanks, (i / 3) % 2});
    }
    uint32_t seq[2 * kOpKinds] = {};
    round_of(ops, seq);
    round_of(ops, seq); /* the same again: pooled stacks only */
    const unsigned long mapped = dr_nb_stacks_mapped();
    CHECK(mapped >= 1 && mapped <= kRanks * 2, "%lu stacks mapped for %d queues", mapped,
          kRanks * 2);
    std::printf("many outstanding: %zu ops x %d ranks x 2 rounds, %lu stacks mapped\n", ops.size(),
                kRanks, mapped);
}

void test_errors()
{
    /* Rank 3 never joins: the others time out through their completions. */
    dr_nb_queue_t *q[kRanks];
    Done done[kRanks];
    Cookie cookies[kRanks];
    std::vector<uint64_t> buf[kRanks];
    for (int r = 0; r < 3; ++r) {
        q[r] = dr_nb_queue_new();
        done[r].status.assign(2, DR_INPROGRESS);
        done[r].err.assign(2, "");
        cookies[r] = Cookie{&done[r], 0};
        buf[r].assign(50000, 1);
        dr_allreduce_args_t a;
        std::memset(&a, 0, sizeof(a));
        a.recvbuf = buf[r].data();
        a.count = buf[r].size();
        a.elem_size = 8;
        a.reduce = sum_u64;
        a.rank = r;
        a.size = kRanks;
        a.peer_ids = g_ids;
        a.comm_id = 7;
        a.timeout = 0.5;
        char err[256];
        CHECK(dr_iallreduce(g_mr[r], q[r], &a, on_done, &cookies[r], err, sizeof(err)) == DR_OK,
              "start: %s", err);
    }
    CHECK(drive(20), "a collective with a missing rank hung");
    for (int r = 0; r < 3; ++r) {
        CHECK(done[r].status[0] != DR_OK && done[r].status[0] != DR_INPROGRESS,
              "rank %d: status %d with a rank missing", r, (int)done[r].status[0]);
        CHECK(!done[r].err[0].empty(), "rank %d: no reason given", r);
    }
    std::printf("missing rank: rank 0 got %s: %s\n", dr_status_str(done[0].status[0]),
                done[0].err[0].c_str());
    /* Bad arguments complete at once with DR_ERR_INVALID. */
    cookies[0] = Cookie{&done[0], 1};
    dr_allreduce_args_t a;
    std::memset(&a, 0, sizeof(a));
    uint64_t x = 0;
    a.recvbuf = &x;
    a.count = 1;
    a.elem_size = 0; /* invalid */
    a.reduce = sum_u64;
    a.rank = 0;
    a.size = kRanks;
    a.peer_ids = g_ids;
    a.comm_id = 8;
    char err[256];
    CHECK(dr_iallreduce(g_mr[0], q[0], &a, on_done, &cookies[0], err, sizeof(err)) == DR_OK,
          "start: %s", err);
    CHECK(drive(5), "an invalid call hung");
    CHECK(done[0].status[1] == DR_ERR_INVALID, "invalid call: status %d", (int)done[0].status[1]);
    for (int r = 0; r < 3; ++r) {
        dr_nb_queue_free(q[r]);
    }
}

/* Callbacks that say when they return; op 0's waits for the other thread's start first. */
struct Ordered {
    std::mutex mu;
    std::vector<int> returned; /* op numbers in the order their callbacks returned */
    std::atomic<bool> first_entered{false}, second_started{false};
};

struct OrderedCookie {
    Ordered *o;
    int op;
};

bool wait_for(const std::atomic<bool> &flag, double limit)
{
    const auto start = std::chrono::steady_clock::now();
    while (!flag.load()) {
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            limit) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
}

void on_ordered_done(void *arg, dr_status_t st, const char *err)
{
    (void)err;
    OrderedCookie *c = static_cast<OrderedCookie *>(arg);
    CHECK(st == DR_OK, "op %d: status %d", c->op, (int)st);
    if (c->op == 0) {
        c->o->first_entered = true;
        CHECK(wait_for(c->o->second_started, 10), "the second thread never started op 1");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::lock_guard<std::mutex> lk(c->o->mu);
    c->o->returned.push_back(c->op);
}

/* A one-rank allreduce: no traffic, it finishes in the progress call its start makes. */
dr_status_t start_single(dr_nb_queue_t *q, uint64_t *x, OrderedCookie *cookie, uint32_t seq)
{
    dr_allreduce_args_t a;
    std::memset(&a, 0, sizeof(a));
    a.recvbuf = x;
    a.count = 1;
    a.elem_size = 8;
    a.reduce = sum_u64;
    a.rank = 0;
    a.size = 1;
    a.peer_ids = g_ids;
    a.comm_id = 9;
    a.seq = seq;
    char err[256];
    const dr_status_t st = dr_iallreduce(g_mr[0], q, &a, on_ordered_done, cookie, err, sizeof(err));
    CHECK(st == DR_OK, "start op %d: %s", cookie->op, err);
    return st;
}

void test_order_across_threads()
{
    for (int rep = 0; rep < 3; ++rep) {
        dr_nb_queue_t *q = dr_nb_queue_new();
        Ordered o;
        OrderedCookie c0{&o, 0}, c1{&o, 1};
        uint64_t x0 = 1, x1 = 2;
        std::thread second([&] {
            if (!wait_for(o.first_entered, 10)) {
                o.second_started = true; /* let op 0's callback go; the check below fails */
                return;
            }
            start_single(q, &x1, &c1, 1);
            o.second_started = true;
            CHECK(drive(10), "op 1 never completed");
        });
        start_single(q, &x0, &c0, 0);
        second.join();
        CHECK(drive(10), "collectives left outstanding");
        CHECK(o.returned.size() == 2 && o.returned[0] == 0 && o.returned[1] == 1,
              "rep %d: callbacks returned in order %s (expected 0 then 1)", rep,
              o.returned.size() == 2 ? (o.returned[0] == 1 ? "1, 0" : "0, 1") : "(missing)");
        CHECK(x0 == 1 && x1 == 2, "one-rank results changed: %llu %llu", (unsigned long long)x0,
              (unsigned long long)x1);
        dr_nb_queue_free(q);
    }
    std::printf("order across threads: 3 x 2 collectives, done callbacks in start order\n");
}

} // namespace

int main()
{
    dr_mr_config_t cfg;
    dr_test_loopback_config(&cfg);
    char err[256];
    for (int r = 0; r < kRanks; ++r) {
        g_ids[r] = 40 + (uint32_t)r * 3;
        if (dr_mr_create(&cfg, g_ids[r], &g_mr[r], err, sizeof(err)) != DR_OK) {
            std::printf("create: %s\n", err);
            return 1;
        }
    }
    for (int a = 0; a < kRanks; ++a) {
        for (int b = 0; b < kRanks; ++b) {
            const void *addr;
            size_t len;
            if (a == b) {
                continue;
            }
            dr_mr_address(g_mr[b], &addr, &len);
            if (dr_mr_add_peer(g_mr[a], g_ids[b], addr, len, err, sizeof(err)) != DR_OK) {
                std::printf("add peer: %s\n", err);
                return 1;
            }
        }
    }
    test_many_outstanding();
    test_errors();
    test_order_across_threads();
    for (dr_mr_t *m : g_mr) {
        dr_mr_destroy(m);
    }
    std::printf(g_fail == 0 ? "ok\n" : "%d failure(s)\n", g_fail);
    return g_fail == 0 ? 0 : 1;
}
