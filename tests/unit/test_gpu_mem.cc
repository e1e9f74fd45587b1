/*
 * The memory interface without a GPU: the host stand-in's pointer kinds,
 * late and ordered event completion, cross-stream waits; the CUDA table on a
 * machine without a GPU (no GPU reported, host pointers classified cheaply,
 * nothing printed); the element operations every kernel shares (wrapping
 * integer sums, logical ops, half/bfloat16 rounding) against known values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <chrono>
#include <cstring>
#include <vector>

#include "dr_coll_gpu.h"
#include "gpu/dr_gpu.h"
#include "gpu/dr_gpu_ops.hpp"

#if DUALRAIL_HAVE_CUDA
/* The toolkit's host emulation of the device conversions (cvt.rn.f16.f32 & co.). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

using namespace dualrail::gpu;

namespace {

/* Poll an event until it completes; a bounded number of polls. */
int poll(const dr_mem_ops_t *m, void *ev, int limit, int *polls)
{
    for (int i = 0; i < limit; ++i) {
        dr_status_t st = m->event_query(ev);
        if (st != DR_INPROGRESS) {
            *polls = i + 1;
            return st;
        }
    }
    return DR_INPROGRESS;
}

void test_standin_kinds(void **state)
{
    (void)state;
    const dr_mem_ops_t *m = dr_mem_standin();
    assert_int_equal(m->available(), 1);
    int on_stack = 0;
    std::vector<char> heap(100);
    void *dev = nullptr;
    assert_int_equal(m->device_alloc(&dev, 1000), DR_OK);
    assert_int_equal(m->kind(&on_stack), DR_MEM_HOST);
    assert_int_equal(m->kind(heap.data()), DR_MEM_HOST);
    assert_int_equal(m->kind(nullptr), DR_MEM_HOST);
    assert_int_equal(m->kind(dev), DR_MEM_DEVICE);
    assert_int_equal(m->kind(static_cast<char *>(dev) + 999), DR_MEM_DEVICE);
    assert_int_equal(m->kind(static_cast<char *>(dev) + 1), DR_MEM_DEVICE); /* unaligned */
    void *pinned = nullptr;
    assert_int_equal(m->host_alloc(&pinned, 64), DR_OK);
    assert_int_equal(m->kind(pinned), DR_MEM_HOST);
    m->host_free(pinned);
    m->device_free(dev);
    m->device_free(dev); /* twice: ignored */
    /* Device addresses are never handed out again; a new buffer lies elsewhere. */
    void *dev2 = nullptr;
    assert_int_equal(m->device_alloc(&dev2, 1000), DR_OK);
    assert_ptr_not_equal(dev2, dev);
    assert_int_equal(m->kind(dev2), DR_MEM_DEVICE);
    m->device_free(dev2);
}

/* The stand-in's allocator behaves like cudaMalloc/cudaFree on bad requests. */
void test_standin_alloc_edges(void **state)
{
    (void)state;
    const dr_mem_ops_t *m = dr_mem_standin();
    void *huge = nullptr, *a = nullptr, *b = nullptr, *s = nullptr;
    /* Too large, or so large the size would wrap: refused, and nothing is used up. */
    assert_int_equal(m->device_alloc(&huge, (size_t)200 << 30), DR_ERR_NO_MEMORY);
    assert_int_equal(m->device_alloc(&huge, SIZE_MAX), DR_ERR_NO_MEMORY);
    assert_int_equal(m->device_alloc(&a, 3 * 4096), DR_OK);
    assert_int_equal(m->device_alloc(&b, 4096), DR_OK);
    assert_int_equal(m->stream_create(&s), DR_OK);
    std::vector<unsigned char> x(4096, 0x5a), y(4096, 0);
    assert_int_equal(m->copy_async(b, x.data(), 4096, s), DR_OK);
    assert_int_equal(m->stream_sync(s), DR_OK);
    /* Not the start of an allocation: ignored, b's bytes untouched. */
    m->device_free(static_cast<char *>(a) + 4096);
    m->device_free(static_cast<char *>(a) + 2 * 4096);
    m->device_free(static_cast<char *>(a) - 4096);
    m->device_free(a);
    m->device_free(static_cast<char *>(a) + 4096); /* inside a freed buffer */
    assert_int_equal(m->copy_async(y.data(), b, 4096, s), DR_OK);
    assert_int_equal(m->stream_sync(s), DR_OK);
    assert_memory_equal(y.data(), x.data(), 4096);
    m->device_free(b);
    /* Many allocations and frees: no per-buffer kernel mapping is left behind. */
    for (int i = 0; i < 70000; ++i) {
        void *t = nullptr;
        assert_int_equal(m->device_alloc(&t, 64), DR_OK);
        m->device_free(t);
    }
    m->stream_destroy(s);
}

/* A device fault (a kernel on another device's memory) is a GPU error, not a bad argument. */
void test_standin_device_fault(void **state)
{
    (void)state;
    const dr_mem_ops_t *m = dr_mem_standin();
    void *s = nullptr, *other = nullptr, *saved = nullptr, *mine = nullptr;
    assert_int_equal(m->stream_create(&s), DR_OK); /* device 0 */
    assert_int_equal(m->device_alloc(&mine, 64), DR_OK);
    assert_int_equal(m->device_enter(1, &saved), DR_OK);
    assert_int_equal(m->device_alloc(&other, 64), DR_OK);
    m->device_leave(saved);
    assert_int_equal(m->device_of(other), 1);
    assert_int_equal(m->device_of(mine), 0);
    assert_int_equal(m->reduce_async(DR_GPU_SUM, DR_GPU_U32, other, mine, 16, s), DR_OK);
    assert_int_equal(m->stream_sync(s), DR_ERR_GPU);
    assert_string_equal(dr_status_str(DR_ERR_GPU), "gpu error");
    m->stream_destroy(s);
    m->device_free(other);
    m->device_free(mine);
}

void test_standin_late_and_ordered(void **state)
{
    (void)state;
    const dr_mem_ops_t *m = dr_mem_standin();
    dr_mem_standin_set_lag(3);
    void *a = nullptr, *b = nullptr, *ea = nullptr, *eb = nullptr, *dev = nullptr;
    assert_int_equal(m->stream_create(&a), DR_OK);
    assert_int_equal(m->stream_create(&b), DR_OK);
    assert_int_equal(m->event_create(&ea), DR_OK);
    assert_int_equal(m->event_create(&eb), DR_OK);
    assert_int_equal(m->event_query(ea), DR_OK); /* never recorded: complete */
    assert_int_equal(m->device_alloc(&dev, 4096), DR_OK);
    std::vector<uint32_t> x(1000), y(1000, 0);
    for (size_t i = 0; i < x.size(); ++i) {
        x[i] = (uint32_t)(i * 2654435761u);
    }
    /* a: host -> device, then reduce (sum with itself); b waits for a, copies back. */
    assert_int_equal(m->copy_async(dev, x.data(), 4000, a), DR_OK);
    assert_int_equal(m->reduce_async(DR_GPU_SUM, DR_GPU_U32, dev, dev, 1000, a), DR_OK);
    assert_int_equal(m->event_record(ea, a), DR_OK);
    assert_int_equal(m->stream_wait_event(b, ea), DR_OK);
    assert_int_equal(m->copy_async(y.data(), dev, 4000, b), DR_OK);
    assert_int_equal(m->event_record(eb, b), DR_OK);
    assert_int_equal(y[1], 0u); /* nothing ran yet: work completes when polled */
    int polls = 0;
    assert_int_equal(poll(m, eb, 1000, &polls), DR_OK);
    assert_true(polls > 3); /* late, not at the first poll */
    for (size_t i = 0; i < x.size(); ++i) {
        assert_int_equal(y[i], (uint32_t)(x[i] * 2u));
    }
    assert_int_equal(m->event_query(ea), DR_OK); /* b's wait drove a */
    assert_int_equal(m->reduce_async(DR_GPU_BAND, DR_GPU_F32, dev, dev, 1, a), DR_ERR_INVALID);
    assert_int_equal(m->stream_sync(a), DR_OK);
    dr_mem_standin_set_lag(0);
    m->event_destroy(ea);
    m->event_destroy(eb);
    m->stream_destroy(a);
    m->stream_destroy(b);
    m->device_free(dev);
}

void test_cuda_table_without_gpu(void **state)
{
    (void)state;
    const dr_mem_ops_t *m = dr_mem_cuda();
    if (m->available()) {
        print_message("a GPU is usable here: the no-GPU checks do not apply\n");
        skip();
    }
    std::vector<char> buf(64);
    const uint64_t queries = dr_mem_cuda_pointer_queries();
    const auto t0 = std::chrono::steady_clock::now();
    int dev = 0;
    for (int i = 0; i < 1000000; ++i) {
        dev += m->kind(buf.data() + (i & 63)) != DR_MEM_HOST;
        dev += dr_buffers_on_device(nullptr, buf.data(), buf.data() + 1);
    }
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    assert_int_equal(dev, 0);
    print_message("2e6 pointer checks without a GPU: %.1f ns each\n", took / 2e6 * 1e9);
    /* A cached answer, not a driver call per pointer (counted, not timed). */
    assert_int_equal(dr_mem_cuda_pointer_queries(), queries);
    void *s = nullptr;
    assert_int_not_equal(m->stream_create(&s), DR_OK);
    dr_staging_t *st = nullptr;
    char err[128];
    assert_int_equal(dr_staging_create(nullptr, 0, &st, err, sizeof(err)), DR_ERR_NO_DEVICE);
    assert_null(st);
}

void test_op_table(void **state)
{
    (void)state;
    int valid = 0;
    for (int op = 0; op < DR_GPU_OP_COUNT; ++op) {
        for (int t = 0; t < DR_GPU_TYPE_COUNT; ++t) {
            valid += dr_gpu_op_valid(op, t);
        }
    }
    assert_int_equal(valid, 4 * 4 + 8 * 10); /* floats: arithmetic only; integers: all */
    assert_false(dr_gpu_op_valid(DR_GPU_OP_COUNT, DR_GPU_F32));
    assert_false(dr_gpu_op_valid(DR_GPU_SUM, -1));
    assert_int_equal(dr_gpu_type_size(DR_GPU_BF16), 2);
    assert_int_equal(dr_gpu_type_size(DR_GPU_U64), 8);
    assert_int_equal(dr_gpu_type_size(99), 0);
    assert_string_equal(dr_gpu_op_name(DR_GPU_LXOR), "lxor");
}

template <typename T> T ref1(int op, int type, T in, T io)
{
    assert_true(host_reduce(op, type, &in, &io, 1));
    return io;
}

void test_element_ops(void **state)
{
    (void)state;
    /* Integer sums and products wrap (Open MPI 4.1.4's AVX code saturates 8/16-bit sums). */
    assert_int_equal(ref1<uint8_t>(DR_GPU_SUM, DR_GPU_U8, 200, 200), 144);
    assert_int_equal(ref1<int8_t>(DR_GPU_SUM, DR_GPU_I8, 127, 1), -128);
    assert_int_equal(ref1<int16_t>(DR_GPU_SUM, DR_GPU_I16, 30000, 30000), (int16_t)-5536);
    assert_int_equal(ref1<int16_t>(DR_GPU_PROD, DR_GPU_I16, 300, 300), (int16_t)(90000 - 131072));
    assert_int_equal(ref1<int32_t>(DR_GPU_SUM, DR_GPU_I32, INT32_MAX, 1), INT32_MIN);
    assert_true(ref1<uint64_t>(DR_GPU_PROD, DR_GPU_U64, 1ull << 63, 2) == 0);
    assert_int_equal(ref1<int32_t>(DR_GPU_MIN, DR_GPU_I32, -5, 3), -5);
    assert_int_equal(ref1<uint32_t>(DR_GPU_MAX, DR_GPU_U32, 7, 0xffffffffu), 0xffffffffu);
    assert_int_equal(ref1<uint8_t>(DR_GPU_BAND, DR_GPU_U8, 0xf0, 0x3c), 0x30);
    assert_int_equal(ref1<uint8_t>(DR_GPU_BOR, DR_GPU_U8, 0xf0, 0x0c), 0xfc);
    assert_int_equal(ref1<uint8_t>(DR_GPU_BXOR, DR_GPU_U8, 0xff, 0x0f), 0xf0);
    assert_int_equal(ref1<int32_t>(DR_GPU_LAND, DR_GPU_I32, 5, -3), 1);
    assert_int_equal(ref1<int32_t>(DR_GPU_LAND, DR_GPU_I32, 5, 0), 0);
    assert_int_equal(ref1<int64_t>(DR_GPU_LOR, DR_GPU_I64, 0, 0), 0);
    assert_int_equal(ref1<int64_t>(DR_GPU_LOR, DR_GPU_I64, 0, 9), 1);
    assert_int_equal(ref1<int8_t>(DR_GPU_LXOR, DR_GPU_I8, 4, 9), 0);
    assert_int_equal(ref1<int8_t>(DR_GPU_LXOR, DR_GPU_I8, 0, 9), 1);
    assert_true(ref1<double>(DR_GPU_PROD, DR_GPU_F64, 1.5, -2.0) == -3.0);
    float f = 1.0f;
    assert_false(host_reduce(DR_GPU_BXOR, DR_GPU_F32, &f, &f, 1));

    /* half: 1 + 2 = 3; 2048 + 1 is a tie, rounds to even (2048); overflow to inf. */
    assert_int_equal(ref1<uint16_t>(DR_GPU_SUM, DR_GPU_F16, 0x3c00, 0x4000), 0x4200);
    assert_int_equal(ref1<uint16_t>(DR_GPU_SUM, DR_GPU_F16, 0x6800, 0x3c00), 0x6800);
    assert_int_equal(ref1<uint16_t>(DR_GPU_SUM, DR_GPU_F16, 0x7bff, 0x7bff), 0x7c00);
    assert_int_equal(ref1<uint16_t>(DR_GPU_MAX, DR_GPU_F16, 0xbc00, 0x3c00), 0x3c00); /* -1, 1 */
    /* bfloat16: 1 + 1 = 2; 256 + 1 ties to 256. */
    assert_int_equal(ref1<uint16_t>(DR_GPU_SUM, DR_GPU_BF16, 0x3f80, 0x3f80), 0x4000);
    assert_int_equal(ref1<uint16_t>(DR_GPU_SUM, DR_GPU_BF16, 0x4380, 0x3f80), 0x4380);
    /* Every finite half and bfloat16 survives float and back; subnormals included. */
    for (uint32_t h = 0; h < 0x10000; ++h) {
        if ((h & 0x7c00) != 0x7c00) {
            assert_int_equal(float_to_half(half_to_float((uint16_t)h)), h);
        }
        if ((h & 0x7f80) != 0x7f80) {
            assert_int_equal(float_to_bf16(bf16_to_float((uint16_t)h)), h);
        }
    }
    assert_true(half_to_float(0x0001) == 5.9604644775390625e-08f); /* smallest subnormal */
    assert_int_equal(float_to_half(65520.0f), 0x7c00);             /* rounds up to inf */
    assert_int_equal(float_to_half(65519.0f), 0x7bff);
    assert_int_equal(float_to_half(2.9802322387695312e-08f), 0x0000); /* half of min: to even 0 */
}

uint32_t f32_bits(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
}
uint64_t f64_bits(double v)
{
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
}
float f32_of(uint32_t b)
{
    float v;
    memcpy(&v, &b, 4);
    return v;
}

/*
 * NaN: the GPU turns any NaN result into 0x7fffffff (and cvt to half or
 * bfloat16 into 0x7fff), x86 keeps the first operand's payload and makes
 * inf - inf 0xffc00000. The element operations say it one way for both.
 */
void test_nan_results(void **state)
{
    (void)state;
    const float nan_payload = f32_of(0xffc01234u), inf = 1.0f / 0.0f;
    assert_int_equal(f32_bits(ref1<float>(DR_GPU_SUM, DR_GPU_F32, nan_payload, 1)), 0x7fffffffu);
    assert_int_equal(f32_bits(ref1<float>(DR_GPU_SUM, DR_GPU_F32, inf, -inf)), 0x7fffffffu);
    assert_int_equal(f32_bits(ref1<float>(DR_GPU_PROD, DR_GPU_F32, 0, inf)), 0x7fffffffu);
    double dnan;
    const uint64_t snan = 0x7ff0000000000001ull; /* signalling */
    memcpy(&dnan, &snan, 8);
    assert_true(f64_bits(ref1<double>(DR_GPU_PROD, DR_GPU_F64, 2, dnan)) == 0x7fffffffffffffffull);
    assert_true(f64_bits(ref1<double>(DR_GPU_SUM, DR_GPU_F64, -1.0 / 0.0, 1.0 / 0.0)) ==
                0x7fffffffffffffffull);
    /* Half and bfloat16: the canonical 0x7fff whatever the operands' NaN. */
    assert_int_equal(ref1<uint16_t>(DR_GPU_SUM, DR_GPU_F16, 0xfe01, 0x3c00), 0x7fff);
    assert_int_equal(ref1<uint16_t>(DR_GPU_SUM, DR_GPU_F16, 0x7c00, 0xfc00), 0x7fff); /* inf-inf */
    assert_int_equal(ref1<uint16_t>(DR_GPU_PROD, DR_GPU_BF16, 0xffc1, 0x3f80), 0x7fff);
    assert_int_equal(ref1<uint16_t>(DR_GPU_SUM, DR_GPU_BF16, 0x7f80, 0xff80), 0x7fff);
    /* min/max return an operand's bits: inout unless in is strictly less/greater. */
    assert_int_equal(ref1<uint16_t>(DR_GPU_MAX, DR_GPU_F16, 0x3c00, 0xfe01), 0xfe01);
    assert_int_equal(ref1<uint16_t>(DR_GPU_MAX, DR_GPU_F16, 0xfe01, 0x3c00), 0x3c00);
    assert_int_equal(ref1<uint16_t>(DR_GPU_MIN, DR_GPU_BF16, 0x3f80, 0xffc1), 0xffc1);
    assert_int_equal(ref1<uint16_t>(DR_GPU_MIN, DR_GPU_F16, 0x8000, 0x0000), 0x0000); /* -0, +0 */
    assert_int_equal(f32_bits(ref1<float>(DR_GPU_MIN, DR_GPU_F32, 1, nan_payload)), 0xffc01234u);
}

#if DUALRAIL_HAVE_CUDA
/*
 * The host conversions against the toolkit's host emulation of the device
 * ones, which the kernels run: every half and bfloat16 to float, and float to
 * half/bfloat16 over every class (a stride through all 2^32 patterns, every
 * exponent's edges, NaNs with payloads).
 */
void test_conversions_match_device(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float want = __half2float(__ushort_as_half((unsigned short)h));
        const float got = half_to_float((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
            assert_true(got != got && want != want); /* nan stays nan (payloads aside) */
        } else {
            assert_int_equal(f32_bits(got), f32_bits(want));
        }
    }
    size_t bad_half = 0, bad_bf16 = 0;
    uint32_t first_half = 0, first_bf16 = 0;
    auto one = [&](uint32_t x) {
        const float f = f32_of(x);
        const uint16_t h = __half_as_ushort(__float2half_rn(f));
        const uint16_t b = __bfloat16_as_ushort(__float2bfloat16_rn(f));
        if (float_to_half(f) != h && bad_half++ == 0) {
            first_half = x;
        }
        if (float_to_bf16(f) != b && bad_bf16++ == 0) {
            first_bf16 = x;
        }
    };
    for (uint64_t x = 0; x <= 0xffffffffull; x += 251) {
        one((uint32_t)x);
    }
    for (uint32_t e = 0; e < 256; ++e) {
        for (uint32_t low = 0; low < 64; ++low) {
            for (uint32_t sign = 0; sign < 2; ++sign) {
                const uint32_t base = sign << 31 | e << 23;
                one(base | low);
                one(base | (0x7fffffu - low));
                one(base | (0x1000u + low - 32)); /* half's rounding point */
                one(base | (0x8000u + low - 32)); /* bfloat16's */
            }
        }
    }
    if (bad_half != 0 || bad_bf16 != 0) {
        print_message("float->half: %zu differ (first 0x%08x), float->bf16: %zu (first 0x%08x)\n",
                      bad_half, first_half, bad_bf16, first_bf16);
    }
    assert_int_equal(bad_half, 0);
    assert_int_equal(bad_bf16, 0);
}
#endif

} // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_standin_kinds),
        cmocka_unit_test(test_standin_late_and_ordered),
        cmocka_unit_test(test_standin_device_fault),
        cmocka_unit_test(test_standin_alloc_edges),
        cmocka_unit_test(test_cuda_table_without_gpu),
        cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_element_ops),
        cmocka_unit_test(test_nan_results),
#if DUALRAIL_HAVE_CUDA
        cmocka_unit_test(test_conversions_match_device),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
