/*
 * ucx_mr end to end inside one process: two contexts on the loopback device
 * (one plane), no root and no lab needed. The lab tests cover two planes and
 * faults; this covers the API contract, matching, and every configuration
 * error path.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "dualrail/ucx_mr.h"

typedef struct pair {
    dr_mr_t *a, *b;
} pair_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Two contexts on loopback that know each other; weights NULL: the default. 0 or -1. */
static int pair_open(pair_t *p, const char *weights)
{
    p->a = p->b = NULL;
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.planes = "lo";
    cfg.transports = "tcp";
    cfg.segment_size = 64 * 1024;
    if (weights != NULL) {
        cfg.weights = weights;
    }
    char err[256];
    if (dr_mr_create(&cfg, 0, &p->a, err, sizeof(err)) != DR_OK ||
        dr_mr_create(&cfg, 1, &p->b, err, sizeof(err)) != DR_OK) {
        print_error("create: %s\n", err);
        return -1;
    }
    const void *addr;
    size_t len;
    dr_mr_address(p->a, &addr, &len);
    if (dr_mr_add_peer(p->b, 0, addr, len, err, sizeof(err)) != DR_OK) {
        return -1;
    }
    dr_mr_address(p->b, &addr, &len);
    if (dr_mr_add_peer(p->a, 1, addr, len, err, sizeof(err)) != DR_OK) {
        return -1;
    }
    return 0;
}

static int setup(void **state)
{
    *state = NULL;
    pair_t *p = calloc(1, sizeof(*p));
    if (p == NULL || pair_open(p, NULL) != 0) {
        return -1;
    }
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    pair_t *p = *state;
    dr_mr_destroy(p->a);
    dr_mr_destroy(p->b);
    free(p);
    return 0;
}

/* Drive both contexts until both requests complete; bounded at 20 s. */
static void finish(pair_t *p, dr_mr_req_t *s, dr_mr_req_t *r, dr_status_t *ss, dr_status_t *rs,
                   size_t *rlen)
{
    double end = now_s() + 20;
    *ss = *rs = DR_INPROGRESS;
    if (s == NULL) {
        *ss = DR_OK; /* a receive alone */
    }
    while ((*ss == DR_INPROGRESS || *rs == DR_INPROGRESS) && now_s() < end) {
        dr_mr_progress(p->a);
        dr_mr_progress(p->b);
        if (*ss == DR_INPROGRESS) {
            *ss = dr_mr_test(p->a, s, NULL);
        }
        if (*rs == DR_INPROGRESS) {
            *rs = dr_mr_test(p->b, r, rlen);
        }
    }
}

static void fill(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; ++i) {
        buf[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 11));
    }
}

static void test_sizes_both_orders(void **state)
{
    pair_t *p = *state;
    /* 64 and 65: an early segment held inside its entry or in a block of its own */
    static const size_t sizes[] = {0, 1, 7, 64, 65, 4096, 65536 + 1, 3 * 1024 * 1024 + 5};
    for (int early = 0; early < 2; ++early) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
            size_t n = sizes[i];
            unsigned char *src = malloc(n + 1), *dst = malloc(n + 1);
            fill(src, n, (unsigned)i);
            memset(dst, 0xee, n + 1);
            uint64_t key = 1000 + i + 100 * (uint64_t)early;
            dr_mr_req_t *s = NULL, *r = NULL;
            if (early) {
                /* Data first, receive later: the unexpected path. */
                assert_int_equal(dr_mr_isend(p->a, 1, key, src, n, &s), DR_OK);
                for (int k = 0; k < 200; ++k) {
                    dr_mr_progress(p->a);
                    dr_mr_progress(p->b);
                }
                assert_int_equal(dr_mr_irecv(p->b, 0, key, dst, n + 1, &r), DR_OK);
            } else {
                assert_int_equal(dr_mr_irecv(p->b, 0, key, dst, n + 1, &r), DR_OK);
                assert_int_equal(dr_mr_isend(p->a, 1, key, src, n, &s), DR_OK);
            }
            dr_status_t ss, rs;
            size_t got = 12345;
            finish(p, s, r, &ss, &rs, &got);
            assert_int_equal(ss, DR_OK);
            assert_int_equal(rs, DR_OK);
            assert_int_equal(got, n);
            assert_memory_equal(src, dst, n);
            assert_int_equal(dst[n], 0xee); /* nothing written past the message */
            dr_mr_req_free(p->a, s);
            dr_mr_req_free(p->b, r);
            free(src);
            free(dst);
        }
    }
    dr_mr_plane_stats_t st;
    assert_int_equal(dr_mr_plane_stats(p->a, 0, &st), DR_OK);
    assert_true(st.tx_bytes >= 2 * (3 * 1024 * 1024 + 5));
    assert_int_equal(st.errors, 0);
}

static void test_keys_match_out_of_order(void **state)
{
    pair_t *p = *state;
    /* Two messages posted in one order, received in the other: keys, not order, match. */
    int x = 11, y = 22, rx = 0, ry = 0;
    dr_mr_req_t *s1, *s2, *r1, *r2;
    assert_int_equal(dr_mr_isend(p->a, 1, 7, &x, sizeof(x), &s1), DR_OK);
    assert_int_equal(dr_mr_isend(p->a, 1, 8, &y, sizeof(y), &s2), DR_OK);
    assert_int_equal(dr_mr_irecv(p->b, 0, 8, &ry, sizeof(ry), &r2), DR_OK);
    assert_int_equal(dr_mr_irecv(p->b, 0, 7, &rx, sizeof(rx), &r1), DR_OK);
    dr_status_t a, b;
    finish(p, s1, r1, &a, &b, NULL);
    assert_int_equal(a, DR_OK);
    assert_int_equal(b, DR_OK);
    finish(p, s2, r2, &a, &b, NULL);
    assert_int_equal(a, DR_OK);
    assert_int_equal(b, DR_OK);
    assert_int_equal(rx, 11);
    assert_int_equal(ry, 22);
    dr_mr_req_free(p->a, s1);
    dr_mr_req_free(p->a, s2);
    dr_mr_req_free(p->b, r1);
    dr_mr_req_free(p->b, r2);

    /* A key may be used again once its previous message completed. */
    for (int round = 0; round < 3; ++round) {
        int v = 100 + round, rv = -1;
        dr_mr_req_t *s, *r;
        assert_int_equal(dr_mr_isend(p->a, 1, 7, &v, sizeof(v), &s), DR_OK);
        assert_int_equal(dr_mr_irecv(p->b, 0, 7, &rv, sizeof(rv), &r), DR_OK);
        finish(p, s, r, &a, &b, NULL);
        assert_int_equal(b, DR_OK);
        assert_int_equal(rv, v);
        dr_mr_req_free(p->a, s);
        dr_mr_req_free(p->b, r);
    }
}

static void test_truncation(void **state)
{
    pair_t *p = *state;
    char big[100], small[10];
    memset(big, 'x', sizeof(big));
    memset(small, 0, sizeof(small));
    dr_mr_req_t *s, *r;
    assert_int_equal(dr_mr_isend(p->a, 1, 55, big, sizeof(big), &s), DR_OK);
    assert_int_equal(dr_mr_irecv(p->b, 0, 55, small, sizeof(small), &r), DR_OK);
    dr_status_t a, b;
    finish(p, s, r, &a, &b, NULL);
    assert_int_equal(a, DR_OK);            /* the sender is not punished */
    assert_int_equal(b, DR_ERR_TRUNCATED);
    for (size_t i = 0; i < sizeof(small); ++i) {
        assert_int_equal(small[i], 0);     /* nothing partial written */
    }
    assert_non_null(strstr(dr_mr_last_error(p->b), "100 bytes"));
    dr_mr_req_free(p->a, s);
    dr_mr_req_free(p->b, r);
}

static void test_wait_timeout_and_bad_args(void **state)
{
    pair_t *p = *state;
    int v;
    dr_mr_req_t *r;
    assert_int_equal(dr_mr_irecv(p->b, 0, 999, &v, sizeof(v), &r), DR_OK);
    double t0 = now_s();
    assert_int_equal(dr_mr_wait(p->b, r, 0.05, NULL), DR_ERR_TIMEOUT);
    assert_true(now_s() - t0 < 5);
    /* Complete it so the context is clean for the next test. */
    dr_mr_req_t *s;
    int w = 5;
    assert_int_equal(dr_mr_isend(p->a, 1, 999, &w, sizeof(w), &s), DR_OK);
    dr_status_t a, b;
    finish(p, s, r, &a, &b, NULL);
    assert_int_equal(b, DR_OK);
    dr_mr_req_free(p->a, s);
    dr_mr_req_free(p->b, r);

    assert_int_equal(dr_mr_isend(p->a, 42, 1, &w, sizeof(w), &s), DR_ERR_INVALID); /* unknown */
    assert_non_null(strstr(dr_mr_last_error(p->a), "peer 42"));
    assert_int_equal(dr_mr_isend(p->a, 1, 1, NULL, 4, &s), DR_ERR_INVALID);
    uint32_t zero = 0, one = 1;
    assert_int_equal(dr_mr_set_weights(p->a, 1, &zero, 1), DR_ERR_INVALID);
    assert_int_equal(dr_mr_set_weights(p->a, 1, &one, 2), DR_ERR_INVALID);
    assert_int_equal(dr_mr_set_weights(p->a, 1, &one, 1), DR_OK);
}

/* dr_mr_test_free: running requests are left alone, finished ones come back with their
 * status and length (and are gone: the loop reuses the same buffers for 100 rounds). */
static void test_test_free(void **state)
{
    pair_t *p = *state;
    assert_int_equal(dr_mr_test_free(NULL, NULL, NULL), DR_ERR_INVALID);
    assert_int_equal(dr_mr_test_free(p->a, NULL, NULL), DR_ERR_INVALID);
    for (int round = 0; round < 100; ++round) {
        int out[3] = {round, 2 * round, 3 * round}, in[4] = {-1, -1, -1, -1};
        dr_mr_req_t *s, *r;
        assert_int_equal(dr_mr_irecv(p->b, 0, 5000 + (uint64_t)round, in, sizeof(in), &r), DR_OK);
        size_t rlen = 0, slen = 0;
        assert_int_equal(dr_mr_test_free(p->b, r, &rlen), DR_INPROGRESS); /* nothing sent */
        assert_int_equal(dr_mr_isend(p->a, 1, 5000 + (uint64_t)round, out, sizeof(out), &s), DR_OK);
        dr_status_t ss = DR_INPROGRESS, rs = DR_INPROGRESS;
        for (double end = now_s() + 20;
             (ss == DR_INPROGRESS || rs == DR_INPROGRESS) && now_s() < end;) {
            dr_mr_progress(p->a);
            dr_mr_progress(p->b);
            if (ss == DR_INPROGRESS) {
                ss = dr_mr_test_free(p->a, s, &slen);
            }
            if (rs == DR_INPROGRESS) {
                rs = dr_mr_test_free(p->b, r, &rlen);
            }
        }
        assert_int_equal(ss, DR_OK);
        assert_int_equal(rs, DR_OK);
        assert_int_equal(slen, sizeof(out));
        assert_int_equal(rlen, sizeof(out));
        assert_memory_equal(in, out, sizeof(out));
        assert_int_equal(in[3], -1);
    }
    /* Every copy acknowledged in the end, although its request was freed before. */
    for (double end = now_s() + 10; now_s() < end && dr_mr_unacked_copies(p->a) != 0;) {
        dr_mr_progress(p->a);
        dr_mr_progress(p->b);
    }
    assert_int_equal(dr_mr_unacked_copies(p->a), 0);
}

static void test_add_peer_errors(void **state)
{
    pair_t *p = *state;
    char err[256];
    const void *addr;
    size_t len;
    dr_mr_address(p->a, &addr, &len);
    /* Own address, or an address given for the wrong id. */
    assert_int_equal(dr_mr_add_peer(p->a, 0, addr, len, err, sizeof(err)), DR_ERR_INVALID);
    assert_int_equal(dr_mr_add_peer(p->b, 5, addr, len, err, sizeof(err)), DR_ERR_INVALID);
    assert_non_null(strstr(err, "belongs to process 0"));
    /* Garbage and truncation. */
    assert_int_equal(dr_mr_add_peer(p->b, 0, "hello", 5, err, sizeof(err)), DR_ERR_INVALID);
    assert_int_equal(dr_mr_add_peer(p->b, 0, addr, len - 3, err, sizeof(err)), DR_ERR_INVALID);
    assert_non_null(strstr(err, "truncated"));
    /* A peer with a different plane count. */
    unsigned char *two = malloc(len);
    memcpy(two, addr, len);
    uint32_t vp;
    memcpy(&vp, two + 4, 4);
    vp = (vp & 0xffff0000u) | 2u;
    memcpy(two + 4, &vp, 4);
    assert_int_equal(dr_mr_add_peer(p->b, 0, two, len, err, sizeof(err)), DR_ERR_PEER_MISMATCH);
    assert_non_null(strstr(err, "2 plane(s), this process has 1"));
    free(two);
}

static void test_cancel(void **state)
{
    pair_t *p = *state;
    int v = 0, w = 1;
    dr_mr_req_t *r, *s;
    assert_int_equal(dr_mr_irecv(p->b, 0, 4242, &v, sizeof(v), &r), DR_OK);
    assert_int_equal(dr_mr_cancel(p->b, r), DR_OK);
    assert_int_equal(dr_mr_test(p->b, r, NULL), DR_ERR_CANCELED);
    dr_mr_req_free(p->b, r);
    /* A running send cannot be cancelled (one longer than copy_max runs until the peer
     * acknowledges it); a completed request, such as a copied small send, is left alone. */
    static int big[5000], got[5000];
    big[0] = 1;
    assert_int_equal(dr_mr_irecv(p->b, 0, 4243, got, sizeof(got), &r), DR_OK);
    assert_int_equal(dr_mr_isend(p->a, 1, 4243, big, sizeof(big), &s), DR_OK);
    assert_int_equal(dr_mr_cancel(p->a, s), DR_ERR_INVALID);
    dr_status_t a, b;
    finish(p, s, r, &a, &b, NULL);
    assert_int_equal(b, DR_OK);
    assert_int_equal(dr_mr_cancel(p->b, r), DR_OK);
    assert_int_equal(dr_mr_test(p->b, r, NULL), DR_OK);
    assert_int_equal(got[0], 1);
    dr_mr_req_free(p->a, s);
    dr_mr_req_free(p->b, r);
    assert_int_equal(dr_mr_isend(p->a, 1, 4244, &w, sizeof(w), &s), DR_OK);
    assert_int_equal(dr_mr_cancel(p->a, s), DR_OK);
    assert_int_equal(dr_mr_test(p->a, s, NULL), DR_OK);
    dr_mr_req_free(p->a, s);
    assert_int_equal(dr_mr_irecv(p->b, 0, 4244, &v, sizeof(v), &r), DR_OK);
    finish(p, NULL, r, &a, &b, NULL);
    assert_int_equal(b, DR_OK);
    assert_int_equal(v, 1);
    dr_mr_req_free(p->b, r);
}

/* dr_mr_destroy with a receive still posted must not write into its buffer, which the
 * caller frees right after: data arriving during shutdown is dropped. */
static void test_destroy_cancels_receives(void **state)
{
    (void)state;
    pair_t q;
    assert_int_equal(setup((void **)&q.a), 0);
    pair_t *p = (pair_t *)q.a;
    const size_t n = 1 << 20;
    unsigned char *src = malloc(n), *dst = malloc(n);
    memset(src, 0x11, n);
    memset(dst, 0xee, n);
    dr_mr_req_t *r, *s;
    /* b talks to a first, so it has endpoints and progresses them during shutdown. */
    int x = 3, y = 0;
    assert_int_equal(dr_mr_irecv(p->a, 1, 8, &y, sizeof(y), &r), DR_OK);
    assert_int_equal(dr_mr_isend(p->b, 0, 8, &x, sizeof(x), &s), DR_OK);
    for (double end = now_s() + 10; now_s() < end && (dr_mr_test(p->a, r, NULL) == DR_INPROGRESS ||
                                                       dr_mr_test(p->b, s, NULL) == DR_INPROGRESS);) {
        dr_mr_progress(p->a);
        dr_mr_progress(p->b);
    }
    assert_int_equal(y, 3);
    dr_mr_req_free(p->a, r);
    dr_mr_req_free(p->b, s);
    assert_int_equal(dr_mr_irecv(p->b, 0, 9, dst, n, &r), DR_OK);
    assert_int_equal(dr_mr_isend(p->a, 1, 9, src, n, &s), DR_OK);
    for (int i = 0; i < 20; ++i) {
        dr_mr_progress(p->a); /* the data is on its way; b has not looked yet */
    }
    dr_mr_destroy(p->b);
    for (size_t i = 0; i < n; ++i) {
        if (dst[i] != 0xee) {
            fail_msg("byte %zu of a cancelled receive was written during dr_mr_destroy", i);
        }
    }
    dr_mr_destroy(p->a);
    free(p);
    free(src);
    free(dst);
}

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

static void test_create_errors(void **state)
{
    (void)state;
    static const struct {
        const char *planes;
        dr_status_t want;
        const char *mention;
    } cases[] = {
        {NULL, DR_ERR_CONFIG, "empty"},
        {"", DR_ERR_CONFIG, "empty"},
        {"lo,", DR_ERR_CONFIG, "plane 1"},
        {"lo,lo", DR_ERR_CONFIG, "plane 0 and plane 1"},
        {"drnosuchdev0", DR_ERR_NO_DEVICE, "drnosuchdev0"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        dr_mr_config_t cfg;
        dr_mr_config_default(&cfg);
        cfg.planes = cases[i].planes;
        dr_mr_t *mr = (dr_mr_t *)0x1;
        char err[256] = "";
        assert_int_equal(dr_mr_create(&cfg, 0, &mr, err, sizeof(err)), cases[i].want);
        assert_null(mr);
        assert_non_null(strstr(err, cases[i].mention));
    }
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.planes = "lo";
    cfg.probe_interval = cfg.stall_timeout; /* must be shorter */
    dr_mr_t *mr;
    char err[256] = "";
    assert_int_equal(dr_mr_create(&cfg, 0, &mr, err, sizeof(err)), DR_ERR_INVALID);
    assert_non_null(strstr(err, "probe_interval"));
}

/*
 * UCX 1.13 loses or double-completes a wire segment that travels as several TCP
 * fragments when its endpoint fails (mr_core.cc, tcp_segment_env): ucx_mr sizes the
 * TCP transport's segments to hold a whole wire segment, raising them for a context
 * with larger segments, and leaves a value the user set alone. Run twice by ctest:
 * plainly, and with the user's UCX_TCP_TX_SEG_SIZE (DR_TEST_USER_TX_SEG names it).
 */
static void test_tcp_segment_env(void **state)
{
    (void)state;
    const char *user_tx = getenv("DR_TEST_USER_TX_SEG");
    const unsigned long long seg = 1024 * 1024;
    dr_mr_config_t cfg;
    dr_mr_config_default(&cfg);
    cfg.planes = "lo";
    cfg.transports = "tcp";
    cfg.segment_size = seg;
    dr_mr_t *mr = NULL;
    char err[256];
    assert_int_equal(dr_mr_create(&cfg, 2, &mr, err, sizeof(err)), DR_OK);
    const char *tx = getenv("UCX_TCP_TX_SEG_SIZE"), *rx = getenv("UCX_TCP_RX_SEG_SIZE");
    assert_non_null(tx);
    assert_non_null(rx);
    assert_true(strtoull(rx, NULL, 10) > seg); /* raised from the 64 KiB pair's value */
    if (user_tx != NULL) {
        assert_string_equal(tx, user_tx);
    } else {
        assert_true(strtoull(tx, NULL, 10) > seg);
    }
    dr_mr_destroy(mr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_both_orders),
        cmocka_unit_test(test_keys_match_out_of_order),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_wait_timeout_and_bad_args),
        cmocka_unit_test(test_test_free),
        cmocka_unit_test(test_add_peer_errors),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_destroy_cancels_receives),
        cmocka_unit_test(test_small_send_completes_at_once),
        cmocka_unit_test(test_acks_ride_on_data),
        cmocka_unit_test(test_acks_of_uneven_traffic),
        cmocka_unit_test(test_acks_one_way_packed),
        cmocka_unit_test(test_early_small_message_acked),
        cmocka_unit_test(test_idle_peers_not_visited),
        cmocka_unit_test(test_destroy_delivers_copies),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_tcp_segment_env),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
