/*
 * ucx_mr end to end inside one process: two contexts on the loopback device
 * (one plane), no root and no lab needed. The lab tests cover two planes and
 * faults; this covers the API contract, matching, and every configuration
 * error path.
 */
#include <string.h>

#include "mr_pair.h"

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

static int odd_key(uint64_t key, void *arg)
{
    ++*(int *)arg;
    return (key & 1) != 0;
}

/* Held messages a caller calls stale are dropped, whatever holds their bytes (inside the
 * entry, a block of their own, UCX's buffer); the others still reach their receives, and a
 * later message under a dropped key is received, not the dropped one. Copied sends (up to
 * copy_max): their senders are done before anything is received. */
static void test_drop_unexpected(void **state)
{
    pair_t *p = *state;
    static unsigned char big[16384], got[16384];
    static const size_t sizes[] = {8, 65, sizeof(big)};
    dr_mr_req_t *s;
    dr_status_t a, b;
    for (uint64_t k = 0; k < 6; ++k) { /* keys 5000..5005: the odd ones go */
        fill(big, sizes[k % 3], (unsigned)k);
        assert_int_equal(dr_mr_isend(p->a, 1, 5000 + k, big, sizes[k % 3], &s), DR_OK);
        finish(p, s, NULL, &a, &b, NULL); /* the sender is done: the receiver holds it */
        assert_int_equal(a, DR_OK);
        dr_mr_req_free(p->a, s);
    }
    for (int k = 0; k < 200; ++k) {
        dr_mr_progress(p->b);
    }
    int calls = 0;
    assert_int_equal(dr_mr_drop_unexpected(p->a, odd_key, &calls), 0); /* a holds nothing */
    const size_t dropped = dr_mr_drop_unexpected(p->b, odd_key, &calls);
    assert_int_equal(dropped, 3);
    assert_int_equal(calls, 6);
    assert_int_equal(dr_mr_drop_unexpected(p->b, odd_key, &calls), 0);
    assert_int_equal(dr_mr_drop_unexpected(NULL, odd_key, &calls), 0);
    assert_int_equal(dr_mr_drop_unexpected(p->b, NULL, NULL), 0);
    for (uint64_t k = 0; k < 6; ++k) {
        dr_mr_req_t *r;
        const size_t n = sizes[k % 3];
        memset(got, 0xee, sizeof(got));
        assert_int_equal(dr_mr_irecv(p->b, 0, 5000 + k, got, sizeof(got), &r), DR_OK);
        if (k % 2 == 1) {
            /* dropped: the receive waits for a new message under its key */
            for (int i = 0; i < 200; ++i) {
                dr_mr_progress(p->a);
                dr_mr_progress(p->b);
            }
            assert_int_equal(dr_mr_test(p->b, r, NULL), DR_INPROGRESS);
            fill(big, n, 100 + (unsigned)k);
            assert_int_equal(dr_mr_isend(p->a, 1, 5000 + k, big, n, &s), DR_OK);
        } else {
            fill(big, n, (unsigned)k);
            s = NULL;
        }
        size_t len = 0;
        finish(p, s, r, &a, &b, &len);
        assert_int_equal(b, DR_OK);
        assert_int_equal(len, n);
        assert_memory_equal(got, big, n);
        if (s != NULL) {
            dr_mr_req_free(p->a, s);
        }
        dr_mr_req_free(p->b, r);
    }
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
        cmocka_unit_test(test_drop_unexpected),
        cmocka_unit_test(test_destroy_cancels_receives),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_tcp_segment_env),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

