/*
 * ucx_mr internals: the objects behind the C API in include/dualrail/ucx_mr.h.
 *
 *   Mr ── Plane[p]        one UCP context + worker per plane, pinned to a device
 *    └─── Peer[id] ── Link[p]   one endpoint per (peer, plane), with its health
 *
 * Callbacks from UCX only record facts (a completion, an error, a message);
 * every decision (declare down, re-route, complete a request) is taken in
 * dr_mr_progress() after the workers have been progressed, so no UCX call is
 * made from inside a UCX callback.
 */
#ifndef DUALRAIL_MR_INTERNAL_HPP
#define DUALRAIL_MR_INTERNAL_HPP

#include <netinet/in.h>
#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <vector>

#include "dualrail/stripe.h"
#include "dualrail/ucx_mr.h"
#include "dualrail/weights.h"
#include "mr_lane.hpp"

namespace dualrail {
namespace mr {

constexpr unsigned kAmId = 0x1d;
constexpr uint32_t kAddrMagic = 0x44524d52; /* "DRMR" */
/* 2: kData carries a piggybacked acknowledgement in aux; 3: a kData or kAck header may be
 * followed by up to kAckList more acknowledged msg_ids (AckList); 4: a whole message of up
 * to kTagWholeMax bytes travels as a UCP tag message (kWholeTag) */
/* 5: kDown and a probe's kPong carry the sender's down count of the link in `key`. */
/* 6: whole messages may come on the direct lane (mr_lane.cc), its ports in the address. */
constexpr uint16_t kWireVersion = 6;
/* The largest tag message (kWholeTag below): UCX's TCP transport sends one of up to its
 * SENDV_THRESH (2 KiB by default) with one send(). */
constexpr size_t kTagWireMax = 2048;
constexpr size_t kDoneRing = 1024; /* completed messages remembered per peer */
constexpr uint64_t kStripeAlign = 64;
/* UCX_TCP_{TX,RX}_SEG_SIZE = wire segment + this: room for UCX's and our headers. */
constexpr uint64_t kTcpSegSlack = 4096;

enum MsgType : uint8_t { kData = 1, kAck = 2, kPing = 3, kPong = 4, kDown = 5, kBye = 6 };

/* Every message starts with this header; the payload (kData only) follows. */
struct WireHdr {
    uint8_t type;
    uint8_t plane;     /* sender's plane index: must equal the receiving plane */
    uint16_t version;
    uint32_t src;      /* sender's process id */
    uint32_t msg_id;   /* sender's per-peer message number: tells two uses of a key apart */
    uint32_t aux;      /* ping/pong id; kData: msg_id of a message of ours it acknowledges, or 0 */
    uint64_t key;      /* kData/kAck: the message's key; kDown, probe kPong: the sender's
                        * Link::downs of that plane */
    uint64_t total;    /* message length (kData); probe flag (kPing/kPong) */
    uint64_t offset;   /* segment offset (kData) */
};
static_assert(sizeof(WireHdr) == 40, "wire header layout");

/*
 * Acknowledgements a header carries beyond its own (kData: aux; kAck: msg_id), sent right
 * after the WireHdr: UCX's header is sizeof(WireHdr) + 4 x n bytes. A rank that receives
 * more small messages from a peer than it sends to it (the non-root of a broadcast, a
 * barrier's partner that also takes the root's next broadcast) owed one acknowledgement per
 * extra message, and each went out as a message of its own (a send system call and an
 * arrival at the peer); now a data segment carries all it owes, up to 1 + kAckList, and
 * one kAck message as many (mr_acks.cc, ack_flush).
 */
constexpr uint32_t kAckList = 14;
struct AckList {
    uint32_t id[kAckList];
    uint32_t n = 0;
};

uint64_t now_us();

struct Mr;
struct Req;

/* A segment waiting for window space on a link. Stale refs are skipped. */
struct SegRef {
    Req *req;
    uint32_t req_gen;
    uint32_t seg;
    uint32_t attempt;
};

/* A ring of SegRefs; grows (rarely) but never shrinks, so steady state allocates nothing. */
class SegQueue {
public:
    bool empty() const { return count_ == 0; }
    size_t size() const { return count_; }
    void push(const SegRef &r);
    SegRef pop();
    void clear() { head_ = count_ = 0; }

private:
    std::vector<SegRef> buf_;
    size_t head_ = 0;
    size_t count_ = 0;
};

struct Plane {
    Mr *mr = nullptr;
    int index = 0;
    std::string device;
    std::string ip;          /* the device's IPv4 address, when it has one (TCP planes) */
    ucp_context_h context = nullptr;
    ucp_worker_h worker = nullptr;
    ucp_address_t *address = nullptr;
    size_t address_len = 0;
    dr_mr_plane_stats_t stats{};
    /* Polling (dr_mr_progress): a plane that carried nothing lately and has nothing of
     * ours in UCX is polled only once per kColdPollUs. */
    uint64_t active_at = 0;      /* last send or arrival on the plane (Mr::clock) */
    uint64_t polled_at = 0;      /* last ucp_worker_progress of its worker (Mr::clock) */
    uint32_t ops_out = 0;        /* our operations UCX still holds */
    bool tag_more = false; /* kFailed, kStuck: probe UCP's queue at the next poll (tag_receive) */
    /* The receive posted for whole messages (mr_tag.cc): UCP copies one straight into tag_in
     * as it arrives (no unexpected descriptor, no probe, no second copy); tag_complete hands
     * it to on_am, and the next poll posts it again. kStuck: the posted receive was taken
     * by a message that has not completed for two watchdog looks (tag_watch) while others
     * queue; left to UCP (it still owns tag_in), UCP's queue probed into tag_probe_in
     * meanwhile, normal again once it completes. */
    enum class Rx : uint8_t { kIdle, kPosted, kFailed, kStuck } rx = Rx::kIdle;
    bool rx_warned = false; /* a failed post was logged (once per plane) */
    void *rx_req = nullptr; /* while kPosted */
    uint64_t rx_posts = 0;  /* receives posted (from 1: tag_watch tells them apart) */
    uint64_t rx_suspect = 0; /* tag_watch found rx_posts' receive stuck once (0: none) */
    bool rx_done = false;   /* rx_req completed (its callback): tag_in holds rx_len bytes */
    ucs_status_t rx_status = UCS_OK;
    size_t rx_len = 0;
    uint64_t tag_msgs = 0;   /* whole messages taken in, either way (unit_mr_flat_wire) */
    size_t tag_last_len = 0; /* the last one's length on the wire (unit_mr_flat_wire) */
    /* The receive buffers of whole messages, the posted receive's and the probe's: the
     * plane's, not the stack's, so that not even a foreign message UCP might still be
     * writing after a failed receive can reach a dead frame; two, so that the probe never
     * reads into what a stuck receive may still write. */
    alignas(8) char tag_in[kTagWireMax];
    alignas(8) char tag_probe_in[kTagWireMax];
    PlaneLane lane; /* the direct lane's listening socket and incoming lanes (mr_lane.cc) */
};

/* Small messages travel on one plane (Mr::small_plane), so with only small messages in
 * flight the other planes have nothing to deliver: polling each of them costs a system
 * call per poll and measurably lengthens a small collective. Such a cold plane is still
 * polled by the first progress call kColdPollUs after the last poll of every plane
 * (control messages, probes, connection set-up: a ping waits at most that long for its
 * pong, against a probe interval of 100 ms), turns hot for kHotUs with anything sent or
 * arriving on it, and every plane is polled in the first call after a pause of more
 * than kHotUs (dr_mr_progress). A turn every 8th progress call, as before, was one more
 * system call every 2-3 exchanges of a back-to-back small exchange (a poll takes about
 * 1-2 us here): a second plane cost ucx_mr's 8-byte exchange 4-5 % against one plane in
 * paired runs, 2 % with this turn (docs/small-messages.md, Round 16). */
constexpr uint64_t kColdPollUs = 1000;
/* How long a new endpoint waits for UCX to clear away a dead connection (Mr::stale_connection):
 * UCX does it at the plane's next poll or two (kColdPollUs at most apart); one that stays is
 * not UCX's to clear. */
constexpr uint64_t kStaleWaitUs = 50000;
/* Requests a peer's lists may hold before a progress call that finished one sweeps them
 * anyway (dr_mr_progress). */
constexpr size_t kSweepDeferMax = 8;
constexpr uint64_t kHotUs = 2000;

struct Link {
    Mr *mr = nullptr;
    uint32_t peer = 0;
    int plane = 0;
    ucp_ep_h ep = nullptr;
    bool ep_failed = false;      /* set by the UCX error callback */
    ucs_status_t ep_status = UCS_OK;
    bool remote_down = false;    /* the peer told us it lost this plane */
    bool used = false;
    dr_link_state_t state = DR_LINK_UP;
    uint32_t gen = 0;            /* bumps at every down and re-admission: stale completions are ignored */
    uint32_t weight = 1;         /* what dr_stripe_split gets: est.share scaled (mr_weights.cc) */
    dr_wlink_t est{};            /* delivered-rate estimator and applied share */
    double logged_share = 0;     /* share at the last "delivering" log line */
    uint64_t logged_at = 0;
    uint32_t inflight = 0;       /* data segments handed to UCX, not yet locally complete */
    SegQueue queue;
    /* liveness */
    uint64_t last_progress = 0;
    bool ping_out = false;
    uint64_t ping_sent = 0;
    uint64_t other_alive = 0;    /* when another plane of the peer answered after our ping */
    /* The link progressed since its endpoint was made: its UCX wire-up is over. Until then
     * the stall rule waits kUnprovenStalls stall periods (mr_health.cc, watchdog). */
    bool proven = false;
    uint32_t ping_id = 0;
    uint32_t eps_made = 0;    /* endpoints made for it so far (ep_ensure) */
    uint64_t stale_since = 0; /* ep_ensure first found a dead connection to wait out */
    uint64_t stale_polled = 0; /* the plane's polled_at at ep_ensure's last look */
    /* down / re-admission */
    uint64_t down_at = 0;
    uint64_t next_probe = 0;
    uint64_t backoff = 0;
    uint64_t readmitted_at = 0;
    bool probe_out = false;
    uint64_t probe_sent = 0;
    uint32_t probe_id = 0;
    /* How often this side declared the link down; its kDown and its pong to a probe carry
     * it. The peer's count as of the pong that last re-admitted the link (or the last
     * kDown taken): a kDown with no higher count was sent before that pong, on another
     * plane, and arrived after it (mr_xfer.cc, kDown). */
    uint32_t downs = 0;
    uint32_t peer_downs = 0;
    std::string reason;
    Lane lane; /* the direct lane (mr_lane.cc) */
};

struct Seg {
    uint64_t offset;
    uint64_t length;
    int plane;
    uint32_t attempt;
};

/*
 * A receive's arrival times per plane, for the delivery spans its acknowledgement carries
 * (mr_weights.cc): from the plane's first segment of the message to its last.
 */
struct RecvTiming {
    uint64_t first[DR_MAX_PLANES] = {}; /* 0: nothing arrived on the plane */
    uint64_t last[DR_MAX_PLANES] = {};
    /* How late each of the two stamps may be: the time since the progress call before the
     * one that saw the arrival (Mr::poll_gap) */
    uint64_t first_late[DR_MAX_PLANES] = {};
    uint64_t last_late[DR_MAX_PLANES] = {};
};

struct Req {
    uint32_t gen = 0;
    bool in_use = false;
    bool listed = false;         /* in its peer's sends/recvs list */
    bool is_send = false;
    bool complete = false;
    dr_status_t status = DR_OK;
    uint32_t peer = 0;
    uint64_t key = 0;
    uint32_t msg_id = 0;
    char *buf = nullptr;
    uint64_t len = 0;            /* send: length; receive: capacity */
    /* send */
    bool copied = false;         /* small send: buf is `copy`, complete for the caller at once */
    bool released = false;       /* the caller freed it while it still waits for its ack */
    std::vector<char> copy;      /* capacity kept across reuse: no allocation in steady state */
    std::vector<Seg> segs;
    uint32_t ops = 0;            /* UCX operations still referencing buf */
    bool acked = false;
    /* receive */
    bool bound = false;
    uint64_t total = 0;
    uint64_t received = 0;
    std::vector<dr_extent_t> got; /* sorted, merged received ranges */
    int last_plane = 0;
    RecvTiming timing;
};

/*
 * A send of a whole small message (at most kFlatBytes, copied) that goes straight out on
 * an idle link is kept in its peer's ring of FlatSends instead of a Req: slot msg_id %
 * kFlatSlots holds the copy a plane loss re-sends (up to kFlatInline bytes in the slot,
 * longer ones in a block of Mr::blocks while the slot is live), and the acknowledgement finds it by
 * that index. The caller gets a token, not a request (flat_handle below): the send is
 * complete when posted, as any copied send. A Req per such send (taken, reset, listed,
 * found again by the acknowledgement in the peer's list, swept, recycled) was most of
 * ucx_mr's work in a small exchange, and its cost above raw UCP (perf/exchange_floor.sh:
 * the guarded floor, with the same copy, header, duplicate check and acknowledgement, is
 * at raw UCP's). A send that finds its slot still held (the peer has not acknowledged the
 * send kFlatSlots before it), its link busy or its endpoint not made yet takes the general
 * path; a plane declared down turns the ring's unacknowledged sends into Reqs first
 * (flat_to_reqs), which the re-routing then handles as it handles every copied send.
 */
constexpr uint32_t kFlatSlots = 16;
constexpr size_t kFlatInline = 256;

/*
 * A data segment that is a whole message of up to kTagWholeMax bytes travels as one UCP tag
 * message (tag kWholeTag), not as an active message:
 *
 *   [WireHdr][data: WireHdr::total bytes][acknowledged msg_ids: 4 bytes each, up to kAckList]
 *
 * UCX sends every active message through its TCP transport's gather path
 * (uct_ep_am_short_iov: an iovec and a sendmsg system call), a tag message of up to its
 * UCX_TCP_SENDV_THRESH (2 KiB by default, kTagWireMax) as one packed buffer through send():
 * raw UCP measured 4.45 against 4.24 us per 8-byte exchange on the lab (5 interleaved runs;
 * docs/small-messages.md, Round 18). A flat send's message (every whole message that can
 * go flat) is laid out so in its slot or block (FlatSend::wire(), post_flat); any other is
 * packed into Mr::tag_out and sent only if UCX takes it at once (post_whole), else as an
 * active message. The receiver takes them out of
 * UCP's unexpected queue after each poll of a plane that had events (Mr::poll, tag_receive)
 * and hands them to on_am as any data segment: the duplicate filter, acknowledgements and
 * re-routing see no difference. Control messages and the segments of larger messages stay
 * active messages.
 */
constexpr ucp_tag_t kWholeTag = 0x4452574845000000ull; /* "DRWHE" */
constexpr size_t kTagWholeMax = kTagWireMax - sizeof(WireHdr) - sizeof(uint32_t) * kAckList;
/* Every whole message goes flat when it can (up to 256 bytes only before the twenty-first
 * round of issue 11: a 257-1952-byte message took a Req on the sender and a posted receive
 * on the receiver, about 770 instructions per 1 KiB exchange more, perf/instr_count.sh). */
constexpr size_t kFlatBytes = kTagWholeMax;
constexpr size_t kFlatWireInline = sizeof(WireHdr) + kFlatInline + sizeof(uint32_t) * kAckList;
static_assert(DR_MR_TAKE_MAX == kTagWholeMax, "dr_mr_take takes every whole small message");
static_assert(sizeof(WireHdr) + kFlatBytes + sizeof(uint32_t) * kAckList <= kTagWireMax,
              "a flat send's message, acknowledgements included, fits a block and travels tagged");

struct FlatSend {
    uint32_t msg_id = 0;
    bool live = false; /* sent and not acknowledged */
    uint8_t plane = 0;
    uint16_t ops = 0; /* UCX operations still reading wire */
    uint32_t len = 0;
    uint64_t key = 0;
    /* The message as it travels (the header and acknowledgements are written at each post):
     * in the slot up to kFlatInline bytes, else in `block` (Mr::block_get, given back by
     * Mr::flat_settle once the slot is free), so that a ring costs 6 KiB, not 33. */
    alignas(8) char inline_wire[kFlatWireInline];
    char *block = nullptr;

    char *wire() { return len <= kFlatInline ? inline_wire : block; }
    char *data() { return wire() + sizeof(WireHdr); }
    bool free() const { return !live && ops == 0; }
};

/* Segments up to this size that arrive before their receive are held inside their
 * Unexpected entry, longer whole messages (up to kTagWholeMax) in a block of Mr::blocks: a
 * message that beats its receive (a broadcast's non-root, a gather's root, a peer one call
 * ahead) cost a malloc, a free and a cache miss on a fresh block. dr_mr_take receives
 * every whole small message this way. */
constexpr size_t kUnexpectedInline = kFlatInline;

struct Unexpected {
    /* held stays uninitialised: filled up to `length` where it is used (on_am) */
    Unexpected() {}
    uint64_t key;
    uint32_t msg_id;
    uint64_t total;
    uint64_t offset;
    uint64_t length;
    void *data;                  /* nullptr: the bytes are in `held` (or there are none) */
    bool ucx_owned;              /* release with ucp_am_data_release, */
    bool pooled;                 /* else with block_put, else free() */
    int plane;
    uint64_t at;                 /* arrival time: the delivery spans count from arrivals */
    unsigned char held[kUnexpectedInline];

    const void *bytes() const { return data != nullptr ? data : held; }
};

struct Done {
    uint64_t key;
    uint32_t msg_id;
    bool valid;
};

/*
 * Acknowledgements of small messages are owed for a while instead of sent at once:
 * their senders completed them when they copied them, so nobody waits for these, and
 * the next data segment to that peer carries one for free (WireHdr::aux). Each message
 * a rank receives would otherwise cost a send of its own, as much CPU and kernel work
 * as the message itself. Owed acknowledgements older than kAckDelayUs, or beyond
 * kOwedMax per peer, go out as kAck messages.
 */
constexpr uint64_t kAckDelayUs = 200;
constexpr uint32_t kOwedMax = 32;

struct Owed {
    uint64_t key;
    uint32_t msg_id;
    int plane;      /* the plane the message completed on: the ack goes there if sent alone */
    uint64_t since;
};

struct Peer {
    uint32_t id = 0;
    bool known = false;
    bool gone = false;      /* said goodbye: its endpoints closing is no failure */
    std::vector<std::vector<uint8_t>> addrs;   /* per plane */
    std::vector<std::string> devices;          /* the peer's device per plane, for messages */
    std::vector<std::string> ips;              /* the peer's IPv4 address per plane, or "" */
    std::vector<uint16_t> lane_ports;          /* its direct lane's port per plane, or 0 */
    std::string host;                          /* the peer's hostname, for messages */
    std::unique_ptr<Link> links[DR_MAX_PLANES];
    uint32_t next_msg_id = 1;
    uint64_t w_moved_at = 0; /* a link's learned rate last moved (weights_tick) */
    uint32_t rr = 0;
    /* The plane the peer's last small message came on: the peer picks its small-message
     * plane from its own weights toward us, which may differ from ours toward it, and a
     * small receive must keep that plane polled (dr_mr_irecv), not only our own choice. */
    int small_rx = -1;
    /* Mr::small_plane's answer and the small_rx it was given for; -1: to be worked out. Every
     * change of a link's state or weight clears it (Mr::planes_changed). */
    mutable int small_cache = -1;
    mutable int small_cache_rx = -1;
    bool w_fixed = false;             /* dr_mr_set_weights: no adaptation for this peer */
    uint32_t w_ratios[DR_MAX_PLANES] = {};
    uint64_t w_last = 0;              /* last weight update */
    uint64_t busy_since = 0;
    uint64_t last_done = 0;  /* a send acknowledged or a receive completed */
    bool dumped = false;     /* state dump written for the current stall */
    void message_done(uint64_t now)
    {
        last_done = now > last_done ? now : last_done; /* a deferred ack may be older */
        dumped = false;
    }
    std::vector<Req *> sends;
    std::vector<Req *> recvs;
    std::vector<Unexpected> unexpected;
    std::vector<Done> done;
    size_t done_pos = 0;
    uint32_t newest_msg = 0;   /* newest msg_id seen from the peer: anything newer is not done */
    Owed owed[kOwedMax];       /* ring of acknowledgements owed to the peer */
    uint32_t owed_head = 0, owed_count = 0;
    /* Acknowledgements that came on the peer's data segments, not yet applied (Mr::ack_in):
     * msg_ids of copied sends, whose callers are done with them. */
    uint32_t acks_in[2 * (1 + kAckList)];
    uint32_t acks_in_n = 0;
    uint64_t acks_in_at = 0;   /* arrival of the oldest of them: the liveness they prove */
    std::unique_ptr<FlatSend[]> flat; /* kFlatSlots, made at the first flat send */
    uint32_t flat_live = 0;           /* its slots sent and not acknowledged */
    bool active = false;       /* in Mr::active (Mr::activate) */
    /* dr_mr_take_wait's waiter: the next whole message under key that fits capacity is
     * copied into buf when it arrives (Mr::on_am), not held. */
    struct TakeWait {
        uint64_t key = 0;
        char *buf = nullptr;
        size_t capacity = 0;
        size_t len = 0; /* landed's length */
        bool armed = false;
        bool landed = false; /* in buf, received (acknowledged, in the done ring) */
    } tw;
};

/* An operation handed to UCX; its header must live until UCX completes it. */
struct Op {
    WireHdr hdr;
    AckList acks; /* sent right after hdr: UCX takes both as one header (header_len()) */
    bool in_use = false;
    bool data = false;
    Link *link = nullptr;
    uint32_t link_gen = 0;
    Req *req = nullptr;
    uint32_t req_gen = 0;
    FlatSend *flat = nullptr;    /* a data segment of a flat send (req is nullptr then) */
    bool counted = false;        /* in its plane's ops_out */

    size_t header_len() const { return sizeof(WireHdr) + sizeof(uint32_t) * acks.n; }
};
static_assert(offsetof(Op, acks) == sizeof(WireHdr) && offsetof(AckList, id) == 0,
              "an Op's header and its acknowledgement list are one contiguous header");

struct Ctrl {
    Link *link;
    WireHdr hdr;
    AckList acks;
};

struct Mr {
    dr_mr_config_t cfg{};
    std::string planes_text, transports, name;
    uint32_t self = 0;
    dr_plane_list_t list{};
    std::vector<std::unique_ptr<Plane>> planes;
    std::vector<std::unique_ptr<Peer>> peers;
    std::vector<uint8_t> blob;
    std::vector<std::unique_ptr<Req>> reqs;
    std::vector<Req *> free_reqs;
    std::vector<std::unique_ptr<Op>> ops;
    std::vector<Op *> free_ops;
    std::vector<Ctrl> ctrl;
    alignas(8) char tag_out[kTagWireMax]; /* post_whole's message, while UCX sends it */
    std::vector<void *> closing;  /* endpoint close requests still running */
    uint32_t owed_total = 0;      /* acknowledgements owed, all peers */
    uint32_t pings_out = 0;       /* links with Link::ping_out set, all peers (set_ping_out) */
    uint32_t acks_in_total = 0;   /* Peer::acks_in entries, all peers */
    /*
     * The peers that progress, the acknowledgement flush, the watchdog and the weights look
     * at: those with a request listed, an acknowledgement owed, a plane down, or bytes the
     * weights have not taken in yet (Mr::activate; dr_mr_progress drops a peer once none
     * holds). A job registers every rank of MPI_COMM_WORLD, and visiting each of them at
     * every progress call was a cache miss per rank per call: with 4096 peers registered,
     * an 8-byte exchange with one of them took 127-180 us instead of 17-20
     * (perf/peer_scaling.sh).
     */
    std::vector<Peer *> active;
    /* Blocks of kTagWireMax bytes for whole messages longer than an inline slot: flat
     * sends' copies (FlatSend::block) and held early messages (Unexpected::pooled). Made on
     * demand, never freed before the context: as many as were ever in use at once. */
    std::vector<std::unique_ptr<char[]>> blocks;
    std::vector<char *> blocks_free;
    dr_mr_work_stats_t work{};    /* dr_mr_work */
    /* now_us() read once per dr_mr_progress: what UCX callbacks run inside it stamp their
     * facts with (a clock read per message cost more than the rest of its bookkeeping). */
    uint64_t clock = 0;
    /* A link may carry ep_failed or remote_down: handle_deferred() has work. Set with
     * every such flag; handle_deferred() scans while any is still set. */
    bool deferred = true;
    /* Receives completed and sends acknowledged so far: dr_mr_progress stops draining the
     * planes after a round in which one of them finished, so its waiter sees it without
     * another poll of every plane (a system call each). */
    uint64_t finished = 0;
    uint64_t cold_polled_at = 0;  /* when dr_mr_progress last polled every plane */
    uint64_t progress_at = 0;     /* when the last dr_mr_progress call began */
    uint64_t poll_gap = 0;        /* clock - the previous call's: an arrival's uncertainty */
    int epfd = -1;                /* epoll set of the planes' wakeup descriptors */
    std::string last_error;
    uint64_t last_watchdog = 0;
    uint64_t stall_us = 0, probe_us = 0, peer_timeout_us = 0;
    uint64_t readmit_min_us = 0, readmit_max_us = 0, flap_us = 0;
    std::string weights_text;
    dr_weights_mode_t wmode = DR_WEIGHTS_ADAPTIVE;
    uint32_t wratios[DR_MAX_PLANES] = {};
    uint64_t w_last_tick = 0;
    /* dr_mr_config_t.thread_safe, decided once at dr_mr_create: every public entry then
     * holds mu for its own duration (Guard below), never across a wait. Otherwise no lock
     * is ever taken, so a single-threaded job pays one predictable branch per call. */
    bool mt = false;
    mutable std::mutex mu;

    /* mr_core.cc */
    /* cold: the paths that log are errors and state changes, and GCC moves what leads to a
     * cold call out of the hot functions, whose code then spans fewer cache lines (the
     * kernel's work in every exchange's system calls leaves them cold). */
    void log(int level, const char *fmt, ...) __attribute__((format(printf, 3, 4), cold));
    /* A known peer in a few instructions (every message looks its peer up, up to five times
     * per small exchange); an unknown one is made when create is set, else nullptr. */
    Peer *peer_get(uint32_t id, bool create)
    {
        return id < peers.size() && peers[id] ? peers[id].get() : peer_new(id, create);
    }
    Peer *peer_new(uint32_t id, bool create); /* peer_get's slow path: id not registered */
    Link *link_get(uint32_t peer, int plane);
    dr_status_t ep_ensure(Link *l);
    void ep_close(Link *l, bool sever = false);
    void reap_closing();
    int sever_sockets(Link *l);
    bool link_addrs(const Link *l, in_addr *local, in_addr *remote) const;
    bool stale_connection(const Link *l) const;
    /* fd is a direct lane's socket on that plane (mr_lane.cc): the scans above leave it */
    bool lane_socket(int fd, int plane) const;
    Op *op_get();
    void op_put(Op *op);
    Req *req_get();
    int live_planes(const Peer *p) const
    {
        int n = 0;
        for (size_t i = 0; i < planes.size(); ++i) {
            n += p->links[i]->state == DR_LINK_UP;
        }
        return n;
    }
    std::string peer_state_text(const Peer *p) const;

    /* mr_xfer.cc */
    dr_status_t send_start(Peer *p, Req *r);
    /* A segment can go to UCX on l now, without the queue and issue(): up, weighted, its
     * endpoint made and healthy, nothing queued, room in its window. */
    bool straight_out(const Link *l) const
    {
        return l->state == DR_LINK_UP && l->weight != 0 && l->queue.empty() &&
               l->inflight < cfg.window && l->ep != nullptr && !l->ep_failed;
    }
    /* The longest message send_start sends whole (one segment on one plane); a longer one
     * is striped or cut into segments and arrives in pieces (dr_mr_take_max). */
    uint64_t whole_max() const
    {
        return cfg.min_stripe < cfg.segment_size ? cfg.min_stripe : cfg.segment_size;
    }
    int small_plane(const Peer *p) const
    {
        if (p->small_cache >= 0 && p->small_cache_rx == p->small_rx) {
            return p->small_cache; /* two calls per small exchange, its planes unchanged */
        }
        p->small_cache = small_plane_choose(p);
        p->small_cache_rx = p->small_rx;
        return p->small_cache;
    }
    int small_plane_choose(const Peer *p) const;
    /* A link of p changed state or weight: small_plane() chooses again. */
    static void planes_changed(Peer *p) { p->small_cache = -1; }
    void post_am(Op *op, Link *l, const void *data, uint64_t len);
    /* What UCX made of a send of op on l (NULL, an error or a request); l's plane is active. */
    void post_result(Op *op, Link *l, ucs_status_ptr_t sp);
    void issue(Link *l);
    void send_data(Link *l, Req *r, uint32_t seg);
    /* A data segment (op's owner set by the caller) with the acknowledgements owed to the
     * peer that fit on it. */
    void post_data(Link *l, Op *op, uint32_t msg_id, uint64_t key, uint64_t total, uint64_t offset,
                   const char *data, uint64_t len);
    /* A free block of kTagWireMax bytes (made if none), nullptr when out of memory. */
    char *block_get()
    {
        if (blocks_free.empty()) {
            char *b = new (std::nothrow) char[kTagWireMax];
            if (b == nullptr) {
                return nullptr;
            }
            /* Room in blocks_free for every block first, so that block_put (in UCX's send
             * callbacks, the acknowledgement path) never allocates and never throws. */
            try {
                blocks_free.reserve(blocks.size() + 1);
                blocks.emplace_back(b);
            } catch (const std::bad_alloc &) {
                delete[] b;
                return nullptr;
            }
            ++work.blocks;
            return b;
        }
        char *b = blocks_free.back();
        blocks_free.pop_back();
        return b;
    }
    void block_put(char *b) { blocks_free.push_back(b); /* within reserve (block_get) */ }
    /* f's block back to the pool once nothing needs it (acknowledged, or turned into a
     * Req, and UCX done reading it). */
    void flat_settle(FlatSend &f)
    {
        if (f.block != nullptr && f.free()) {
            block_put(f.block);
            f.block = nullptr;
        }
    }
    /* dr_mr_isend's flat path (FlatSend); false: the send takes the general path. */
    bool flat_send(Peer *p, uint64_t key, const void *buf, size_t len);
    /* op's header (post_data's) and acknowledgements into its flat send's wire, sent as a tag
     * message of len bytes of data. */
    void post_flat(Op *op, Link *l, uint64_t len);
    /* ucp_worker_progress of pl's worker with the receive for whole messages posted, then
     * the one that came into it (tag_complete); every poll of a worker goes through here.
     * The receive is posted again at the next poll, not here: that is off the path from a
     * message's arrival to its waiter's return, and a message that comes meanwhile waits
     * in UCP's queue until then, where the post finds it at once. Where a receive cannot
     * be posted (Rx::kFailed), UCP's queue is probed after each poll that had events
     * (tag_receive). */
    unsigned poll(Plane *pl)
    {
        unsigned lane = 0;
        if (!pl->lane.rx.empty()) {
            /* Each poll of a source is a system call: of the lanes and UCP, one that carried
             * something within kHotUs while the other did not has the plane to itself, the
             * other looked at once per kQuietPollUs (PlaneLane::at). */
            const bool lane_hot = clock - pl->lane.at <= kHotUs;
            const bool ucp_hot = pl->ops_out != 0 || clock - pl->lane.ucp_at <= kHotUs;
            if (lane_hot || !ucp_hot || clock - pl->lane.polled_at >= kQuietPollUs) {
                /* The lanes first; a message that finished a request returns to its waiter
                 * without the UCP poll's system call (if UCP was polled lately: acks, pings
                 * and large segments must not starve behind a lane that always delivers). */
                pl->lane.polled_at = clock;
                const uint64_t before = finished;
                lane = lane_recv(pl);
                if (lane != 0) {
                    pl->lane.at = clock;
                }
                if (finished != before && clock - pl->lane.ucp_polled_at < kQuietPollUs) {
                    return lane;
                }
            }
            if (lane_hot && !ucp_hot && clock - pl->lane.ucp_polled_at < kQuietPollUs) {
                return lane;
            }
        }
        return lane + poll_ucp(pl, lane != 0);
    }
    /* poll()'s UCP part: the worker's progress with the receive for whole messages posted,
     * and what came into it; lane_events: the plane's lanes had some in this poll. */
    unsigned poll_ucp(Plane *pl, bool lane_events = false)
    {
        pl->lane.ucp_polled_at = clock;
        /* what the post found in UCP's queue counts as progress, as UCP's own events do */
        const unsigned taken = pl->rx == Plane::Rx::kIdle ? tag_post(pl) : 0;
        const unsigned n = ucp_worker_progress(pl->worker) + taken;
        if (n != 0) {
            pl->lane.ucp_at = clock;
        }
        if (pl->rx_done) {
            tag_complete(pl);
        } else if ((pl->rx == Plane::Rx::kFailed || pl->rx == Plane::Rx::kStuck) &&
                   (n != 0 || lane_events || pl->tag_more)) {
            tag_receive(pl);
        }
        return n;
    }
    /* Posts pl's receive for whole messages; one that is in UCP's queue already completes it
     * at once and is handed to on_am, and the receive is posted again (up to kTagDrainMax
     * times, the rest at the next poll). Returns how many it handed on. */
    unsigned tag_post(Plane *pl);
    /* pl's posted receive completed: its message to on_am; the receive is posted again at
     * the next poll. */
    void tag_complete(Plane *pl);
    /* Cancels pl's posted receive (before its worker is destroyed); bounded. */
    void tag_cancel(Plane *pl);
    /* The watchdog's look at pl's receive (every 2 ms): a receive stuck on a message whose
     * later fragments never came (whole messages then wait in UCP's queue) turns the plane
     * to probing until it completes (Rx::kStuck), and a plane that could not post one tries
     * again. */
    void tag_watch(Plane *pl);
    /* A kWholeTag message of got bytes in buf (st: how its receive ended) to on_am, or
     * dropped (foreign or malformed). */
    void tag_deliver(Plane *pl, const char *buf, size_t got, ucs_status_t st,
                     size_t max = kTagWireMax);
    /* The whole messages (kWholeTag) UCP holds for pl, through on_am (Rx::kFailed,
     * Rx::kStuck). */
    void tag_receive(Plane *pl);
    /* A whole message's segment of len <= kTagWholeMax bytes (post_data's op) as a tag
     * message through tag_out, if UCX sends it at once; false: nothing was sent. */
    bool post_whole(Op *op, Link *l, const char *data, uint64_t len);
    /* p's unacknowledged flat sends as copied, released Reqs in p->sends. */
    void flat_to_reqs(Peer *p);
    /* The acknowledgement of msg_id for a flat send of p: false when none is waiting (the
     * general path's, on_ack and ack_in, then). */
    bool flat_ack(Peer *p, uint32_t msg_id, uint64_t now, bool live);
    void deliver(Peer *p, Req *r, const WireHdr &h, const void *data, uint64_t len, int plane,
                 uint64_t at, bool acked = false);
    /* r has every byte: complete it, remember it (duplicates), acknowledge it unless done. */
    void finish_recv(Peer *p, Req *r, int plane, bool acked);
    void activate(Peer *p)
    {
        if (!p->active) {
            p->active = true;
            active.push_back(p);
        }
    }
    bool settled(const Peer *p) const; /* none of activate()'s reasons holds */
    void recv_match_unexpected(Peer *p, Req *r);
    /* Give back what an unexpected segment holds (UCX's buffer or ours). */
    void unexpected_release(Unexpected &u);
    bool done_seen(const Peer *p, uint64_t key, uint32_t msg_id) const;
    void done_add(Peer *p, uint64_t key, uint32_t msg_id);
    /* A message that came on pl: recv_attr is UCX's (ucp_am_recv_param_t::recv_attr) for an
     * active message, 0 for a tag message (its bytes are ours); *ret what am_cb returns. */
    void on_am(Plane *pl, const WireHdr &h, const AckList &acks, void *data, size_t len,
               uint64_t recv_attr, ucs_status_t *ret);
    void on_op_done(Op *op, ucs_status_t status);
    void sweep(Peer *p);
    void retire(Req *r);
    void recycle(Req *r);
    void drain_copies(uint64_t limit_us);

    /* mr_lane.cc */
    void lane_open(Plane *pl);                     /* its listening socket, if it takes one */
    void lane_plane_close(Plane *pl);              /* teardown */
    bool lane_send(Link *l, char *wire, size_t n); /* false: nothing sent, take UCP */
    /* post_data's whole segment (op's header and acknowledgements around data) on l's lane,
     * up to kLaneWholeMax bytes, if it is ready; false: nothing sent */
    bool lane_send_whole(Link *l, Op *op, const char *data, uint64_t len);
    void lane_want(Link *l);                       /* connect l's lane if it is ours to make */
    unsigned lane_recv(Plane *pl);                 /* the lanes' frames to on_am */
    void lane_service(Plane *pl);                  /* accepts, hellos, connects, held frames */
    void lane_close(Link *l); /* l declared down, its peer re-registered, the end */
    void lane_fail(Link *l, int err);              /* ended or failed: l goes down if up */
    void lane_watch(Link *l, uint64_t now);        /* the watchdog's look: frames stuck in TCP */
    std::string lane_text(const Link *l) const;    /* its state and its socket's, for dump_peer */

    /* mr_acks.cc */
    void ctrl_post(Link *l, MsgType type, uint64_t key, uint32_t msg_id, uint32_t aux,
                   uint64_t total);
    void ctrl_flush();
    void ack(Peer *p, uint64_t key, uint32_t msg_id, uint64_t total, int plane,
             const Req *r = nullptr);
    void ack_flush(bool all, uint64_t now);
    Owed owed_pop(Peer *p);
    void owed_send(Peer *p);
    /* live: note the liveness it proves (ack_progress); false for a deferred one (ack_in) */
    void on_ack(Peer *p, uint32_t msg_id, uint64_t now, const WireHdr *h, bool live = true);
    void ack_in(Peer *p, uint32_t msg_id);
    void acks_in_apply(Peer *p);
    void acks_in_apply_all();

    /* mr_weights.cc */
    void weights_init(Peer *p);
    void weights_tick(uint64_t now);
    void weights_link_changed(Link *l);
    void weights_apply(Peer *p, uint64_t now);
    void timing_note(RecvTiming &t, int plane, uint64_t len, uint64_t at);
    void ack_post(Link *l, const Req *r);
    bool weights_settled(const Peer *p) const; /* links up, none back or moved lately */
    void weights_on_ack(Peer *p, const Req *r, const WireHdr &h);

    /* mr_health.cc */
    void set_ping_out(Link *l, bool out)
    {
        if (l->ping_out != out) {
            l->ping_out = out;
            out ? ++pings_out : --pings_out;
        }
    }
    void note_progress(Link *l, uint64_t now);
    /* The latest progress of p's live links other than except (0: none) */
    uint64_t others_progress(const Peer *p, const Link *except) const;
    void ack_progress(Peer *p, const Req *r, uint64_t now);
    void declare_down(Link *l, const std::string &why);
    void readmit(Link *l);
    void probe_again_later(Link *l, uint64_t now);
    uint64_t probe_delay(const Link *l) const;
    void fail_peer(Peer *p);
    void watchdog(uint64_t now);
    void dump_peer(const Peer *p, uint64_t now);
    void handle_deferred();
};

/*
 * A public entry's critical section: holds mr's lock for the call when the context is
 * thread safe, nothing otherwise. Never held while the caller waits for a peer: waits are
 * loops of separate calls (dr_mr_wait, the algorithms' Engine), each taking it anew.
 */
class Guard {
  public:
    explicit Guard(const Mr *mr) : mu_(mr != nullptr && mr->mt ? &mr->mu : nullptr)
    {
        if (mu_ != nullptr) {
            mu_->lock();
        }
    }
    ~Guard()
    {
        if (mu_ != nullptr) {
            mu_->unlock();
        }
    }
    Guard(const Guard &) = delete;
    Guard &operator=(const Guard &) = delete;

  private:
    std::mutex *mu_;
};

} // namespace mr
} // namespace dualrail

struct dr_mr : dualrail::mr::Mr {};
struct dr_mr_req : dualrail::mr::Req {};

namespace dualrail {
namespace mr {

/* The handle of a flat send: odd, so never a Req's address, and holding the length that
 * dr_mr_test reports. Every public call taking a request checks for it first. */
inline dr_mr_req_t *flat_handle(size_t len)
{
    return reinterpret_cast<dr_mr_req_t *>((uintptr_t)len << 1 | 1);
}
inline bool is_flat(const dr_mr_req_t *r)
{
    return ((uintptr_t)r & 1) != 0;
}
inline size_t flat_len(const dr_mr_req_t *r)
{
    return (size_t)((uintptr_t)r >> 1);
}

} // namespace mr
} // namespace dualrail

#endif
