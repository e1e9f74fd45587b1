/*
 * An in-memory network for the algorithm tests (gloo-style: one thread per
 * rank over a shared mailbox), with the same contract as ucx_mr:
 *   - messages match on (source, destination, key); one that arrives before
 *     its receive waits in the mailbox;
 *   - data is copied from the sender's buffer only when the message matches,
 *     and the send completes later still, when the receiving rank next calls
 *     progress() or test() (ucx_mr's acknowledgement), so a send buffer stays
 *     busy for a while after the receiver has the data;
 *   - a running receive can be cancelled, a running send cannot.
 * It also checks what ucx_mr cannot, and records violations for: a key used
 * twice between the same pair (in the same direction), a key with the wrong
 * communicator id, a send buffer modified before the send completed (checksum
 * at post against checksum at match), and a receive posted into memory that a
 * running send of the same rank still reads. Links can be made to fail after
 * k messages.
 */
#ifndef DUALRAIL_TEST_ALGO_FAKE_HPP
#define DUALRAIL_TEST_ALGO_FAKE_HPP

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "algo/allreduce.hpp"
#include "algo/transport.hpp"
#include "dualrail/key.h"

namespace fake {

using dualrail::coll::Transport;

struct Req {
    bool send = false;
    int src = 0, dst = 0;
    uint64_t key = 0;
    const void *sbuf = nullptr;
    void *rbuf = nullptr;
    size_t len = 0; /* send: length; receive: capacity */
    size_t got = 0;
    uint64_t sum = 0; /* send: checksum of the buffer when posted */
    std::atomic<int> status{DR_INPROGRESS};
    std::vector<unsigned char> copy; /* Net::copy_sends: the bytes on the wire */
};

inline uint64_t checksum(const void *buf, size_t len)
{
    const unsigned char *p = static_cast<const unsigned char *>(buf);
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < len; ++i) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h;
}

class Net {
  public:
    Net(int n, uint32_t comm) : n_(n), comm_(comm), ranks_((size_t)n) {}
    ~Net()
    {
        for (Req *r : live_) {
            delete r;
        }
    }
    int size() const { return n_; }

    /* Link a-b (both directions) fails once `after` messages crossed it. */
    void fail_link(int a, int b, long after)
    {
        std::lock_guard<std::mutex> lk(mu_);
        Link &l = links_[pair(a, b)];
        l.fail_after = after;
        if (l.crossed >= after) {
            break_link_locked(a, b);
        }
    }

    std::vector<std::string> violations()
    {
        std::lock_guard<std::mutex> lk(mu_);
        return violations_;
    }
    void forget_keys()
    {
        std::lock_guard<std::mutex> lk(mu_);
        keys_.clear();
    }
    /* Sends complete when posted, as ucx_mr's copied small sends: the network keeps a copy
     * that travels (and is acknowledged) on its own. With them, receives of up to
     * kTakeMax bytes may be taken without a request (take(), as dr_mr_take). */
    void copy_sends(bool on)
    {
        std::lock_guard<std::mutex> lk(mu_);
        copy_ = on;
    }
    static constexpr size_t kTakeMax = 256;
    size_t take_max() const { return copy_ ? kTakeMax : 0; }
    size_t messages() const { return messages_.load(); }
    size_t takes() const { return takes_.load(); }
    size_t data_messages() const { return data_messages_.load(); }

    dr_status_t isend(int src, int dst, uint64_t key, const void *buf, size_t len, Req **out)
    {
        if (dst < 0 || dst >= n_ || dst == src) {
            return DR_ERR_INVALID;
        }
        Req *r = new Req;
        r->send = true;
        r->src = src;
        r->dst = dst;
        r->key = key;
        r->sbuf = buf;
        r->len = len;
        r->sum = checksum(buf, len);
        std::lock_guard<std::mutex> lk(mu_);
        live_.insert(r);
        *out = r;
        ++messages_;
        const dr_key_fields_t f = dr_key_unpack(key);
        if (f.step != dualrail_abort_step()) {
            ++data_messages_;
        }
        if (f.comm != comm_) {
            violation("rank %d -> %d: key with comm %u, expected %u", src, dst, f.comm, comm_);
        }
        if (!keys_.insert(std::make_tuple(src, dst, key)).second) {
            violation("rank %d -> %d: key reused (seq %u step %u block %u seg %u)", src, dst, f.seq,
                      f.step, f.block, f.seg);
        }
        if (link_broken(src, dst)) {
            complete(r, DR_ERR_PEER_UNREACHABLE);
            return DR_OK;
        }
        if (copy_) {
            Req *w = new Req; /* the copy on the wire; the caller's send is done */
            w->send = true;
            w->src = src;
            w->dst = dst;
            w->key = key;
            w->len = len;
            w->copy.assign(static_cast<const unsigned char *>(buf),
                           static_cast<const unsigned char *>(buf) + len);
            w->sbuf = w->copy.data();
            w->sum = r->sum;
            live_.insert(w);
            r->got = len;
            complete(r, DR_OK);
            r = w;
        }
        for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
            Req *q = *it;
            if (q->src == src && q->dst == dst && q->key == key) {
                recvs_.erase(it);
                deliver(r, q);
                return DR_OK;
            }
        }
        sends_.push_back(r);
        bump(dst); /* an arrival: a rank that takes its messages looks again */
        return DR_OK;
    }

    /* dr_mr_take: a message already here (its send matched now, as by a receive posted
     * and completed at once), or DR_INPROGRESS with nothing changed. */
    dr_status_t take(int dst, int src, uint64_t key, void *buf, size_t cap, size_t *got)
    {
        if (src < 0 || src >= n_ || dst == src) {
            return DR_ERR_INVALID;
        }
        std::lock_guard<std::mutex> lk(mu_);
        for (auto it = sends_.begin(); it != sends_.end(); ++it) {
            Req *q = *it;
            if (q->src != src || q->dst != dst || q->key != key) {
                continue;
            }
            if (q->len > cap) {
                return DR_INPROGRESS; /* a posted receive reports the truncation */
            }
            sends_.erase(it);
            Req r;
            r.src = src;
            r.dst = dst;
            r.key = key;
            r.rbuf = buf;
            r.len = cap;
            deliver(q, &r);
            *got = r.got;
            ++takes_;
            return (dr_status_t)r.status.load();
        }
        return DR_INPROGRESS;
    }

    dr_status_t irecv(int dst, int src, uint64_t key, void *buf, size_t cap, Req **out)
    {
        if (src < 0 || src >= n_ || dst == src) {
            return DR_ERR_INVALID;
        }
        Req *r = new Req;
        r->src = src;
        r->dst = dst;
        r->key = key;
        r->rbuf = buf;
        r->len = cap;
        std::lock_guard<std::mutex> lk(mu_);
        live_.insert(r);
        *out = r;
        const char *lo = static_cast<const char *>(buf), *hi = lo + cap;
        auto overlaps = [&](const Req *s) {
            const char *slo = static_cast<const char *>(s->sbuf), *shi = slo + s->len;
            return s->src == dst && s->len != 0 && cap != 0 && lo < shi && slo < hi;
        };
        for (const Rank &k : ranks_) {
            for (const Req *s : k.acks) {
                if (overlaps(s)) {
                    violation("rank %d: receive from %d posted into memory its send to %d still "
                              "reads (not yet acknowledged)",
                              dst, src, s->dst);
                }
            }
        }
        for (const Req *s : sends_) {
            const char *slo = static_cast<const char *>(s->sbuf), *shi = slo + s->len;
            if (s->src == dst && s->len != 0 && cap != 0 && lo < shi && slo < hi) {
                violation("rank %d: receive from %d posted into memory its running send to %d "
                          "still reads",
                          dst, src, s->dst);
            }
        }
        if (link_broken(src, dst)) {
            complete(r, DR_ERR_PEER_UNREACHABLE);
            return DR_OK;
        }
        for (auto it = sends_.begin(); it != sends_.end(); ++it) {
            Req *s = *it;
            if (s->src == src && s->dst == dst && s->key == key) {
                sends_.erase(it);
                deliver(s, r);
                return DR_OK;
            }
        }
        recvs_.push_back(r);
        return DR_OK;
    }

    dr_status_t test(Req *r, size_t *len)
    {
        const int st = r->status.load(std::memory_order_acquire);
        if (st != DR_INPROGRESS && len != nullptr) {
            *len = r->got;
        }
        return (dr_status_t)st;
    }

    dr_status_t cancel(Req *r)
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (r->status.load() != DR_INPROGRESS) {
            return DR_OK;
        }
        if (r->send) {
            return DR_ERR_INVALID;
        }
        recvs_.erase(std::remove(recvs_.begin(), recvs_.end(), r), recvs_.end());
        complete(r, DR_ERR_CANCELED);
        return DR_OK;
    }

    void release(Req *r)
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (r->status.load() == DR_INPROGRESS) {
            violation("rank %d: released a running %s", r->send ? r->src : r->dst,
                      r->send ? "send" : "receive");
            return;
        }
        live_.erase(r);
        delete r;
    }

    /* Non-zero when anything happened to rank's requests since its last call. */
    int progress(int rank)
    {
        Rank &k = ranks_[(size_t)rank];
        flush_acks(rank);
        const uint64_t v = k.version.load(std::memory_order_acquire);
        if (v != k.seen) {
            k.seen = v;
            return 1;
        }
        return 0;
    }

    /* The idle hook: sleep until something happens to rank (or a little while). */
    void wait_change(int rank, std::chrono::microseconds limit)
    {
        Rank &k = ranks_[(size_t)rank];
        std::unique_lock<std::mutex> lk(mu_);
        k.cv.wait_for(lk, limit, [&] { return k.version.load() != k.seen; });
    }

    /* The receiving rank acknowledges what it received: those sends complete now. */
    void flush_acks(int rank)
    {
        Rank &k = ranks_[(size_t)rank];
        if (k.nacks.load(std::memory_order_acquire) == 0) {
            return;
        }
        std::lock_guard<std::mutex> lk(mu_);
        for (Req *s : k.acks) {
            complete(s, DR_OK);
        }
        k.acks.clear();
        k.nacks.store(0);
    }

    const char *last_error(int rank) const
    {
        const char *e = ranks_[(size_t)rank].last_error.load();
        return e != nullptr ? e : "";
    }

    static uint32_t dualrail_abort_step() { return 0xfff; }

  private:
    struct Rank {
        std::condition_variable cv;
        std::atomic<uint64_t> version{0};
        uint64_t seen = 0; /* owned by the rank's thread */
        std::atomic<const char *> last_error{nullptr};
        std::vector<Req *> acks; /* matched sends this rank has not acknowledged yet */
        std::atomic<size_t> nacks{0};
    };
    struct Link {
        long crossed = 0;
        long fail_after = -1;
        bool broken = false;
    };

    static std::pair<int, int> pair(int a, int b) { return {std::min(a, b), std::max(a, b)}; }

    bool link_broken(int a, int b)
    {
        auto it = links_.find(pair(a, b));
        return it != links_.end() && it->second.broken;
    }

    void bump(int rank)
    {
        Rank &k = ranks_[(size_t)rank];
        k.version.fetch_add(1, std::memory_order_release);
        k.cv.notify_all();
    }

    void complete(Req *r, dr_status_t st)
    {
        if (st == DR_ERR_PEER_UNREACHABLE || st == DR_ERR_TRUNCATED) {
            const int me = r->send ? r->src : r->dst;
            errors_.push_back(st == DR_ERR_TRUNCATED
                                  ? "a message of " + std::to_string(r->got) +
                                        " bytes for a buffer of " + std::to_string(r->len)
                                  : "link " + std::to_string(r->src) + "-" +
                                        std::to_string(r->dst) + " failed (injected)");
            ranks_[(size_t)me].last_error.store(errors_.back().c_str());
        }
        r->status.store(st, std::memory_order_release);
        bump(r->send ? r->src : r->dst);
    }

    void deliver(Req *s, Req *r)
    {
        if (checksum(s->sbuf, s->len) != s->sum) {
            violation("rank %d: buffer of a send to %d changed before the send completed", s->src,
                      s->dst);
        }
        /* The acknowledgement is queued before the receive completes, so a receiver that
         * sees the completion (test) always sends it. */
        s->got = s->len;
        Rank &k = ranks_[(size_t)r->dst];
        k.acks.push_back(s);
        k.nacks.store(k.acks.size(), std::memory_order_release);
        if (s->len > r->len) {
            r->got = s->len;
            complete(r, DR_ERR_TRUNCATED);
        } else {
            if (s->len != 0) {
                memcpy(r->rbuf, s->sbuf, s->len);
            }
            r->got = s->len;
            complete(r, DR_OK);
        }
        Link &l = links_[pair(s->src, s->dst)];
        if (++l.crossed >= l.fail_after && l.fail_after >= 0 && !l.broken) {
            break_link_locked(s->src, s->dst);
        }
    }

    void break_link_locked(int a, int b)
    {
        links_[pair(a, b)].broken = true;
        auto on_link = [&](Req *q) { return pair(q->src, q->dst) == pair(a, b); };
        for (Rank &k : ranks_) {
            for (auto it = k.acks.begin(); it != k.acks.end();) {
                if (on_link(*it)) {
                    complete(*it, DR_ERR_PEER_UNREACHABLE);
                    it = k.acks.erase(it);
                } else {
                    ++it;
                }
            }
            k.nacks.store(k.acks.size());
        }
        for (auto *list : {&sends_, &recvs_}) {
            for (auto it = list->begin(); it != list->end();) {
                if (on_link(*it)) {
                    complete(*it, DR_ERR_PEER_UNREACHABLE);
                    it = list->erase(it);
                } else {
                    ++it;
                }
            }
        }
    }

    void violation(const char *fmt, ...) __attribute__((format(printf, 2, 3)))
    {
        char line[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (violations_.size() < 20) {
            violations_.push_back(line);
        }
    }

    const int n_;
    const uint32_t comm_;
    std::mutex mu_;
    std::vector<Rank> ranks_;
    std::deque<Req *> sends_, recvs_;
    std::unordered_set<Req *> live_;
    std::map<std::pair<int, int>, Link> links_;
    std::set<std::tuple<int, int, uint64_t>> keys_;
    std::vector<std::string> violations_;
    std::deque<std::string> errors_; /* stable storage for last_error pointers */
    std::atomic<size_t> messages_{0}, data_messages_{0}, takes_{0};
    std::atomic<bool> copy_{false};
};

class FakeTransport final : public Transport {
  public:
    FakeTransport(Net &net, int self) : net_(net), self_(self) {}

    dr_status_t isend(int peer, uint64_t key, const void *buf, size_t len, Req *req) override
    {
        fake::Req *r = nullptr;
        dr_status_t st = net_.isend(self_, peer, key, buf, len, &r);
        *req = r;
        return st;
    }
    dr_status_t irecv(int peer, uint64_t key, void *buf, size_t cap, Req *req) override
    {
        fake::Req *r = nullptr;
        dr_status_t st = net_.irecv(self_, peer, key, buf, cap, &r);
        *req = r;
        return st;
    }
    dr_status_t test(Req req, size_t *len) override
    {
        const dr_status_t st = net_.test(static_cast<fake::Req *>(req), len);
        net_.flush_acks(self_);
        return st;
    }
    dr_status_t cancel(Req req) override { return net_.cancel(static_cast<fake::Req *>(req)); }
    void release(Req req) override { net_.release(static_cast<fake::Req *>(req)); }
    int progress() override { return net_.progress(self_); }
    size_t take_max() const override { return net_.take_max(); }
    dr_status_t take(int peer, uint64_t key, void *buf, size_t cap, size_t *len) override
    {
        return net_.take(self_, peer, key, buf, cap, len);
    }
    void peer_name(int peer, char *buf, size_t len) const override
    {
        snprintf(buf, len, "peer rank %d", peer);
    }
    const char *last_error() const override { return net_.last_error(self_); }

    /* Params::idle for this rank. */
    static void idle(void *arg)
    {
        auto *t = static_cast<FakeTransport *>(arg);
        t->net_.wait_change(t->self_, std::chrono::microseconds(500));
    }

  private:
    Net &net_;
    int self_;
};

/* A reusable barrier (C++17 has none). */
class Barrier {
  public:
    explicit Barrier(int n) : n_(n) {}
    void wait()
    {
        std::unique_lock<std::mutex> lk(mu_);
        const uint64_t gen = gen_;
        if (++waiting_ == n_) {
            waiting_ = 0;
            ++gen_;
            cv_.notify_all();
        } else {
            cv_.wait(lk, [&] { return gen_ != gen; });
        }
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    const int n_;
    int waiting_ = 0;
    uint64_t gen_ = 0;
};

/*
 * Run body(rank) on n threads. A schedule that hangs fails the test: after
 * limit_s the process prints what it was doing and aborts (ctest reports it)
 * instead of hanging.
 */
inline void run_ranks(int n, const std::function<void(int)> &body, double limit_s, const char *what)
{
    std::vector<std::thread> threads;
    std::atomic<int> left{n};
    std::mutex mu;
    std::condition_variable cv;
    for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
            body(r);
            std::lock_guard<std::mutex> lk(mu);
            --left;
            cv.notify_all();
        });
    }
    {
        std::unique_lock<std::mutex> lk(mu);
        if (!cv.wait_for(lk, std::chrono::duration<double>(limit_s), [&] { return left == 0; })) {
            fprintf(stderr, "HANG: %s: %d of %d ranks still running after %.0f s\n", what,
                    left.load(), n, limit_s);
            fflush(stderr);
            abort();
        }
    }
    for (auto &t : threads) {
        t.join();
    }
}

} // namespace fake

#endif
