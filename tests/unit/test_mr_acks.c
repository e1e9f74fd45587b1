/*
 * ucx_mr's acknowledgements and copies inside one process (the pair of mr_pair.h on
 * loopback): a small send complete at once with its copy kept until acknowledged,
 * acknowledgements riding on data or packed into as few messages as the traffic
 * allows, early messages acknowledged, idle peers left unvisited by progress, and
 * destroy delivering what is still copied.
 */
#include <pthread.h>
#include <string.h>

#include "mr_pair.h"

/* Progress both contexts until a has no unacknowledged copy left; bounded at 10 s. */
static size_t drain_copies(pair_t *p)
{
    for (double end = now_s() + 10; now_s() < end && dr_mr_unacked_copies(p->a) != 0;) {
        dr_mr_progress(p->a);
        dr_mr_progress(p->b);
    }
    return dr_mr_unacked_copies(p->a);
}

static uint64_t acks_sent(dr_mr_t *mr, int piggybacked)
{
    dr_mr_plane_stats_t st;
    assert_int_equal(dr_mr_plane_stats(mr, 0, &st), DR_OK);
    return piggybacked ? st.piggybacked_acks : st.tx_acks;
}

/* A send of at most copy_max bytes (16 KiB by default) is complete when dr_mr_isend
 * returns, before the peer has done anything: the caller may reuse the buffer at once
 * and the peer still gets the bytes as they were. ucx_mr keeps the copy until the peer
 * acknowledges it. A longer send completes only with the peer's acknowledgement. */
static void test_small_send_completes_at_once(void **state)
{
    pair_t *p = *state;
    enum { N = 16 * 1024 };
    static unsigned char src[N + 1], want[N + 1], dst[N + 1];
    fill(src, N + 1, 9);
    memcpy(want, src, sizeof(src));
    assert_int_equal(drain_copies(p), 0); /* earlier tests' copies */
    dr_mr_req_t *s, *r;
    assert_int_equal(dr_mr_isend(p->a, 1, 5000, src, N, &s), DR_OK);
    assert_int_equal(dr_mr_test(p->a, s, NULL), DR_OK);
    dr_mr_req_free(p->a, s);
    memset(src, 0x5a, N); /* the caller's buffer is its own again */
    assert_int_equal(dr_mr_unacked_copies(p->a), 1);
    assert_int_equal(dr_mr_irecv(p->b, 0, 5000, dst, sizeof(dst), &r), DR_OK);
    dr_status_t ss, rs;
    size_t got = 0;
    finish(p, NULL, r, &ss, &rs, &got);
    assert_int_equal(rs, DR_OK);
    assert_int_equal(got, N);
    assert_memory_equal(dst, want, N);
    dr_mr_req_free(p->b, r);
    assert_int_equal(drain_copies(p), 0);

    /* An empty message is complete at once too (it has nothing to copy), and delivered. */
    assert_int_equal(dr_mr_isend(p->a, 1, 4999, NULL, 0, &s), DR_OK);
    assert_int_equal(dr_mr_test(p->a, s, NULL), DR_OK);
    dr_mr_req_free(p->a, s);
    assert_int_equal(dr_mr_unacked_copies(p->a), 1);
    assert_int_equal(dr_mr_irecv(p->b, 0, 4999, dst, sizeof(dst), &r), DR_OK);
    got = 12345;
    finish(p, NULL, r, &ss, &rs, &got);
    assert_int_equal(rs, DR_OK);
    assert_int_equal(got, 0);
    dr_mr_req_free(p->b, r);
    assert_int_equal(drain_copies(p), 0);

    /* One byte more: no copy, the send runs until b takes the message. */
    fill(src, N + 1, 10);
    assert_int_equal(dr_mr_isend(p->a, 1, 5001, src, N + 1, &s), DR_OK);
    for (int i = 0; i < 50; ++i) {
        dr_mr_progress(p->a);
    }
    assert_int_equal(dr_mr_test(p->a, s, NULL), DR_INPROGRESS);
    assert_int_equal(dr_mr_unacked_copies(p->a), 0);
    assert_int_equal(dr_mr_irecv(p->b, 0, 5001, dst, sizeof(dst), &r), DR_OK);
    finish(p, s, r, &ss, &rs, &got);
    assert_int_equal(ss, DR_OK);
    assert_int_equal(rs, DR_OK);
    assert_memory_equal(dst, src, N + 1);
    dr_mr_req_free(p->a, s);
    dr_mr_req_free(p->b, r);
}

/* Small messages going both ways (an exchange, as a 2-rank allreduce makes) carry each
 * other's acknowledgements: almost none travels as a message of its own, and every copy
 * is still retired. */
/* One int each way under key, as a 2-rank allreduce exchanges: a sends i, b sends -i. */
static void exchange_int(pair_t *p, uint64_t key, int i)
{
    int x = i, y = -i, gx = -1, gy = -1;
    dr_mr_req_t *sa, *sb, *ra, *rb;
    assert_int_equal(dr_mr_irecv(p->a, 1, key, &gy, sizeof(gy), &ra), DR_OK);
    assert_int_equal(dr_mr_irecv(p->b, 0, key, &gx, sizeof(gx), &rb), DR_OK);
    assert_int_equal(dr_mr_isend(p->a, 1, key, &x, sizeof(x), &sa), DR_OK);
    assert_int_equal(dr_mr_isend(p->b, 0, key, &y, sizeof(y), &sb), DR_OK);
    dr_status_t s1, s2;
    finish(p, NULL, rb, &s1, &s2, NULL);
    assert_int_equal(s2, DR_OK);
    /* a's receive: swap roles for finish() */
    pair_t q = {p->b, p->a};
    finish(&q, NULL, ra, &s1, &s2, NULL);
    assert_int_equal(s2, DR_OK);
    assert_int_equal(gx, i);
    assert_int_equal(gy, -i);
    dr_mr_req_free(p->a, sa);
    dr_mr_req_free(p->b, sb);
    dr_mr_req_free(p->a, ra);
    dr_mr_req_free(p->b, rb);
}

static void test_acks_ride_on_data(void **state)
{
    pair_t *p = *state;
    const uint64_t tx0 = acks_sent(p->a, 0) + acks_sent(p->b, 0);
    const uint64_t pb0 = acks_sent(p->a, 1) + acks_sent(p->b, 1);
    enum { ROUNDS = 1000 };
    for (uint64_t i = 0; i < ROUNDS; ++i) {
        exchange_int(p, 6000 + i, (int)i);
    }
    assert_int_equal(drain_copies(p), 0);
    pair_t q = {p->b, p->a};
    assert_int_equal(drain_copies(&q), 0);
    const uint64_t tx = acks_sent(p->a, 0) + acks_sent(p->b, 0) - tx0;
    const uint64_t pb = acks_sent(p->a, 1) + acks_sent(p->b, 1) - pb0;
    print_message("%d messages each way: %llu acknowledgements carried by data, %llu sent alone\n",
                  ROUNDS, (unsigned long long)pb, (unsigned long long)tx);
    assert_true(pb + tx >= 2 * ROUNDS);
    assert_true(tx <= 2 * ROUNDS / 10);
}

/* n ints from `from` (process id fid) to `to` under keys key.., received and checked. */
static void send_ints(dr_mr_t *from, uint32_t fid, dr_mr_t *to, uint32_t tid, uint64_t key, int n,
                      int base)
{
    enum { MAX = 160 };
    assert_true(n <= MAX);
    static int x[MAX], got[MAX];
    dr_mr_req_t *r[MAX];
    for (int i = 0; i < n; ++i) {
        x[i] = base + i;
        got[i] = -1;
        assert_int_equal(dr_mr_irecv(to, fid, key + (uint64_t)i, &got[i], sizeof(int), &r[i]),
                         DR_OK);
    }
    for (int i = 0; i < n; ++i) {
        dr_mr_req_t *sr;
        assert_int_equal(dr_mr_isend(from, tid, key + (uint64_t)i, &x[i], sizeof(int), &sr), DR_OK);
        assert_int_equal(dr_mr_test(from, sr, NULL), DR_OK); /* copied: complete at once */
        dr_mr_req_free(from, sr);
    }
    for (int i = 0; i < n; ++i) {
        pair_t q = {from, to};
        dr_status_t ss, rs;
        finish(&q, NULL, r[i], &ss, &rs, NULL);
        assert_int_equal(rs, DR_OK);
        assert_int_equal(got[i], base + i);
        dr_mr_req_free(to, r[i]);
    }
}

/* Uneven small traffic, as a broadcast's non-root sees beside a barrier: per round a sends
 * b three messages, b sends a one. b's one message carries the acknowledgements of all three
 * (one in the header's aux, the others in its AckList), so b sends no acknowledgement as a
 * message of its own; one per ack beyond the first it used to, a send system call each. */
static void test_acks_of_uneven_traffic(void **state)
{
    pair_t *p = *state;
    assert_int_equal(drain_copies(p), 0);
    const uint64_t tx0 = acks_sent(p->b, 0), pb0 = acks_sent(p->b, 1);
    enum { ROUNDS = 300 };
    for (int i = 0; i < ROUNDS; ++i) {
        send_ints(p->a, 0, p->b, 1, 7000 + 4 * (uint64_t)i, 3, i);
        send_ints(p->b, 1, p->a, 0, 7000 + 4 * (uint64_t)i + 3, 1, -i);
    }
    assert_int_equal(drain_copies(p), 0);
    const uint64_t tx = acks_sent(p->b, 0) - tx0, pb = acks_sent(p->b, 1) - pb0;
    print_message("%d rounds of 3 messages one way, 1 the other: the receiver of 3 carried %llu "
                  "acknowledgements on data, sent %llu ack messages\n",
                  ROUNDS, (unsigned long long)pb, (unsigned long long)tx);
    /* Margins for a loaded machine (an ack due before b's reply goes alone, with the rest):
     * without the AckList b sends two per round, 600. */
    assert_true(pb >= 3 * ROUNDS / 2);
    assert_true(tx <= ROUNDS / 3);
}

/* Small copied sends keep their copies in the peer's ring of kFlatSlots (16) without a
 * request: the handle the caller gets is complete at once (test, wait, cancel, test_free
 * all say so, with the length), the copy is held until the peer acknowledges it, and once
 * the ring is full (the peer has taken nothing yet) the next sends take the general path.
 * Every size up to DR_MR_TAKE_MAX (1952), 0 included, arrives exact after the caller reused
 * its buffer (past a slot's 256 inline bytes the copy is in a block), and every copy is
 * retired; the ring and its blocks serve again once acknowledged (no block made twice). */
/* Lengths 0..DR_MR_TAKE_MAX: half of them past a ring slot's 256 inline bytes (a block's). */
static size_t flat_len(int i)
{
    return (size_t)(i * 97) % (DR_MR_TAKE_MAX + 1);
}

static void flat_burst(pair_t *p, uint64_t key, uint64_t *flat)
{
    enum { N = 40, MAXB = DR_MR_TAKE_MAX };
    static unsigned char src[N][MAXB], want[N][MAXB], dst[N][MAXB + 1];
    dr_mr_work_stats_t w0, w1;
    dr_mr_work(p->a, &w0);
    for (int i = 0; i < N; ++i) {
        const size_t len = flat_len(i);
        fill(src[i], MAXB, (unsigned)(100 + i));
        memcpy(want[i], src[i], MAXB);
        dr_mr_req_t *s;
        assert_int_equal(dr_mr_isend(p->a, 1, key + (uint64_t)i, src[i], len, &s), DR_OK);
        size_t got = 12345;
        assert_int_equal(dr_mr_test(p->a, s, &got), DR_OK);
        assert_int_equal(got, len);
        assert_int_equal(dr_mr_cancel(p->a, s), DR_OK);
        got = 12345;
        assert_int_equal(dr_mr_wait(p->a, s, 1, &got), DR_OK);
        assert_int_equal(got, len);
        got = 12345;
        assert_int_equal(dr_mr_test_free(p->a, s, &got), DR_OK);
        assert_int_equal(got, len);
        memset(src[i], 0xee, MAXB); /* the caller's buffer is its own again */
    }
    dr_mr_work(p->a, &w1);
    *flat = w1.flat_sends - w0.flat_sends;
    assert_int_equal(dr_mr_unacked_copies(p->a), N); /* b has acknowledged nothing yet */
    for (int i = 0; i < N; ++i) {
        const size_t len = flat_len(i);
        dr_mr_req_t *r;
        memset(dst[i], 0, sizeof(dst[i]));
        assert_int_equal(dr_mr_irecv(p->b, 0, key + (uint64_t)i, dst[i], MAXB + 1, &r), DR_OK);
        dr_status_t ss, rs;
        size_t got = 12345;
        finish(p, NULL, r, &ss, &rs, &got);
        assert_int_equal(rs, DR_OK);
        assert_int_equal(got, len);
        assert_memory_equal(dst[i], want[i], len);
        dr_mr_req_free(p->b, r);
    }
    assert_int_equal(drain_copies(p), 0);
}

static void test_flat_sends(void **state)
{
    pair_t *p = *state;
    send_ints(p->a, 0, p->b, 1, 9600, 1, 0); /* both endpoints made */
    assert_int_equal(drain_copies(p), 0);
    uint64_t flat1 = 0, flat2 = 0;
    dr_mr_work_stats_t a1, b1, a2, b2;
    flat_burst(p, 9700, &flat1);
    dr_mr_work(p->a, &a1);
    dr_mr_work(p->b, &b1);
    flat_burst(p, 9800, &flat2);
    dr_mr_work(p->a, &a2);
    dr_mr_work(p->b, &b2);
    print_message("40 small sends, twice: %llu and %llu kept in the ring; blocks a %llu, "
                  "b %llu\n",
                  (unsigned long long)flat1, (unsigned long long)flat2,
                  (unsigned long long)a2.blocks, (unsigned long long)b2.blocks);
    /* The ring bounds what it holds unacknowledged; the second burst finds it empty. */
    assert_true(flat1 >= 1 && flat1 <= 16);
    assert_true(flat2 >= 8 && flat2 <= 16);
    /* Copies past a slot's inline bytes took blocks (at most one per slot on the sender;
     * the receiver held early ones in blocks too), given back and reused by the second
     * burst: none made for it. */
    assert_true(a1.blocks >= 1 && a1.blocks <= 16);
    assert_true(b1.blocks >= 1);
    assert_int_equal(a2.blocks, a1.blocks);
    assert_int_equal(b2.blocks, b1.blocks);
    /* A flat handle asks nothing of the context it came from. */
    dr_mr_req_t *s;
    assert_int_equal(dr_mr_isend(p->a, 1, 9900, "x", 1, &s), DR_OK);
    dr_mr_req_free(p->a, s);
    dr_mr_req_free(p->a, s); /* complete, holds nothing: freeing twice is harmless */
    dr_mr_req_t *r;
    char c = 0;
    assert_int_equal(dr_mr_irecv(p->b, 0, 9900, &c, 1, &r), DR_OK);
    dr_status_t ss, rs;
    finish(p, NULL, r, &ss, &rs, NULL);
    assert_int_equal(rs, DR_OK);
    assert_int_equal(c, 'x');
    dr_mr_req_free(p->b, r);
    assert_int_equal(drain_copies(p), 0);
}

/* a's copied send of n bytes of buf to b under key, its handle given back at once */
static void a_sends(pair_t *p, uint64_t key, const void *buf, size_t n)
{
    dr_mr_req_t *s;
    assert_int_equal(dr_mr_isend(p->a, 1, key, buf, n, &s), DR_OK);
    dr_mr_req_free(p->a, s);
}

/* dr_mr_take: a message that arrived whole before any receive is received without a
 * request (exact bytes and length, once, acknowledged: the sender's copy retired); one not
 * here yet, or larger than the buffer, is left for a posted receive (which reports the
 * truncation); bad arguments are refused. */
static void test_take(void **state)
{
    pair_t *p = *state;
    enum { N = 12, MAXB = DR_MR_TAKE_MAX };
    static unsigned char src[N][MAXB], dst[MAXB + 1];
    const uint64_t key = 9950;
    assert_int_equal(drain_copies(p), 0);
    size_t len = 12345;
    assert_int_equal(dr_mr_take(p->b, 0, key, dst, sizeof(dst), &len), DR_INPROGRESS);
    assert_int_equal(len, 12345);
    assert_int_equal(dr_mr_take(p->b, 0, key, dst, sizeof(dst), NULL), DR_ERR_INVALID);
    assert_int_equal(dr_mr_take(p->b, 0, key, NULL, 1, &len), DR_ERR_INVALID);
    assert_int_equal(dr_mr_take(p->b, 77777, key, dst, sizeof(dst), &len), DR_ERR_INVALID);
    dr_mr_work_stats_t w0, w1;
    dr_mr_work(p->b, &w0);
    for (int i = 0; i < N; ++i) {
        const size_t n = i == 0 ? 0 : (size_t)(i * 173) % (MAXB + 1);
        fill(src[i], MAXB, (unsigned)(300 + i));
        a_sends(p, key + (uint64_t)i, src[i], n);
    }
    /* Every copy retired: b holds all N (acknowledged when they arrived). */
    assert_int_equal(drain_copies(p), 0);
    for (int i = N - 1; i >= 0; --i) { /* any order: each is found by its key */
        const size_t n = i == 0 ? 0 : (size_t)(i * 173) % (MAXB + 1);
        memset(dst, 0, sizeof(dst));
        len = 12345;
        assert_int_equal(dr_mr_take(p->b, 0, key + (uint64_t)i, dst, sizeof(dst), &len), DR_OK);
        assert_int_equal(len, n);
        assert_memory_equal(dst, src[i], n);
        assert_int_equal(dr_mr_take(p->b, 0, key + (uint64_t)i, dst, sizeof(dst), &len),
                         DR_INPROGRESS); /* taken once */
    }
    dr_mr_work(p->b, &w1);
    assert_int_equal(w1.takes - w0.takes, N);

    /* Larger than the buffer: left where it is, and a posted receive reports it. */
    dr_mr_req_t *r;
    a_sends(p, key + 100, src[0], 100);
    assert_int_equal(drain_copies(p), 0);
    assert_int_equal(dr_mr_take(p->b, 0, key + 100, dst, 50, &len), DR_INPROGRESS);
    assert_int_equal(dr_mr_irecv(p->b, 0, key + 100, dst, 50, &r), DR_OK);
    dr_status_t ss, rs;
    finish(p, NULL, r, &ss, &rs, NULL);
    assert_int_equal(rs, DR_ERR_TRUNCATED);
    dr_mr_req_free(p->b, r);

    /* Taken while still in flight: the waiter's loop, progress and take until it is here. */
    a_sends(p, key + 101, src[1], 64);
    dr_status_t st = DR_INPROGRESS;
    for (double end = now_s() + 10; st == DR_INPROGRESS && now_s() < end;) {
        dr_mr_progress(p->a);
        dr_mr_progress(p->b);
        st = dr_mr_take(p->b, 0, key + 101, dst, sizeof(dst), &len);
    }
    assert_int_equal(st, DR_OK);
    assert_int_equal(len, 64);
    assert_memory_equal(dst, src[1], 64);
    assert_int_equal(drain_copies(p), 0);
}

/* Progress both ends until b's dr_mr_work().landed passes `landed` (bounded: 10 s). */
static uint64_t wait_landed(pair_t *p, uint64_t landed)
{
    dr_mr_work_stats_t w;
    dr_mr_work(p->b, &w);
    for (double end = now_s() + 10; w.landed <= landed && now_s() < end; dr_mr_work(p->b, &w)) {
        dr_mr_progress(p->a);
        dr_mr_progress(p->b);
    }
    return w.landed;
}

/* dr_mr_take_wait: a waiter's buffer receives the message as it arrives (not held, then
 * copied out); received exactly once, and its buffer is the caller's again after a cancel. */
static void test_take_wait(void **state)
{
    pair_t *p = *state;
    enum { MAXB = DR_MR_TAKE_MAX };
    static unsigned char src[MAXB], dst[MAXB], far[MAXB];
    const uint64_t key = 9970;
    dr_mr_req_t *r;
    size_t len = 12345;
    dr_mr_work_stats_t w0, w1;
    assert_int_equal(drain_copies(p), 0);
    assert_int_equal(dr_mr_take_wait(p->b, 0, key, dst, sizeof(dst), NULL), DR_ERR_INVALID);
    assert_int_equal(dr_mr_take_wait(p->b, 77777, key, dst, sizeof(dst), &len), DR_ERR_INVALID);
    assert_int_equal(dr_mr_take_cancel(p->b, 0, key, dst, NULL), DR_ERR_INVALID);
    assert_int_equal(dr_mr_take_cancel(p->b, 0, key, dst, &len), DR_INPROGRESS); /* none set */

    /* Waited for before it is sent, at every length class (empty, inline, a block). */
    const size_t sizes[] = {0, 8, 1000, MAXB};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        const size_t n = sizes[i];
        const uint64_t k = key + i;
        fill(src, MAXB, (unsigned)(700 + i));
        memset(dst, 0, sizeof(dst));
        dr_mr_work(p->b, &w0);
        assert_int_equal(dr_mr_take_wait(p->b, 0, k, dst, sizeof(dst), &len), DR_INPROGRESS);
        a_sends(p, k, src, n);
        assert_int_equal(wait_landed(p, w0.landed), w0.landed + 1);
        assert_memory_equal(dst, src, n); /* there before the waiter looks again */
        len = 12345;
        assert_int_equal(dr_mr_take_wait(p->b, 0, k, dst, sizeof(dst), &len), DR_OK);
        assert_int_equal(len, n);
        assert_int_equal(dr_mr_take_wait(p->b, 0, k, dst, sizeof(dst), &len), DR_INPROGRESS);
        assert_int_equal(dr_mr_take_cancel(p->b, 0, k, dst, &len), DR_INPROGRESS); /* taken once */
        dr_mr_work(p->b, &w1);
        assert_int_equal(w1.takes - w0.takes, 1);
        assert_int_equal(w1.landed - w0.landed, 1);
    }
    assert_int_equal(drain_copies(p), 0); /* each acknowledged */

    /* Cancelled before it came: held, and dr_mr_take's; the buffer untouched. */
    dr_mr_work(p->b, &w0);
    memset(dst, 0, sizeof(dst));
    assert_int_equal(dr_mr_take_wait(p->b, 0, key + 10, dst, sizeof(dst), &len), DR_INPROGRESS);
    assert_int_equal(dr_mr_take_cancel(p->b, 0, key + 10, dst, &len), DR_INPROGRESS);
    a_sends(p, key + 10, src, 64);
    assert_int_equal(drain_copies(p), 0);
    assert_int_equal(dr_mr_take(p->b, 0, key + 10, far, sizeof(far), &len), DR_OK);
    assert_int_equal(len, 64);
    assert_memory_equal(far, src, 64);
    for (size_t i = 0; i < sizeof(dst); ++i) {
        assert_int_equal(dst[i], 0);
    }

    /* Landed, then cancelled: the cancel hands it over (not to a caller naming another
     * buffer, which ends nothing). */
    assert_int_equal(dr_mr_take_wait(p->b, 0, key + 11, dst, sizeof(dst), &len), DR_INPROGRESS);
    assert_int_equal(dr_mr_take_cancel(p->b, 0, key + 11, far, &len), DR_INPROGRESS);
    a_sends(p, key + 11, src, 300);
    dr_mr_work(p->b, &w1);
    assert_int_equal(wait_landed(p, w1.landed), w1.landed + 1);
    len = 0;
    assert_int_equal(dr_mr_take_cancel(p->b, 0, key + 11, dst, &len), DR_OK);
    assert_int_equal(len, 300);
    assert_memory_equal(dst, src, 300);
    assert_int_equal(dr_mr_take(p->b, 0, key + 11, dst, sizeof(dst), &len), DR_INPROGRESS);

    /* One wait per peer: a second key on the same peer is a plain take (held, then taken). */
    dr_mr_work(p->b, &w0);
    assert_int_equal(dr_mr_take_wait(p->b, 0, key + 20, dst, sizeof(dst), &len), DR_INPROGRESS);
    assert_int_equal(dr_mr_take_wait(p->b, 0, key + 21, far, sizeof(far), &len), DR_INPROGRESS);
    a_sends(p, key + 21, src, 40);
    assert_int_equal(drain_copies(p), 0);
    assert_int_equal(dr_mr_take_wait(p->b, 0, key + 21, far, sizeof(far), &len), DR_OK);
    assert_int_equal(len, 40);
    assert_memory_equal(far, src, 40);
    dr_mr_work(p->b, &w1);
    assert_int_equal(w1.landed, w0.landed); /* held, not landed */

    /* Longer than the waiter's buffer: never lands there; a posted receive reports it. */
    assert_int_equal(dr_mr_take_cancel(p->b, 0, key + 20, dst, &len), DR_INPROGRESS);
    assert_int_equal(dr_mr_take_wait(p->b, 0, key + 22, dst, 50, &len), DR_INPROGRESS);
    a_sends(p, key + 22, src, 100);
    assert_int_equal(drain_copies(p), 0);
    assert_int_equal(dr_mr_take_wait(p->b, 0, key + 22, dst, 50, &len), DR_INPROGRESS);
    assert_int_equal(dr_mr_take_cancel(p->b, 0, key + 22, dst, &len), DR_INPROGRESS);
    assert_int_equal(dr_mr_irecv(p->b, 0, key + 22, dst, 50, &r), DR_OK);
    dr_status_t ss, rs;
    finish(p, NULL, r, &ss, &rs, NULL);
    assert_int_equal(rs, DR_ERR_TRUNCATED);
    dr_mr_req_free(p->b, r);
    dr_mr_work(p->b, &w1);
    assert_int_equal(w1.landed, w0.landed);
}

/* dr_mr_config_t.wakeup: without it (the default) dr_mr_wait_event naps (DR_MR_NAP_US) instead
 * of sleeping until data or its timeout; with it, waits sleep on the planes' descriptors.
 * Either way messages flow, dr_mr_wait (which sleeps once it has polled a while) included. */
static void test_wakeup_modes(void **state)
{
    (void)state;
    for (int wakeup = 0; wakeup <= 1; ++wakeup) {
        pair_wakeup = wakeup;
        pair_t q;
        assert_int_equal(pair_open(&q, NULL), 0);
        pair_wakeup = 0;
        send_ints(q.a, 0, q.b, 1, 7000, 20, 0);
        send_ints(q.b, 1, q.a, 0, 7100, 20, 0);
        dr_mr_req_t *r;
        int x = 0, y = 42;
        assert_int_equal(dr_mr_irecv(q.b, 0, 7200, &x, sizeof(x), &r), DR_OK);
        double t0 = now_s();
        for (int i = 0; i < 20; ++i) {
            dr_mr_wait_event(q.b, 0.01); /* nothing comes */
        }
        const double idle = now_s() - t0;
        dr_mr_req_t *s;
        assert_int_equal(dr_mr_isend(q.a, 1, 7200, &y, sizeof(y), &s), DR_OK);
        dr_mr_req_free(q.a, s);
        /* b waits without a's progress: a's copy went out when posted */
        assert_int_equal(dr_mr_wait(q.b, r, 10, NULL), DR_OK);
        dr_mr_req_free(q.b, r);
        assert_int_equal(x, 42);
        print_message("wakeup %d: 20 waits of 10 ms with nothing to come took %.3f s\n", wakeup,
                      idle);
        if (wakeup == 0) {
            assert_true(idle < 0.1); /* naps: 20 x 50 us, not 20 x 10 ms */
        }
        dr_mr_destroy(q.a);
        dr_mr_destroy(q.b);
    }
}

/* One way only (a broadcast's non-root): b owes an acknowledgement for each of a's 150
 * messages and has nothing to carry them on. Once the oldest is due (kAckDelayUs) or 32 are
 * owed, all of them go, packed into kAck messages of up to 15: at most a few messages, not
 * one per acknowledgement. */
static void test_acks_one_way_packed(void **state)
{
    pair_t *p = *state;
    assert_int_equal(drain_copies(p), 0);
    const uint64_t tx0 = acks_sent(p->b, 0);
    enum { N = 150 };
    send_ints(p->a, 0, p->b, 1, 8000, N, 0);
    assert_int_equal(drain_copies(p), 0); /* every copy retired: all acks arrived */
    const uint64_t tx = acks_sent(p->b, 0) - tx0;
    print_message("%d messages one way: %llu ack messages back\n", N, (unsigned long long)tx);
    assert_true(tx >= (N + 14) / 15);
    assert_true(tx <= N / 4); /* about 14 here; one per acknowledgement before */
}

/* 4096 idle peers on p->a beside p->b, ROUNDS exchanges with p->b: what progress visits. */
static void idle_peers_case(pair_t *p, const char *weights)
{
    enum { IDLE = 4096, ROUNDS = 200 };
    const void *addr;
    size_t len;
    dr_mr_address(p->b, &addr, &len);
    unsigned char *blob = malloc(len);
    assert_non_null(blob);
    char err[256];
    for (uint32_t k = 0; k < IDLE; ++k) {
        /* b's address under another process id (the blob's third word, which add_peer checks
         * against the id it is given); never used, so never connected */
        const uint32_t id = 1000 + k;
        memcpy(blob, addr, len);
        memcpy(blob + 8, &id, sizeof(id));
        assert_int_equal(dr_mr_add_peer(p->a, id, blob, len, err, sizeof(err)), DR_OK);
    }
    free(blob);
    dr_mr_work_stats_t w0, w1, w2;
    dr_mr_work(p->a, &w0);
    for (uint64_t i = 0; i < ROUNDS; ++i) {
        exchange_int(p, 9000 + i, (int)i);
    }
    dr_mr_work(p->a, &w1);
    const uint64_t calls = w1.progress_calls - w0.progress_calls;
    const uint64_t visits = w1.peer_visits - w0.peer_visits;
    print_message("weights %s: %d exchanges with 1 of %d peers: %llu progress calls, %llu "
                  "peer visits\n",
                  weights, ROUNDS, IDLE + 1, (unsigned long long)calls, (unsigned long long)visits);
    assert_true(calls >= ROUNDS);
    /* per call: the peer in use in the call and in the acknowledgement flush, and in the
     * watchdog and the weights when their turn comes */
    assert_true(visits <= 4 * calls);
    /* Long messages: their acknowledgements carry the delivery spans the weights learn from
     * (small ones carry none). Once its acknowledgements went out and a weights tick (25 ms)
     * took its traffic in, the peer in use leaves the set too: progress then visits nobody. */
    enum { LONG = 256 * 1024 };
    unsigned char *big = malloc(LONG), *got = malloc(LONG);
    assert_non_null(big);
    assert_non_null(got);
    for (unsigned i = 0; i < 4; ++i) {
        fill(big, LONG, i);
        dr_mr_req_t *s, *r;
        assert_int_equal(dr_mr_irecv(p->b, 0, 9500 + i, got, LONG, &r), DR_OK);
        assert_int_equal(dr_mr_isend(p->a, 1, 9500 + i, big, LONG, &s), DR_OK);
        dr_status_t ss, rs;
        size_t n = 0;
        finish(p, s, r, &ss, &rs, &n);
        assert_int_equal(ss, DR_OK);
        assert_int_equal(rs, DR_OK);
        assert_int_equal(n, LONG);
        assert_memory_equal(got, big, LONG);
        dr_mr_req_free(p->a, s);
        dr_mr_req_free(p->b, r);
    }
    free(big);
    free(got);
    assert_int_equal(drain_copies(p), 0);
    for (double end = now_s() + 0.1; now_s() < end;) {
        dr_mr_progress(p->a);
        dr_mr_progress(p->b);
    }
    dr_mr_work(p->a, &w1);
    for (int i = 0; i < 100; ++i) {
        dr_mr_progress(p->a);
    }
    dr_mr_work(p->a, &w2);
    assert_int_equal(w2.progress_calls - w1.progress_calls, 100);
    assert_int_equal(w2.peer_visits - w1.peer_visits, 0);
}

/* A job registers every rank of MPI_COMM_WORLD as a peer, and uses a few of them at a time.
 * Progress used to look at every registered peer on every call (its request lists, a cache
 * miss per peer): with 4096 registered, an 8-byte exchange with one of them took 127-180 us
 * instead of 17-20 on the lab (perf/peer_scaling.sh). Now only the peers in use are visited,
 * with learned weights (the default) and with fixed ones, whose traffic the weights never
 * take in (it must not keep the peer in the set). */
static void test_idle_peers_not_visited(void **state)
{
    idle_peers_case(*state, "adaptive");
    pair_t q;
    assert_int_equal(pair_open(&q, "equal"), 0);
    idle_peers_case(&q, "equal");
    dr_mr_destroy(q.a);
    dr_mr_destroy(q.b);
}

/* A small message that arrives before its receive is posted is acknowledged on arrival
 * (it is held by the receiver), so the sender's copy is retired even if nobody ever takes
 * it (an abort notice); taking it later sends no second acknowledgement. */
static void test_early_small_message_acked(void **state)
{
    pair_t *p = *state;
    int x = 77, got = 0;
    dr_mr_req_t *s, *r;
    assert_int_equal(dr_mr_isend(p->a, 1, 7000, &x, sizeof(x), &s), DR_OK);
    dr_mr_req_free(p->a, s);
    assert_int_equal(drain_copies(p), 0);
    const uint64_t acks = acks_sent(p->b, 0) + acks_sent(p->b, 1);
    assert_int_equal(dr_mr_irecv(p->b, 0, 7000, &got, sizeof(got), &r), DR_OK);
    dr_status_t s1, s2;
    finish(p, NULL, r, &s1, &s2, NULL);
    assert_int_equal(s2, DR_OK);
    assert_int_equal(got, 77);
    dr_mr_req_free(p->b, r);
    for (int i = 0; i < 200; ++i) {
        dr_mr_progress(p->a);
        dr_mr_progress(p->b);
    }
    assert_int_equal(acks_sent(p->b, 0) + acks_sent(p->b, 1), acks);
}

typedef struct late_rx {
    dr_mr_t *mr;
    int value;
    dr_status_t status;
} late_rx_t;

/* The receiving side of test_destroy_delivers_copies: silent for 150 ms, then waits. */
static void *late_receiver(void *arg)
{
    late_rx_t *l = arg;
    dr_mr_req_t *r;
    l->status = dr_mr_irecv(l->mr, 0, 8000, &l->value, sizeof(l->value), &r);
    if (l->status != DR_OK) {
        return NULL;
    }
    struct timespec pause = {0, 150 * 1000 * 1000};
    nanosleep(&pause, NULL);
    l->status = dr_mr_wait(l->mr, r, 10.0, NULL);
    if (l->status != DR_ERR_TIMEOUT) {
        dr_mr_req_free(l->mr, r);
    }
    /* Keep answering (acknowledgements, the goodbye) for a little while. */
    for (double end = now_s() + 0.3; now_s() < end;) {
        dr_mr_progress(l->mr);
    }
    return NULL;
}

/* A copied send is complete for its caller before it has left the process (on a fresh
 * endpoint it waits for UCX's connection handshake, which needs the peer). Destroying
 * the context right away must still deliver it: dr_mr_destroy waits for the peer's
 * acknowledgement (bounded) instead of closing the endpoints under it. The peer here
 * looks at the network only 150 ms later, longer than the goodbye's grace period. */
static void test_destroy_delivers_copies(void **state)
{
    (void)state;
    pair_t *p;
    assert_int_equal(setup((void **)&p), 0);
    late_rx_t l = {p->b, 0, DR_INPROGRESS};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, late_receiver, &l), 0);
    int x = 4711;
    dr_mr_req_t *s;
    assert_int_equal(dr_mr_isend(p->a, 1, 8000, &x, sizeof(x), &s), DR_OK);
    assert_int_equal(dr_mr_test(p->a, s, NULL), DR_OK);
    dr_mr_req_free(p->a, s);
    dr_mr_destroy(p->a);
    pthread_join(t, NULL);
    assert_int_equal(l.status, DR_OK);
    assert_int_equal(l.value, 4711);
    dr_mr_destroy(p->b);
    free(p);
}

/* A small message that arrived whole before its receive was posted is held, and
 * acknowledged, by the receiver: the sender may then leave (dr_mr_destroy, its goodbye).
 * A receive posted after that must still get the held message; it failed with "no plane
 * left" because the peer had none up any more. */
static void test_held_message_after_goodbye(void **state)
{
    (void)state;
    pair_t *p;
    assert_int_equal(setup((void **)&p), 0);
    int x = 4242, got = 0;
    dr_mr_req_t *s, *r;
    assert_int_equal(dr_mr_isend(p->a, 1, 8100, &x, sizeof(x), &s), DR_OK);
    dr_mr_req_free(p->a, s);
    assert_int_equal(drain_copies(p), 0); /* held by b and acknowledged */
    dr_mr_destroy(p->a);
    for (double end = now_s() + 0.3; now_s() < end;) {
        dr_mr_progress(p->b); /* the goodbye, the endpoints closing */
    }
    assert_int_equal(dr_mr_irecv(p->b, 0, 8100, &got, sizeof(got), &r), DR_OK);
    assert_int_equal(dr_mr_wait(p->b, r, 5.0, NULL), DR_OK);
    dr_mr_req_free(p->b, r);
    assert_int_equal(got, 4242);
    /* Nothing else is held: a receive for another key fails at once (no plane left). */
    assert_int_equal(dr_mr_irecv(p->b, 0, 8101, &got, sizeof(got), &r), DR_OK);
    assert_int_equal(dr_mr_wait(p->b, r, 5.0, NULL), DR_ERR_PEER_UNREACHABLE);
    dr_mr_req_free(p->b, r);
    dr_mr_destroy(p->b);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_send_completes_at_once),
        cmocka_unit_test(test_acks_ride_on_data),
        cmocka_unit_test(test_acks_of_uneven_traffic),
        cmocka_unit_test(test_acks_one_way_packed),
        cmocka_unit_test(test_flat_sends),
        cmocka_unit_test(test_take),
        cmocka_unit_test(test_take_wait),
        cmocka_unit_test(test_wakeup_modes),
        cmocka_unit_test(test_early_small_message_acked),
        cmocka_unit_test(test_idle_peers_not_visited),
        cmocka_unit_test(test_destroy_delivers_copies),
        cmocka_unit_test(test_held_message_after_goodbye),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

