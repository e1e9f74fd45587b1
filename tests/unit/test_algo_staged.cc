/*
 * The staged allreduce (device buffers through host staging) over the
 * in-memory fake network, one thread per rank, with the host stand-in as the
 * GPU: "device" buffers fault on CPU access, device work completes late and
 * only when polled. Table-driven over 2..8 ranks, counts {0, 1, n-1, odd,
 * large}, element types with and without a kernel, ring / recursive
 * doubling / auto, 64-byte segments (many segments) and the default, tiny
 * and large staging budgets, in place or not, and memory layouts per rank:
 * all device, some ranks host and some device (one collective), send on the
 * host with receive on the device, and the reverse.
 *
 * The reference is the host path itself: after each staged call the ranks
 * run the same call on host copies of the inputs, and the staged result must
 * be bitwise the host result (same schedule, same reduction order) on every
 * rank; integer sums are also checked against the exact sum. The fake checks
 * that no send buffer changes before its send completes, which catches a
 * staging slot reused too early.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <memory>
#include <string>
#include <vector>

#include "algo/allreduce.hpp"
#include "algo/ring_math.hpp"
#include "algo/staged.hpp"
#include "algo/staged_math.hpp"
#include "test_algo_rig.hpp"

using namespace dualrail::coll;
using namespace dualrail::test;

namespace {

constexpr uint32_t kComm = 0x0321;

struct Type {
    const char *name;
    size_t esz;
    ReduceFn fn;
    int gop, gtype; /* -1: no kernel (the whole-message path) */
    bool floating;
};

const Type kTypes[] = {
    {"u32 sum", 4, sum_t<uint32_t>, DR_GPU_SUM, DR_GPU_U32, false},
    {"f32 sum", 4, sum_t<float>, DR_GPU_SUM, DR_GPU_F32, true},
    {"f64 sum", 8, sum_t<double>, DR_GPU_SUM, DR_GPU_F64, true},
    {"u8 sum", 1, sum_t<uint8_t>, DR_GPU_SUM, DR_GPU_U8, false},
    {"i32 max", 4, max_t<int32_t>, DR_GPU_MAX, DR_GPU_I32, false},
    {"u32x3 sum", 12, sum_u32x3, -1, -1, false},
};

void fill(const Type &t, unsigned char *buf, size_t count, int r, uint64_t salt)
{
    const size_t bytes = count * t.esz;
    if (t.floating) {
        const size_t n = bytes / t.esz;
        for (size_t i = 0; i < n; ++i) {
            const double v =
                ((double)(mix((uint64_t)r * 7777 + i * 31 + salt) % 2000001) - 1e6) / 4096.0;
            if (t.esz == 4) {
                const float f = (float)v;
                memcpy(buf + i * 4, &f, 4);
            } else {
                memcpy(buf + i * 8, &v, 8);
            }
        }
        return;
    }
    for (size_t i = 0; i < bytes; ++i) {
        buf[i] = (unsigned char)mix((uint64_t)r * 1000003 + i + salt);
    }
}

/* Where each rank's buffers live. */
enum Layout { kAllDevice, kMixedRanks, kSendHostRecvDev, kSendDevRecvHost, kLayouts };
const char *kLayoutNames[] = {"all device", "ranks mixed", "send host/recv device",
                              "send device/recv host"};

void place(Layout l, int rank, bool *send_dev, bool *recv_dev)
{
    switch (l) {
    case kAllDevice:
        *send_dev = *recv_dev = true;
        break;
    case kMixedRanks:
        *send_dev = *recv_dev = rank % 2 == 1;
        break;
    case kSendHostRecvDev:
        *send_dev = false, *recv_dev = true;
        break;
    default:
        *send_dev = true, *recv_dev = false;
        break;
    }
}

struct Config {
    size_t count;
    const Type *type;
    int algo;
    size_t seg;
    bool inplace;
    Layout layout;
    size_t budget;
};

std::vector<Config> configs(int n)
{
    std::vector<Config> out;
    const size_t counts[] = {0, 1, (size_t)(n - 1), 1001, 30011};
    size_t k = 0;
    for (size_t count : counts) {
        for (const Type &t : kTypes) {
            for (int algo : {kAlgoAuto, kAlgoRing, kAlgoRd}) {
                for (size_t seg : {(size_t)0, (size_t)64}) {
                    if (algo == kAlgoRd && seg != 0) {
                        continue;
                    }
                    for (bool inplace : {false, true}) {
                        /* Every layout and budget over the table, not every combination. */
                        const Layout l = (Layout)(k % kLayouts);
                        const size_t budget = (k / kLayouts) % 2 == 0 ? 256 : (8u << 20);
                        ++k;
                        if (inplace && (l == kSendHostRecvDev || l == kSendDevRecvHost)) {
                            out.push_back(
                                Config{count, &t, algo, seg, inplace, kAllDevice, budget});
                            continue;
                        }
                        out.push_back(Config{count, &t, algo, seg, inplace, l, budget});
                    }
                }
            }
        }
    }
    return out;
}

std::string describe(int n, const Config &c)
{
    static const char *algos[] = {"auto", "ring", "rd"};
    char b[200];
    snprintf(b, sizeof(b), "n=%d count=%zu %s algo=%s seg=%zu %s, %s, budget %zu", n, c.count,
             c.type->name, algos[c.algo], c.seg, c.inplace ? "in-place" : "out-of-place",
             kLayoutNames[c.layout], c.budget);
    return b;
}

void run_table(int n)
{
    const dr_mem_ops_t *mem = dr_mem_standin();
    dr_mem_standin_set_lag(2);
    const std::vector<Config> cfgs = configs(n);
    fake::Net net(n, kComm);
    fake::Barrier barrier(n);
    Failures fails;
    std::vector<std::vector<unsigned char>> host_results((size_t)n);
    size_t rings = 0;
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            void *stream = nullptr;
            mem->stream_create(&stream);
            /* One staging per "communicator", reused (and grown) across calls. */
            std::unique_ptr<Staging> staging;
            for (size_t ci = 0; ci < cfgs.size(); ++ci) {
                const Config &c = cfgs[ci];
                if (ci % 40 == 0) {
                    staging.reset(new Staging(mem, c.budget)); /* budgets vary over the table */
                }
                const size_t bytes = c.count * c.type->esz;
                const uint64_t salt = ci * 7919;
                bool sdev, rdev;
                place(c.layout, rank, &sdev, &rdev);
                std::vector<unsigned char> input(bytes + 1);
                fill(*c.type, input.data(), c.count, rank, salt);
                /* Buffers: device ones from the stand-in (CPU access faults). */
                void *dsend = nullptr, *drecv = nullptr;
                std::vector<unsigned char> hsend(bytes + 1), hrecv(bytes + 1, 0xa5);
                if (sdev && !c.inplace) {
                    mem->device_alloc(&dsend, bytes + 1);
                    mem->copy_async(dsend, input.data(), bytes, stream);
                }
                if (rdev) {
                    mem->device_alloc(&drecv, bytes + 1);
                    if (c.inplace) {
                        mem->copy_async(drecv, input.data(), bytes, stream);
                    }
                }
                mem->stream_sync(stream);
                memcpy(hsend.data(), input.data(), bytes);
                if (c.inplace && !rdev) {
                    memcpy(hrecv.data(), input.data(), bytes);
                }
                void *send = c.inplace ? nullptr : (sdev ? dsend : (void *)hsend.data());
                void *recv = rdev ? drecv : (void *)hrecv.data();
                Params p;
                p.sendbuf = send;
                p.recvbuf = recv;
                p.count = c.count;
                p.elem_size = c.type->esz;
                p.reduce = c.type->fn;
                p.rank = rank;
                p.size = n;
                p.comm_id = kComm;
                p.seq = (uint32_t)(2 * ci);
                p.algorithm = c.algo;
                p.segment_size = c.seg;
                p.timeout = 60;
                p.idle = fake::FakeTransport::idle;
                p.idle_arg = &t;
                StagedArgs a;
                a.gpu_op = c.type->gop;
                a.gpu_type = c.type->gtype;
                if (rank == 0 && rdev && staged_path(p, a, mem) == kPathRing) {
                    ++rings;
                }
                barrier.wait();
                std::string err;
                dr_status_t st = allreduce_staged(t, p, a, *staging, nullptr, &err);
                if (st != DR_OK) {
                    fails.add(describe(n, c) + ": rank " + std::to_string(rank) + ": " + err);
                }
                std::vector<unsigned char> got(bytes);
                if (rdev) {
                    mem->copy_async(got.data(), drecv, bytes, stream);
                    mem->stream_sync(stream);
                } else {
                    memcpy(got.data(), hrecv.data(), bytes);
                }
                /* The reference: the host path on host copies, same schedule. */
                std::vector<unsigned char> ref(input.begin(), input.begin() + (long)bytes);
                ref.push_back(0);
                Params q = p;
                q.sendbuf = nullptr;
                q.recvbuf = ref.data();
                q.seq = (uint32_t)(2 * ci + 1);
                st = allreduce(t, q, nullptr, &err);
                if (st != DR_OK) {
                    fails.add(describe(n, c) + ": host reference failed: " + err);
                }
                if (bytes != 0 && memcmp(got.data(), ref.data(), bytes) != 0) {
                    size_t i = 0;
                    while (got[i] == ref[i]) {
                        ++i;
                    }
                    fails.add(describe(n, c) + ": rank " + std::to_string(rank) +
                              ": differs from the host path at byte " + std::to_string(i));
                }
                if (!c.type->floating && c.type->gop == DR_GPU_SUM && c.type->gtype == DR_GPU_U32) {
                    for (size_t i = 0; i < c.count; ++i) {
                        uint32_t want = 0, v;
                        for (int r = 0; r < n; ++r) {
                            std::vector<unsigned char> in(bytes + 1);
                            fill(*c.type, in.data(), c.count, r, salt);
                            memcpy(&v, in.data() + i * 4, 4);
                            want += v;
                            if (i > 3) {
                                break; /* the first elements exactly; the rest via the host path */
                            }
                        }
                        if (i > 3) {
                            break;
                        }
                        memcpy(&v, got.data() + i * 4, 4);
                        if (v != want) {
                            fails.add(describe(n, c) + ": wrong sum at " + std::to_string(i));
                        }
                    }
                }
                if (!c.inplace && !sdev && memcmp(hsend.data(), input.data(), bytes) != 0) {
                    fails.add(describe(n, c) + ": send buffer modified");
                }
                mem->device_free(dsend);
                mem->device_free(drecv);
                barrier.wait();
            }
            staging.reset();
            mem->stream_destroy(stream);
        },
        240, "staged allreduce table");
    for (const std::string &v : net.violations()) {
        fails.add("transport contract: " + v);
    }
    for (const std::string &l : fails.lines) {
        print_error("%s\n", l.c_str());
    }
    print_message("%d ranks: %zu calls, %zu on the staged ring\n", n, cfgs.size(), rings);
    assert_true(rings > 0);
    assert_int_equal(fails.lines.size(), 0);
}

/*
 * Devices (the stand-in has two, enforced as CUDA does). A rank's buffers on
 * device 1 while its thread is on device 0, as a thread that never chose a
 * device is: the staging must go to the buffers' device (else its kernels
 * fault on device-1 memory), and the thread gets device 0 back. Then, with
 * the staging on device 1: buffers on device 0 take the whole-message path
 * (no kernel on another device's memory), and the ring serves device 1
 * again from a thread on either device.
 */
void test_devices(void **state)
{
    (void)state;
    const int n = 3;
    const size_t count = 30011;
    const Type &ty = kTypes[1]; /* f32 sum: a kernel, exact integer-valued inputs */
    const dr_mem_ops_t *mem = dr_mem_standin();
    dr_mem_standin_set_lag(1);
    struct Step {
        int buf_dev, thread_dev, path;
    };
    const Step steps[] = {{1, 0, kPathRing},
                          {0, 0, kPathWhole},
                          {1, 1, kPathRing},
                          {0, 1, kPathWhole},
                          {1, 0, kPathRing}};
    fake::Net net(n, kComm);
    fake::Barrier barrier(n);
    Failures fails;
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Staging staging(mem, 8u << 20);
            const size_t bytes = count * ty.esz;
            for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); ++k) {
                const Step &sp = steps[k];
                const std::string what =
                    "step " + std::to_string(k) + ": rank " + std::to_string(rank) + ": ";
                std::vector<unsigned char> input(bytes), got(bytes);
                fill(ty, input.data(), count, rank, k * 31);
                void *stream = nullptr, *dsend = nullptr, *drecv = nullptr, *saved = nullptr;
                mem->device_enter(sp.buf_dev, &saved);
                mem->stream_create(&stream);
                mem->device_alloc(&dsend, bytes);
                mem->device_alloc(&drecv, bytes);
                mem->copy_async(dsend, input.data(), bytes, stream);
                mem->stream_sync(stream);
                mem->device_enter(sp.thread_dev, &saved);
                Params p;
                p.sendbuf = dsend;
                p.recvbuf = drecv;
                p.count = count;
                p.elem_size = ty.esz;
                p.reduce = ty.fn;
                p.rank = rank;
                p.size = n;
                p.comm_id = kComm;
                p.seq = (uint32_t)(2 * k);
                p.algorithm = kAlgoRing;
                p.segment_size = 4096;
                p.timeout = 60;
                p.idle = fake::FakeTransport::idle;
                p.idle_arg = &t;
                StagedArgs a;
                a.gpu_op = ty.gop;
                a.gpu_type = ty.gtype;
                if (staged_path(p, a, staging) != sp.path) {
                    fails.add(what + "path " + std::to_string(staged_path(p, a, staging)) +
                              ", expected " + std::to_string(sp.path));
                }
                barrier.wait();
                std::string err;
                if (allreduce_staged(t, p, a, staging, nullptr, &err) != DR_OK) {
                    fails.add(what + err);
                }
                const int cur = mem->device_current();
                if (cur != sp.thread_dev) {
                    fails.add(what + "the thread was left on device " + std::to_string(cur));
                }
                if (staging.device() != 1) {
                    fails.add(what + "staging on device " + std::to_string(staging.device()));
                }
                mem->copy_async(got.data(), drecv, bytes, stream);
                mem->stream_sync(stream);
                std::vector<unsigned char> ref(input);
                Params q = p;
                q.sendbuf = nullptr;
                q.recvbuf = ref.data();
                q.seq = (uint32_t)(2 * k + 1);
                if (allreduce(t, q, nullptr, &err) != DR_OK) {
                    fails.add(what + "host reference: " + err);
                }
                if (memcmp(got.data(), ref.data(), bytes) != 0) {
                    fails.add(what + "differs from the host path");
                }
                mem->device_free(dsend);
                mem->device_free(drecv);
                mem->stream_destroy(stream);
                mem->device_enter(0, &saved);
                barrier.wait();
            }
        },
        120, "staged allreduce across devices");
    dr_mem_standin_set_lag(0);
    for (const std::string &v : net.violations()) {
        fails.add("transport contract: " + v);
    }
    for (const std::string &l : fails.lines) {
        print_error("%s\n", l.c_str());
    }
    assert_int_equal(fails.lines.size(), 0);
}

/*
 * This rank's input (fill(), salt) on a stand-in device buffer, and the arguments of an
 * in-place staged allreduce of it (seq 0): what the tests below call allreduce_staged with.
 */
struct DeviceCall {
    const dr_mem_ops_t *mem = dr_mem_standin();
    std::vector<unsigned char> input;
    void *stream = nullptr, *drecv = nullptr;
    Params p;
    StagedArgs a;

    DeviceCall(fake::FakeTransport &t, const Type &ty, size_t count, int rank, int n, int algorithm,
               double timeout, uint64_t salt)
        : input(count * ty.esz)
    {
        fill(ty, input.data(), count, rank, salt);
        mem->stream_create(&stream);
        mem->device_alloc(&drecv, input.size());
        mem->copy_async(drecv, input.data(), input.size(), stream);
        mem->stream_sync(stream);
        p = fake::rank_params(kKindAllreduce, rank, n, t, kComm);
        p.recvbuf = drecv;
        p.count = count;
        p.elem_size = ty.esz;
        p.reduce = ty.fn;
        p.algorithm = algorithm;
        p.timeout = timeout;
        a.gpu_op = ty.gop;
        a.gpu_type = ty.gtype;
    }
    ~DeviceCall()
    {
        mem->device_free(drecv);
        mem->stream_destroy(stream);
    }
    DeviceCall(const DeviceCall &) = delete;
    DeviceCall &operator=(const DeviceCall &) = delete;
};

/*
 * One in-place staged allreduce (seq 0) of this rank's input on a stand-in
 * device buffer through staging s, then the host path on a host copy (seq 1)
 * as the reference. "" when the device result is bitwise the host's, else
 * what went wrong.
 */
std::string device_call_vs_host(fake::FakeTransport &t, Staging &s, const Type &ty, size_t count,
                                int rank, int n, int algorithm, double timeout, uint64_t salt)
{
    DeviceCall c(t, ty, count, rank, n, algorithm, timeout, salt);
    const size_t bytes = c.input.size();
    std::vector<unsigned char> got(bytes);
    std::string why;
    if (algorithm != kAlgoRd && staged_path(c.p, c.a, c.mem) != kPathRing) {
        why = "not a staged-ring call; ";
    }
    std::string err;
    if (allreduce_staged(t, c.p, c.a, s, nullptr, &err) != DR_OK) {
        why += err;
    } else {
        c.mem->copy_async(got.data(), c.drecv, bytes, c.stream);
        c.mem->stream_sync(c.stream);
        std::vector<unsigned char> ref(c.input);
        Params q = c.p;
        q.recvbuf = ref.data();
        q.seq = 1;
        if (allreduce(t, q, nullptr, &err) != DR_OK) {
            why += "host reference: " + err;
        } else if (memcmp(got.data(), ref.data(), bytes) != 0) {
            why += "differs from the host path";
        }
    }
    return why;
}

/* A table written before the device functions (left NULL): one device, always current. */
void test_table_without_devices(void **state)
{
    (void)state;
    dr_mem_ops_t old = *dr_mem_standin();
    old.device_of = nullptr;
    old.device_current = nullptr;
    old.device_enter = nullptr;
    old.device_leave = nullptr;
    const int n = 2;
    fake::Net net(n, kComm);
    Failures fails;
    fake::run_ranks(
        n,
        [&](int rank) {
            fake::FakeTransport t(net, rank);
            Staging staging(&old, 8u << 20);
            const std::string why = device_call_vs_host(t, staging, kTypes[0] /* u32 sum */, 1001,
                                                        rank, n, kAlgoRing, 60, 5);
            if (!why.empty()) {
                fails.add("rank " + std::to_string(rank) + ": " + why);
            }
            if (staging.device() != 0) {
                fails.add("rank " + std::to_string(rank) + ": staging not on device 0");
            }
        },
        60, "staged allreduce, table without device functions");
    for (const std::string &l : fails.lines) {
        print_error("%s\n", l.c_str());
    }
    assert_int_equal(fails.lines.size(), 0);
}

void test_table(void **state)
{
    (void)state;
    for (int n = 2; n <= 8; ++n) {
        run_table(n);
    }
}

/* The stand-in with its pinned host allocations failing: a rank short of pinned memory. */
dr_status_t no_pinned(void **p, size_t)
{
    *p = nullptr;
    return DR_ERR_NO_MEMORY;
}

/* The stand-in with some of its functions replaced by edit: one table per variant (per
 * lambda type), made at the first call. */
template <class Edit> const dr_mem_ops_t *standin_variant(Edit edit)
{
    static const dr_mem_ops_t ops = [&] {
        dr_mem_ops_t o = *dr_mem_standin();
        edit(o);
        return o;
    }();
    return &ops;
}

const dr_mem_ops_t *standin_without_pinned()
{
    return standin_variant([](dr_mem_ops_t &o) { o.host_alloc = no_pinned; });
}

/*
 * One rank cannot allocate its staging slots on a staged-ring call: it takes
 * the whole-message path (the host ring on a host copy) and every rank still
 * finishes with the host path's result; the others stay on the staged ring.
 * Before, that rank failed alone and its peers waited for their timeout.
 */
void test_pinned_shortage(void **state)
{
    (void)state;
    dr_mem_standin_set_lag(2);
    for (int n : {2, 3, 5}) {
        const int short_rank = n - 2;
        fake::Net net(n, kComm);
        Failures fails;
        fake::run_ranks(
            n,
            [&](int rank) {
                fake::FakeTransport t(net, rank);
                Staging staging(rank == short_rank ? standin_without_pinned() : dr_mem_standin(),
                                1u << 20);
                const std::string who = "n=" + std::to_string(n) + " rank " + std::to_string(rank);
                /* timeout 5 s: without the fallback the others fail here, not hang */
                const std::string why = device_call_vs_host(t, staging, kTypes[1] /* f32 sum */,
                                                            100003, rank, n, kAlgoAuto, 5, 17);
                if (!why.empty()) {
                    fails.add(who + ": " + why);
                }
                const unsigned long want = rank == short_rank ? 1 : 0;
                if (staging.fallbacks() != want ||
                    (want == 1 && staging.fallback_reason().find("pinned") == std::string::npos)) {
                    fails.add(who + ": " + std::to_string(staging.fallbacks()) +
                              " fallback(s), reason '" + staging.fallback_reason() + "'");
                }
            },
            60, "pinned shortage");
        for (const std::string &v : net.violations()) {
            fails.add("transport contract: " + v);
        }
        for (const std::string &l : fails.lines) {
            print_error("%s\n", l.c_str());
        }
        assert_int_equal(fails.lines.size(), 0);
    }
}

/* The stand-in with its copies failing: a rank whose device cannot copy its input. */
dr_status_t failing_copy(void *, const void *, size_t, void *)
{
    return DR_ERR_GPU;
}

const dr_mem_ops_t *standin_failing_copies()
{
    return standin_variant([](dr_mem_ops_t &o) { o.copy_async = failing_copy; });
}

/*
 * One rank's device cannot copy its input to the host, so it fails before its schedule
 * starts (recursive doubling: the whole-message path; ring: the staged ring or its
 * fallback). Its peers must return its error, told by the abort it sends them (directly or
 * along the schedule), not wait for it until their timeout. Before, the whole-message path
 * returned without telling anyone: the others ended with DR_ERR_TIMEOUT (with the default
 * timeout of the component, never).
 */
void test_early_failure_reaches_peers(void **state)
{
    (void)state;
    dr_mem_standin_set_lag(0);
    for (int n : {2, 3, 5}) {
        for (int algo : {kAlgoRd, kAlgoRing}) {
            const int bad = n - 1;
            fake::Net net(n, kComm);
            Failures fails;
            fake::run_ranks(
                n,
                [&](int rank) {
                    fake::FakeTransport t(net, rank);
                    Staging staging(rank == bad ? standin_failing_copies() : dr_mem_standin(),
                                    1u << 20);
                    /* timeout 10 s: the others' verdict without the abort */
                    DeviceCall c(t, kTypes[1] /* f32 sum */, 3001, rank, n, algo, 10, 23);
                    std::string err;
                    const dr_status_t st = allreduce_staged(t, c.p, c.a, staging, nullptr, &err);
                    if (st != DR_ERR_GPU) {
                        fails.add("n=" + std::to_string(n) + " algorithm " + std::to_string(algo) +
                                  " rank " + std::to_string(rank) + ": status " +
                                  std::to_string(st) + " (" + err +
                                  "), not the failing rank's DR_ERR_GPU");
                    }
                },
                60, "early failure");
            report(fails, net);
        }
    }
}

void test_math(void **state)
{
    (void)state;
    assert_int_equal(staged_window(0, 64, 0), 0);
    assert_int_equal(staged_window(0, 64, 100), kStagedMinWindow);        /* at least two */
    assert_int_equal(staged_window(1u << 30, 64, 100), kStagedMaxWindow); /* at most 16 */
    assert_int_equal(staged_window(1u << 30, 64, 3), 3);                  /* never above units */
    assert_int_equal(staged_window(8u << 20, 1u << 20, 100), 4);          /* 2 x 4 x 1 MiB */
    assert_int_equal(staged_window(8u << 20, 0, 100), kStagedMaxWindow);
    /* 4 ranks, 3 segments: reduce-scatter units 0..8 have no gate; unit 9 (step 3,
     * the first allgather step) overwrites the segment send 0 read. */
    for (size_t u = 0; u < 9; ++u) {
        assert_int_equal(staged_overwrite_gate(u, 4, 3), -1);
    }
    assert_int_equal(staged_overwrite_gate(9, 4, 3), 0);
    assert_int_equal(staged_overwrite_gate(17, 4, 3), 8);
    /* The gate is the same block and segment, n-1 steps earlier. */
    for (int n = 2; n <= 9; ++n) {
        const int nseg = 3;
        for (size_t u = (size_t)(n - 1) * nseg; u < (size_t)ring_steps(n) * nseg; ++u) {
            const long long g = staged_overwrite_gate(u, n, nseg);
            const int st = (int)(u / nseg), gs = (int)((size_t)g / nseg);
            for (int r = 0; r < n; ++r) {
                assert_int_equal(ring_recv_block(r, n, st), ring_send_block(r, n, gs));
            }
            assert_int_equal((size_t)g % nseg, u % nseg);
        }
    }
    assert_int_equal(staged_send_source(2, 3), -1);
    assert_int_equal(staged_send_source(3, 3), 0);
    assert_int_equal(staged_send_source(10, 3), 7);
}

} // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_math),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_table_without_devices),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_pinned_shortage),
        cmocka_unit_test(test_early_failure_reaches_peers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
