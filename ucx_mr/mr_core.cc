/*
 * ucx_mr: contexts, planes, peers, pools, logging and the C API entry points that
 * are not on the data path (endpoints: mr_ep.cc).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "dualrail/planes.h"
#include "errbuf.hpp"
#include "mr_internal.hpp"

namespace dualrail {
namespace mr {

uint64_t now_us()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void SegQueue::push(const SegRef &r)
{
    if (count_ == buf_.size()) {
        std::vector<SegRef> bigger(buf_.empty() ? 64 : buf_.size() * 2);
        for (size_t i = 0; i < count_; ++i) {
            bigger[i] = buf_[(head_ + i) % buf_.size()];
        }
        buf_.swap(bigger);
        head_ = 0;
    }
    buf_[(head_ + count_) % buf_.size()] = r;
    ++count_;
}

SegRef SegQueue::pop()
{
    SegRef r = buf_[head_];
    head_ = (head_ + 1) % buf_.size();
    --count_;
    return r;
}

void Mr::log(int level, const char *fmt, ...)
{
    if (level > cfg.verbose) {
        return;
    }
    char msg[1024];
    int n = snprintf(msg, sizeof(msg), "%s: ", name.c_str());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
    va_end(ap);
    if (cfg.log != nullptr) {
        cfg.log(level, msg, cfg.log_arg);
    } else {
        fprintf(stderr, "dualrail %s\n", msg);
    }
}

Peer *Mr::peer_new(uint32_t id, bool create)
{
    if (!create) {
        return nullptr;
    }
    if (id >= peers.size()) {
        peers.resize((size_t)id + 1);
    }
    auto p = std::make_unique<Peer>();
    p->id = id;
    p->done.assign(kDoneRing, Done{0, 0, false});
    for (size_t i = 0; i < planes.size(); ++i) {
        auto l = std::make_unique<Link>();
        l->mr = this;
        l->peer = id;
        l->plane = (int)i;
        l->state = DR_LINK_UP;
        p->links[i] = std::move(l);
    }
    weights_init(p.get());
    peers[id] = std::move(p);
    return peers[id].get();
}

Link *Mr::link_get(uint32_t peer, int plane)
{
    Peer *p = peer_get(peer, false);
    return p == nullptr ? nullptr : p->links[plane].get();
}

Op *Mr::op_get()
{
    if (free_ops.empty()) {
        ops.push_back(std::make_unique<Op>());
        free_ops.push_back(ops.back().get());
    }
    Op *op = free_ops.back();
    free_ops.pop_back();
    op->in_use = true;
    return op;
}

void Mr::op_put(Op *op)
{
    op->in_use = false;
    op->counted = false;
    op->req = nullptr;
    op->flat = nullptr;
    op->link = nullptr;
    free_ops.push_back(op);
}

Req *Mr::req_get()
{
    if (free_reqs.empty()) {
        reqs.push_back(std::unique_ptr<Req>(new dr_mr_req()));
        free_reqs.push_back(reqs.back().get());
    }
    Req *r = free_reqs.back();
    free_reqs.pop_back();
    r->in_use = true;
    r->listed = false;
    r->complete = false;
    r->status = DR_OK;
    r->segs.clear();
    r->got.clear();
    r->ops = 0;
    r->acked = false;
    r->copied = false;
    r->released = false;
    r->bound = false;
    r->total = r->received = 0;
    r->last_plane = 0;
    return r;
}

std::string Mr::peer_state_text(const Peer *p) const
{
    std::string s;
    for (size_t i = 0; i < planes.size(); ++i) {
        const Link *l = p->links[i].get();
        char buf[512];
        snprintf(buf, sizeof(buf), "%splane %zu (%s): %s%s%s", i ? "; " : "", i,
                 planes[i]->device.c_str(), l->state == DR_LINK_UP ? "up" : "down",
                 l->reason.empty() ? "" : ", ", l->state == DR_LINK_UP ? "" : l->reason.c_str());
        s += buf;
    }
    return s;
}


static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    Plane *pl = static_cast<Plane *>(arg);
    const size_t extra = header_length - sizeof(WireHdr);
    if (header_length < sizeof(WireHdr) || extra % sizeof(uint32_t) != 0 ||
        extra / sizeof(uint32_t) > kAckList) {
        pl->mr->log(DR_LOG_INFO, "plane %d (%s): dropped a message with a %zu-byte header",
                    pl->index, pl->device.c_str(), header_length);
        return UCS_OK;
    }
    WireHdr h;
    memcpy(&h, header, sizeof(h));
    AckList acks;
    acks.n = (uint32_t)(extra / sizeof(uint32_t));
    memcpy(acks.id, static_cast<const char *>(header) + sizeof(WireHdr), extra);
    ucs_status_t ret = UCS_OK;
    pl->mr->on_am(pl, h, acks, data, length, param->recv_attr, &ret);
    return ret;
}

/*
 * One wire segment = one UCX operation that UCX finishes with at once. Two UCX 1.13
 * behaviours make anything else unsafe when a plane fails under large messages:
 *  - a message larger than the TCP transport's segment travels as several fragments,
 *    and the receiver drops the later ones when the endpoint they name is gone: the
 *    segment is lost without an error (a collective stalled until TCP gave up);
 *  - a zero-copy send still owned by the transport when its endpoint fails is completed
 *    twice (the assertion `comp->count > 0` in uct_iface.h aborts the process).
 * So every segment is sent by copy (ZCOPY_THRESH=inf, set per context in plane_open) and
 * the TCP transport's send and receive segments hold a whole wire segment plus headers.
 * Flapping a plane under 4 MiB allreduces hit one or the other in about 3 runs of 10.
 * The segment sizes are transport settings that UCX 1.13 reads from the environment
 * only; a value the user set wins (and is reported at info level when too small).
 */
static void tcp_segment_env(Mr *mr, const Plane *pl)
{
    static bool ours[2] = {false, false}; /* set by us, not the user: may be raised */
    const char *const vars[2] = {"UCX_TCP_TX_SEG_SIZE", "UCX_TCP_RX_SEG_SIZE"};
    const uint64_t need = std::max<uint64_t>(mr->cfg.segment_size + kTcpSegSlack, 64 * 1024);
    for (int i = 0; i < 2; ++i) {
        const char *var = vars[i];
        const char *have = getenv(var);
        if (have == nullptr || (ours[i] && strtoull(have, nullptr, 10) < need)) {
            setenv(var, std::to_string(need).c_str(), 1);
            ours[i] = true;
        } else if (!ours[i] && strtoull(have, nullptr, 10) < need) {
            mr->log(DR_LOG_INFO, "plane %d: %s=%s set by the user is too small: a wire segment "
                    "of %llu B needs %llu to travel as one fragment", pl->index, var, have,
                    (unsigned long long)mr->cfg.segment_size, (unsigned long long)need);
        }
    }
}

static dr_status_t plane_open(Mr *mr, Plane *pl, char *err, size_t errlen)
{
    /* A blocking connect() to a black-holed plane would stall the whole process for
     * minutes. UCX 1.13 takes this transport setting from the environment only; a
     * value the user set wins. */
    setenv("UCX_TCP_CONN_NB", "y", 0);
    tcp_segment_env(mr, pl);
    const char *zcopy = getenv("UCX_ZCOPY_THRESH");
    ucp_config_t *config;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
    if (st != UCS_OK) {
        set_err(err, errlen, "plane %d: ucp_config_read: %s", pl->index, ucs_status_string(st));
        return DR_ERR_UCX;
    }
    char ucx_device[DR_DEVICE_NAME_MAX + 16];
    dr_plane_ucx_device(pl->device.c_str(), "/sys", ucx_device, sizeof(ucx_device));
    if (pl->device != ucx_device) {
        mr->log(DR_LOG_INFO, "plane %d: device %s is %s for UCX (its active or lowest port)",
                pl->index, pl->device.c_str(), ucx_device);
    }
    struct {
        const char *key, *value;
    } settings[] = {
        {"NET_DEVICES", ucx_device},
        {"TLS", mr->transports.c_str()},
        /* Copy-send only (see tcp_segment_env); a UCX_ZCOPY_THRESH the user set wins. */
        {"ZCOPY_THRESH", zcopy != nullptr ? zcopy : "inf"},
    };
    for (auto &s : settings) {
        st = ucp_config_modify(config, s.key, s.value);
        if (st != UCS_OK) {
            set_err(err, errlen, "plane %d (%s): cannot set UCX %s=%s: %s", pl->index,
                    pl->device.c_str(), s.key, s.value, ucs_status_string(st));
            ucp_config_release(config);
            return DR_ERR_UCX;
        }
    }
    ucp_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    /* WAKEUP only when asked for (dr_mr_config_t.wakeup): it costs every small message. */
    /* TAG for whole small messages (kWholeTag), AM for everything else. */
    params.features =
        UCP_FEATURE_AM | UCP_FEATURE_TAG | (mr->cfg.wakeup != 0 ? UCP_FEATURE_WAKEUP : 0);
    params.name = "dualrail";
    st = ucp_init(&params, config, &pl->context);
    ucp_config_release(config);
    if (st != UCS_OK) {
        set_err(err, errlen, "plane %d (%s): ucp_init: %s (is the device usable with UCX_TLS=%s?)",
                pl->index, ucx_device, ucs_status_string(st), mr->transports.c_str());
        pl->context = nullptr;
        return DR_ERR_UCX;
    }
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    /* A context is used by one thread at a time, not always the one that made it
     * (a test's receiving thread, an MPI application's): that is UCX's SERIALIZED.
     * SINGLE promises the creating thread only; UCX 1.18 asserts it (ucp_am_send_nbx:
     * ucs_async_check_owner_thread), 1.13 did not check. With thread_safe the
     * context's mutex (Guard) is what serialises several threads' calls. */
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(pl->context, &wp, &pl->worker);
    if (st != UCS_OK) {
        set_err(err, errlen, "plane %d (%s): ucp_worker_create: %s", pl->index, pl->device.c_str(),
                ucs_status_string(st));
        pl->worker = nullptr;
        return DR_ERR_UCX;
    }
    ucp_am_handler_param_t hp;
    memset(&hp, 0, sizeof(hp));
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = kAmId;
    hp.cb = am_cb;
    hp.arg = pl;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    st = ucp_worker_set_am_recv_handler(pl->worker, &hp);
    if (st != UCS_OK) {
        set_err(err, errlen, "plane %d (%s): set_am_recv_handler: %s", pl->index,
                pl->device.c_str(), ucs_status_string(st));
        return DR_ERR_UCX;
    }
    ucp_worker_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
    /* Network addresses only: a peer must never reach us over shared memory. */
    attr.address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY;
    st = ucp_worker_query(pl->worker, &attr);
    if (st != UCS_OK) {
        set_err(err, errlen, "plane %d (%s): worker address: %s", pl->index, pl->device.c_str(),
                ucs_status_string(st));
        return DR_ERR_UCX;
    }
    pl->address = attr.address;
    pl->address_len = attr.address_length;
    int efd;
    if (mr->cfg.wakeup != 0 && ucp_worker_get_efd(pl->worker, &efd) == UCS_OK) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN;
        ev.data.u32 = (uint32_t)pl->index;
        if (mr->epfd < 0) {
            mr->epfd = epoll_create1(EPOLL_CLOEXEC);
        }
        if (mr->epfd >= 0) {
            epoll_ctl(mr->epfd, EPOLL_CTL_ADD, efd, &ev);
        }
    }
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) == 0) {
        std::string base = pl->device.substr(0, pl->device.find(':'));
        for (struct ifaddrs *i = ifs; i != nullptr; i = i->ifa_next) {
            if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET && base == i->ifa_name) {
                char buf[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr, buf,
                          sizeof(buf));
                pl->ip = buf;
                break;
            }
        }
        freeifaddrs(ifs);
    }
    mr->lane_open(pl);
    return DR_OK;
}

static void put_u32(std::vector<uint8_t> &b, uint32_t v)
{
    uint8_t x[4];
    memcpy(x, &v, 4);
    b.insert(b.end(), x, x + 4);
}

static void mr_teardown(Mr *mr)
{
    /* Receives still running are cancelled first, so no late segment lands in a buffer
     * the caller is about to free. */
    for (auto &p : mr->peers) {
        if (!p) {
            continue;
        }
        for (Req *r : p->recvs) {
            if (!r->complete) {
                r->status = DR_ERR_CANCELED;
                r->complete = true;
            }
        }
    }
    /* Copied sends are complete for the caller but may not have reached their peer yet:
     * closing the endpoints now could drop them, and the peer would wait for a message
     * this process already reported sent. Peers acknowledge a whole small message within
     * kAckDelayUs of its arrival, posted receive or not (at once when they are leaving
     * too), so this takes about a round trip; bounded for a peer that is gone. */
    mr->ack_flush(true, now_us());
    mr->drain_copies(2000000);
    mr->ack_flush(true, now_us());
    /* Say goodbye on every live endpoint, so peers log our leaving as no failure. */
    for (auto &p : mr->peers) {
        if (!p || !p->known || p->gone) {
            continue;
        }
        for (size_t i = 0; i < mr->planes.size(); ++i) {
            Link *l = p->links[i].get();
            if (l->state == DR_LINK_UP && l->ep != nullptr && !l->ep_failed) {
                mr->ctrl_post(l, kBye, 0, 0, 0, 0);
            }
        }
    }
    if (!mr->ctrl.empty()) {
        mr->ctrl_flush();
        for (uint64_t end = now_us() + 50000; (mr->clock = now_us()) < end;) {
            for (auto &pl : mr->planes) {
                mr->poll(pl.get());
            }
            if (!mr->ctrl.empty()) {
                mr->ctrl_flush(); /* one whose new endpoint waited (ep_ensure) */
            }
        }
    }
    for (auto &p : mr->peers) {
        if (!p) {
            continue;
        }
        for (size_t i = 0; i < mr->planes.size(); ++i) {
            mr->lane_close(p->links[i].get());
            mr->ep_close(p->links[i].get());
        }
    }
    for (auto &pl : mr->planes) {
        mr->lane_plane_close(pl.get());
    }
    /* Let forced closes and cancelled sends finish; bounded. */
    uint64_t deadline = now_us() + 2000000;
    while (!mr->closing.empty() && (mr->clock = now_us()) < deadline) {
        for (auto &pl : mr->planes) {
            if (pl->worker) {
                mr->poll(pl.get());
            }
        }
        mr->reap_closing();
    }
    /* The posted receives first: a cancel that does not complete at once progresses the
     * worker, whose handlers may still hold a message (released below). */
    for (auto &pl : mr->planes) {
        if (pl->worker) {
            mr->tag_cancel(pl.get()); /* its callback names the plane */
        }
    }
    for (auto &p : mr->peers) {
        if (!p) {
            continue;
        }
        for (auto &u : p->unexpected) {
            mr->unexpected_release(u);
        }
        p->unexpected.clear();
    }
    if (mr->epfd >= 0) {
        close(mr->epfd);
        mr->epfd = -1;
    }
    for (auto &pl : mr->planes) {
        if (pl->address) {
            ucp_worker_release_address(pl->worker, pl->address);
        }
        if (pl->worker) {
            ucp_worker_destroy(pl->worker);
        }
        if (pl->context) {
            ucp_cleanup(pl->context);
        }
    }
    mr->planes.clear();
}

} // namespace mr
} // namespace dualrail

using namespace dualrail::mr;
using dualrail::set_err;

extern "C" void dr_mr_config_default(dr_mr_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->transports = "^sm,self,cma";
    cfg->segment_size = 256 * 1024;
    cfg->min_stripe = 16 * 1024;
    cfg->window = 8;
    cfg->stall_timeout = 0.5;
    cfg->probe_interval = 0.1;
    cfg->peer_timeout = 30.0;
    cfg->readmit_min = 0.25;
    cfg->readmit_max = 1.5;
    cfg->flap_window = 5.0;
    cfg->verbose = 0;
    cfg->name = "mr";
    cfg->copy_max = 16 * 1024;
    cfg->weights = "adaptive";
    cfg->direct_lane = -1;
}

extern "C" dr_status_t dr_mr_create(const dr_mr_config_t *cfg, uint32_t self, dr_mr_t **out,
                                    char *err, size_t errlen)
{
    if (out == nullptr || cfg == nullptr) {
        set_err(err, errlen, "dr_mr_create: NULL argument");
        return DR_ERR_INVALID;
    }
    *out = nullptr;
    if (cfg->segment_size < 4096 || cfg->window == 0 || cfg->stall_timeout <= 0 ||
        cfg->probe_interval <= 0 || cfg->probe_interval >= cfg->stall_timeout ||
        cfg->peer_timeout < 0 || cfg->readmit_min <= 0 || cfg->readmit_max < cfg->readmit_min) {
        set_err(err, errlen, "invalid ucx_mr settings: need segment_size >= 4096, window >= 1, "
                "0 < probe_interval < stall_timeout, peer_timeout >= 0, "
                "0 < readmit_min <= readmit_max");
        return DR_ERR_INVALID;
    }
    dr_plane_list_t list;
    dr_status_t st = dr_plane_list_parse(cfg->planes, &list, err, errlen);
    if (st != DR_OK) {
        return st;
    }
    st = dr_plane_list_check(&list, nullptr, nullptr, err, errlen);
    if (st != DR_OK) {
        return st;
    }
    dr_weights_mode_t wmode;
    uint32_t wratios[DR_MAX_PLANES] = {};
    st = dr_weights_parse(cfg->weights, list.nplanes, &wmode, wratios, err, errlen);
    if (st != DR_OK) {
        return st;
    }
    dr_mr *mr = new (std::nothrow) dr_mr();
    if (mr == nullptr) {
        set_err(err, errlen, "out of memory");
        return DR_ERR_NO_MEMORY;
    }
    try {
        mr->cfg = *cfg;
        /* A copied send travels as one segment on one plane. */
        mr->cfg.copy_max = std::min({cfg->copy_max, cfg->min_stripe, cfg->segment_size});
        mr->planes_text = cfg->planes;
        mr->transports = cfg->transports ? cfg->transports : "^sm,self,cma";
        mr->name = cfg->name ? cfg->name : "mr";
        mr->cfg.planes = mr->planes_text.c_str();
        mr->cfg.transports = mr->transports.c_str();
        mr->cfg.name = mr->name.c_str();
        mr->weights_text = cfg->weights ? cfg->weights : "adaptive";
        mr->cfg.weights = mr->weights_text.c_str();
        mr->wmode = wmode;
        memcpy(mr->wratios, wratios, sizeof(wratios));
        mr->self = self;
        mr->mt = cfg->thread_safe != 0;
        mr->list = list;
        mr->stall_us = (uint64_t)(cfg->stall_timeout * 1e6);
        mr->probe_us = (uint64_t)(cfg->probe_interval * 1e6);
        mr->peer_timeout_us = (uint64_t)(cfg->peer_timeout * 1e6);
        mr->readmit_min_us = (uint64_t)(cfg->readmit_min * 1e6);
        mr->readmit_max_us = (uint64_t)(cfg->readmit_max * 1e6);
        mr->flap_us = (uint64_t)(cfg->flap_window * 1e6);
        for (int i = 0; i < list.nplanes; ++i) {
            auto pl = std::make_unique<Plane>();
            pl->mr = mr;
            pl->index = i;
            char why[256] = "";
            pl->device = dr_plane_select_device_why(&list.planes[i], why, sizeof(why));
            mr->planes.push_back(std::move(pl));
            st = plane_open(mr, mr->planes.back().get(), err, errlen);
            if (st != DR_OK) {
                mr_teardown(mr);
                delete mr;
                return st;
            }
            mr->log(DR_LOG_INFO, "plane %d uses device %s: %s", i,
                    mr->planes.back()->device.c_str(), why);
        }
        /* Address blob: magic, version, plane count, id, hostname, then per plane: device,
         * IPv4, address; then kLaneMagic and per plane the direct lane's port (0: none). */
        put_u32(mr->blob, kAddrMagic);
        put_u32(mr->blob, ((uint32_t)kWireVersion << 16) | (uint32_t)list.nplanes);
        put_u32(mr->blob, self);
        char host[256] = "";
        gethostname(host, sizeof(host) - 1);
        put_u32(mr->blob, (uint32_t)strlen(host));
        mr->blob.insert(mr->blob.end(), host, host + strlen(host));
        for (auto &pl : mr->planes) {
            put_u32(mr->blob, (uint32_t)pl->device.size());
            mr->blob.insert(mr->blob.end(), pl->device.begin(), pl->device.end());
            put_u32(mr->blob, (uint32_t)pl->ip.size());
            mr->blob.insert(mr->blob.end(), pl->ip.begin(), pl->ip.end());
            put_u32(mr->blob, (uint32_t)pl->address_len);
            const uint8_t *a = reinterpret_cast<const uint8_t *>(pl->address);
            mr->blob.insert(mr->blob.end(), a, a + pl->address_len);
        }
        put_u32(mr->blob, kLaneMagic);
        for (auto &pl : mr->planes) {
            put_u32(mr->blob, pl->lane.port);
        }
    } catch (const std::bad_alloc &) {
        mr_teardown(mr);
        delete mr;
        set_err(err, errlen, "out of memory");
        return DR_ERR_NO_MEMORY;
    }
    *out = mr;
    return DR_OK;
}

extern "C" void dr_mr_destroy(dr_mr_t *mr)
{
    if (mr == nullptr) {
        return;
    }
    mr_teardown(mr);
    delete mr;
}

extern "C" int dr_mr_num_planes(const dr_mr_t *mr)
{
    return (int)mr->planes.size();
}

extern "C" const char *dr_mr_plane_device(const dr_mr_t *mr, int plane)
{
    if (plane < 0 || plane >= (int)mr->planes.size()) {
        return nullptr;
    }
    return mr->planes[plane]->device.c_str();
}

extern "C" dr_status_t dr_mr_address(dr_mr_t *mr, const void **addr, size_t *len)
{
    if (mr == nullptr || addr == nullptr || len == nullptr) {
        return DR_ERR_INVALID;
    }
    *addr = mr->blob.data();
    *len = mr->blob.size();
    return DR_OK;
}

static bool get_u32(const uint8_t *&p, const uint8_t *end, uint32_t *v)
{
    if (end - p < 4) {
        return false;
    }
    memcpy(v, p, 4);
    p += 4;
    return true;
}

extern "C" dr_status_t dr_mr_add_peer(dr_mr_t *mr, uint32_t peer, const void *addr, size_t len,
                                      char *err, size_t errlen)
{
    if (mr == nullptr || addr == nullptr) {
        set_err(err, errlen, "dr_mr_add_peer: NULL argument");
        return DR_ERR_INVALID;
    }
    if (peer == mr->self) {
        set_err(err, errlen, "peer %u is this process", peer);
        return DR_ERR_INVALID;
    }
    const uint8_t *p = static_cast<const uint8_t *>(addr), *end = p + len;
    uint32_t magic, vp, id;
    if (!get_u32(p, end, &magic) || magic != kAddrMagic || !get_u32(p, end, &vp) ||
        !get_u32(p, end, &id)) {
        set_err(err, errlen, "peer %u: not a dualrail address (%zu bytes)", peer, len);
        return DR_ERR_INVALID;
    }
    if ((vp >> 16) != kWireVersion) {
        set_err(err, errlen, "peer %u speaks wire version %u, this process %u", peer, vp >> 16,
                kWireVersion);
        return DR_ERR_PEER_MISMATCH;
    }
    uint32_t nplanes = vp & 0xffff;
    if (nplanes != mr->planes.size()) {
        set_err(err, errlen, "peer %u has %u plane(s), this process has %zu: every process "
                "must be configured with the same planes", peer, nplanes, mr->planes.size());
        return DR_ERR_PEER_MISMATCH;
    }
    uint32_t hl;
    if (!get_u32(p, end, &hl) || (size_t)(end - p) < hl) {
        set_err(err, errlen, "peer %u: truncated address", peer);
        return DR_ERR_INVALID;
    }
    std::string host(reinterpret_cast<const char *>(p), hl);
    p += hl;
    if (id != peer) {
        set_err(err, errlen, "address given for peer %u belongs to process %u", peer, id);
        return DR_ERR_INVALID;
    }
    std::vector<std::vector<uint8_t>> addrs(nplanes);
    std::vector<std::string> devices(nplanes), ips(nplanes);
    for (uint32_t i = 0; i < nplanes; ++i) {
        uint32_t n;
        if (!get_u32(p, end, &n) || (size_t)(end - p) < n) {
            set_err(err, errlen, "peer %u: truncated address", peer);
            return DR_ERR_INVALID;
        }
        devices[i].assign(reinterpret_cast<const char *>(p), n);
        p += n;
        if (!get_u32(p, end, &n) || (size_t)(end - p) < n) {
            set_err(err, errlen, "peer %u: truncated address", peer);
            return DR_ERR_INVALID;
        }
        ips[i].assign(reinterpret_cast<const char *>(p), n);
        p += n;
        if (!get_u32(p, end, &n) || (size_t)(end - p) < n || n == 0) {
            set_err(err, errlen, "peer %u: truncated address", peer);
            return DR_ERR_INVALID;
        }
        addrs[i].assign(p, p + n);
        p += n;
    }
    std::vector<uint16_t> lane_ports(nplanes, 0);
    uint32_t lm;
    if (get_u32(p, end, &lm) && lm == kLaneMagic) {
        for (uint32_t i = 0; i < nplanes; ++i) {
            uint32_t port;
            if (!get_u32(p, end, &port) || port > 65535) {
                set_err(err, errlen, "peer %u: truncated address", peer);
                return DR_ERR_INVALID;
            }
            lane_ports[i] = (uint16_t)port;
        }
    }
    Guard g(mr);
    Peer *pe = mr->peer_get(peer, true);
    for (uint32_t i = 0; i < nplanes; ++i) {
        if (pe->known) {
            /* a re-registration: the old process's lanes go; a lane that a process not
             * registered yet made to us (mr_lane.cc, lane_attach) stays its own */
            mr->lane_close(pe->links[i].get());
        }
        mr->ep_close(pe->links[i].get());
    }
    /* Control messages kept for endpoints that waited (ep_ensure) were the old
     * registration's: not for the process registered now. */
    mr->ctrl.erase(std::remove_if(mr->ctrl.begin(), mr->ctrl.end(),
                                  [peer](const Ctrl &c) { return c.link->peer == peer; }),
                   mr->ctrl.end());
    pe->addrs.swap(addrs);
    pe->devices.swap(devices);
    pe->ips.swap(ips);
    pe->lane_ports.swap(lane_ports);
    pe->host.swap(host);
    pe->known = true;
    pe->gone = false;
    return DR_OK;
}

extern "C" const char *dr_mr_last_error(const dr_mr_t *mr)
{
    if (!mr->mt) {
        return mr->last_error.c_str();
    }
    /* Another thread's progress may rewrite last_error at any time: hand out a copy. */
    static thread_local std::string copy;
    Guard g(mr);
    try {
        copy = mr->last_error;
    } catch (const std::bad_alloc &) {
        copy.clear();
    }
    return copy.c_str();
}

extern "C" dr_status_t dr_mr_set_weights(dr_mr_t *mr, uint32_t peer, const uint32_t *weights,
                                         int n)
{
    if (mr == nullptr || weights == nullptr || n != (int)mr->planes.size()) {
        return DR_ERR_INVALID;
    }
    uint64_t sum = 0;
    for (int i = 0; i < n; ++i) {
        sum += weights[i];
    }
    if (sum == 0) {
        return DR_ERR_INVALID;
    }
    Guard g(mr);
    Peer *p;
    try {
        p = mr->peer_get(peer, true);
    } catch (const std::bad_alloc &) {
        return DR_ERR_NO_MEMORY;
    }
    /* Fixed for this peer from now on: the estimator leaves it alone; a plane going down
     * or coming back re-divides these ratios over the live planes. */
    p->w_fixed = true;
    dr_wlink_t est[DR_MAX_PLANES];
    for (int i = 0; i < n; ++i) {
        p->w_ratios[i] = weights[i];
        est[i] = p->links[i]->est;
    }
    dr_weights_fixed_shares(est, n, weights);
    for (int i = 0; i < n; ++i) {
        p->links[i]->est.share = est[i].share;
        p->links[i]->weight = weights[i];
    }
    Mr::planes_changed(p);
    return DR_OK;
}

extern "C" dr_link_state_t dr_mr_link_state(const dr_mr_t *mr, uint32_t peer, int plane)
{
    Guard g(mr);
    if (plane < 0 || plane >= (int)mr->planes.size() || peer >= mr->peers.size() ||
        !mr->peers[peer]) {
        return DR_LINK_UNUSED;
    }
    const Link *l = mr->peers[peer]->links[plane].get();
    if (l->state == DR_LINK_UP && !l->used) {
        return DR_LINK_UNUSED;
    }
    return l->state;
}

extern "C" dr_status_t dr_mr_plane_stats(const dr_mr_t *mr, int plane, dr_mr_plane_stats_t *out)
{
    if (mr == nullptr || out == nullptr || plane < 0 || plane >= (int)mr->planes.size()) {
        return DR_ERR_INVALID;
    }
    Guard g(mr);
    *out = mr->planes[plane]->stats;
    return DR_OK;
}
