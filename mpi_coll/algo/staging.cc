/* Per-communicator staging for device buffers (staged.hpp). */
#include <cstdio>
#include <mutex>
#include <new>
#include <vector>

#include "algo/staged.hpp"

namespace dualrail {
namespace coll {

DeviceScope::~DeviceScope()
{
    if (switched_) {
        mem_->device_leave(saved_);
    }
}

dr_status_t DeviceScope::enter(int device)
{
    /* Already there: nothing is touched (an application's own context stays current). */
    if (device < 0 || switched_ || mem_->device_enter == nullptr ||
        mem_->device_current == nullptr || mem_->device_current() == device) {
        return DR_OK;
    }
    dr_status_t st = mem_->device_enter(device, &saved_);
    switched_ = st == DR_OK;
    return st;
}

Staging::Staging(const dr_mem_ops_t *mem, size_t budget) : mem_(mem), budget_(budget) {}

Staging::~Staging()
{
    DeviceScope scope(mem_);
    scope.enter(device_);
    /* Nothing may still write into the slots we free (error paths synchronized already). */
    if (reduce_stream != nullptr) {
        mem_->stream_sync(reduce_stream);
    }
    if (d2h_stream != nullptr) {
        mem_->stream_sync(d2h_stream);
    }
    release_slots();
    for (size_t i = 0; i < kStagedMaxWindow; ++i) {
        if (reduced[i] != nullptr) {
            mem_->event_destroy(reduced[i]);
        }
        if (copied[i] != nullptr) {
            mem_->event_destroy(copied[i]);
        }
    }
    if (reduce_stream != nullptr) {
        mem_->stream_destroy(reduce_stream);
    }
    if (d2h_stream != nullptr) {
        mem_->stream_destroy(d2h_stream);
    }
}

static dr_status_t mem_error(const dr_mem_ops_t *mem, dr_status_t st, const char *what,
                             std::string *err)
{
    if (err != nullptr) {
        try {
            *err = std::string("staging: ") + what + ": " + mem->last_error();
        } catch (const std::bad_alloc &) {
        }
    }
    return st;
}

dr_status_t Staging::init(int device, std::string *err)
{
    if (device_ >= 0) {
        return DR_OK;
    }
    DeviceScope scope(mem_);
    dr_status_t st = scope.enter(device);
    const int cur = device >= 0                       ? device
                    : mem_->device_current != nullptr ? mem_->device_current()
                                                      : 0;
    if (st == DR_OK && cur < 0) {
        st = DR_ERR_NO_DEVICE;
    }
    if (st != DR_OK) {
        return mem_error(mem_, st, "cannot use the buffers' device", err);
    }
    if (reduce_stream == nullptr && (st = mem_->stream_create(&reduce_stream)) != DR_OK) {
        reduce_stream = nullptr;
        return mem_error(mem_, st, "cannot create a stream", err);
    }
    if (d2h_stream == nullptr && (st = mem_->stream_create(&d2h_stream)) != DR_OK) {
        d2h_stream = nullptr;
        return mem_error(mem_, st, "cannot create a stream", err);
    }
    for (size_t i = 0; i < kStagedMaxWindow; ++i) {
        if (reduced[i] == nullptr && (st = mem_->event_create(&reduced[i])) != DR_OK) {
            reduced[i] = nullptr;
            return mem_error(mem_, st, "cannot create an event", err);
        }
        if (copied[i] == nullptr && (st = mem_->event_create(&copied[i])) != DR_OK) {
            copied[i] = nullptr;
            return mem_error(mem_, st, "cannot create an event", err);
        }
    }
    device_ = cur;
    return DR_OK;
}

void Staging::release_slots()
{
    mem_->host_free(host_recv);
    mem_->host_free(host_send);
    mem_->device_free(dev);
    host_recv = host_send = dev = nullptr;
    slot_bytes = window = 0;
}

dr_status_t Staging::reserve(size_t w, size_t bytes, std::string *err)
{
    if (host_recv != nullptr && w <= window && bytes <= slot_bytes) {
        return DR_OK;
    }
    /* Grow to what this call needs and to what the budget allows, whichever is more. */
    size_t nw = w > window ? w : window, nb = bytes > slot_bytes ? bytes : slot_bytes;
    release_slots();
    void *r = nullptr, *s = nullptr, *d = nullptr;
    dr_status_t st;
    if ((st = mem_->host_alloc(&r, nw * nb)) != DR_OK) {
        return mem_error(mem_, st, "cannot allocate pinned receive staging", err);
    }
    if ((st = mem_->host_alloc(&s, nw * nb)) != DR_OK) {
        mem_->host_free(r);
        return mem_error(mem_, st, "cannot allocate pinned send staging", err);
    }
    if ((st = mem_->device_alloc(&d, nw * nb)) != DR_OK) {
        mem_->host_free(r);
        mem_->host_free(s);
        return mem_error(mem_, st, "cannot allocate device scratch", err);
    }
    host_recv = static_cast<char *>(r);
    host_send = static_cast<char *>(s);
    dev = static_cast<char *>(d);
    window = nw;
    slot_bytes = nb;
    return DR_OK;
}

void Staging::note_fallback(const std::string &why)
{
    ++fallbacks_;
    try {
        fallback_reason_ = why;
    } catch (const std::bad_alloc &) {
    }
}

void *Staging::whole(size_t bytes)
{
    return whole_.reserve(bytes);
}

void Staging::abandon_send()
{
    static std::mutex mu;
    static std::vector<void *> *parked = new std::vector<void *>;
    std::lock_guard<std::mutex> lk(mu);
    try {
        parked->push_back(host_send);
    } catch (const std::bad_alloc &) {
    }
    host_send = nullptr;
    /* The other slots are fine, but a reserve() must allocate all three again. */
    mem_->host_free(host_recv);
    mem_->device_free(dev);
    host_recv = dev = nullptr;
    slot_bytes = window = 0;
}

} // namespace coll
} // namespace dualrail
