/*
 * The element operations of the reductions, shared by the CUDA kernels
 * (dr_gpu_cuda.cu), the host stand-in (dr_gpu_standin.cc) and the tests'
 * host reference: one definition, so a kernel and the reference agree bit
 * for bit by construction, not by luck.
 *
 *   - integer sums and products wrap (computed unsigned: MPI wants the
 *     wrapped value, and signed overflow is undefined in C++);
 *   - half and bfloat16 are computed in float and rounded to nearest even:
 *     float has at least 2p+2 bits for both, so the result is the correctly
 *     rounded half/bfloat16 operation (no double-rounding error);
 *   - a sum or product that is NaN is the one canonical quiet NaN of its type
 *     (0x7fff, 0x7fffffff, 0x7fffffffffffffff): the hardware does not agree
 *     on NaN bits (x86 keeps the first operand's payload and makes inf - inf
 *     0xffc00000; the GPU returns 0x7fffffff), so both sides say it alike;
 *   - min/max keep inout unless in is strictly smaller/larger, and return
 *     that operand's bits unchanged (a NaN payload included; half and
 *     bfloat16 are compared in float, never rounded back): MPI does not
 *     define NaN behaviour, this is at least the same everywhere;
 *   - logical ops give 0 or 1 in the element type, as MPI_LAND & co.
 */
#ifndef DUALRAIL_GPU_OPS_HPP
#define DUALRAIL_GPU_OPS_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpu/dr_gpu.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define DR_HD __host__ __device__ __forceinline__
#else
#define DR_HD inline
#endif

namespace dualrail {
namespace gpu {

/* Storage types of the 16-bit floats: raw bits, converted around each operation. */
struct Half {
    uint16_t bits;
};
struct BFloat16 {
    uint16_t bits;
};

/* The NaN every 16-bit float result that is NaN becomes (the device conversions' own). */
constexpr uint16_t kHalfNaN = 0x7fff, kBf16NaN = 0x7fff;

DR_HD float bits_to_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}
DR_HD uint32_t float_to_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

DR_HD float half_to_float(uint16_t h)
{
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) {
        return bits_to_float(sign | 0x7f800000u | (man << 13)); /* inf, nan */
    }
    if (exp == 0) {
        if (man == 0) {
            return bits_to_float(sign);
        }
        /* subnormal: normalize */
        int e = -1;
        do {
            ++e;
            man <<= 1;
        } while ((man & 0x400u) == 0);
        return bits_to_float(sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13));
    }
    return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
#endif
}

DR_HD uint16_t float_to_half(float f)
{
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(f));
#else
    const uint32_t x = float_to_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) { /* nan: the canonical one, as cvt.rn.f16.f32 gives */
        return kHalfNaN;
    }
    if (ax >= 0x477ff000u) { /* inf, or rounds to 65536 or more: inf */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (ax < 0x38800000u) {     /* below the smallest normal half: subnormal or zero */
        if (ax < 0x33000000u) { /* below half of the smallest subnormal: zero */
            return sign;
        }
        const uint32_t e = ax >> 23;
        const uint32_t man = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e; /* 14 .. 24 */
        uint32_t q = man >> shift;
        const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) {
            ++q;
        }
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax + 0xc8000000u; /* rebias exponent: -112 << 23 */
    r = r + 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
#endif
}

DR_HD float bf16_to_float(uint16_t h)
{
    return bits_to_float((uint32_t)h << 16);
}

DR_HD uint16_t float_to_bf16(float f)
{
#if defined(__CUDA_ARCH__)
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
    const uint32_t x = float_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return kBf16NaN; /* as cvt.rn.bf16.f32 gives */
    }
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
#endif
}

/* The canonical NaN for a sum or product that is NaN (what the GPU makes of any NaN). */
DR_HD float canonical(float r)
{
    return r != r ? bits_to_float(0x7fffffffu) : r;
}
DR_HD double canonical(double r)
{
    if (r != r) {
        const uint64_t b = 0x7fffffffffffffffull;
        memcpy(&r, &b, 8);
    }
    return r;
}

/* The arithmetic of one op on values of a computation type C. */
template <int OP, typename C> DR_HD C apply_arith(C in, C io)
{
    if constexpr (OP == DR_GPU_SUM) {
        return canonical(in + io);
    } else if constexpr (OP == DR_GPU_PROD) {
        return canonical(in * io);
    } else if constexpr (OP == DR_GPU_MIN) {
        return in < io ? in : io;
    } else {
        return in > io ? in : io;
    }
}

template <int OP, typename T> DR_HD T apply(T in, T io)
{
    if constexpr (std::is_floating_point<T>::value) {
        return apply_arith<OP, T>(in, io);
    } else {
        using U = typename std::make_unsigned<T>::type;
        /* Wider than int for 8/16-bit types so no promotion to signed int overflows. */
        using W = typename std::conditional<(sizeof(T) < 4), uint32_t, U>::type;
        if constexpr (OP == DR_GPU_SUM) {
            return (T)(U)((W)(U)in + (W)(U)io);
        } else if constexpr (OP == DR_GPU_PROD) {
            return (T)(U)((W)(U)in * (W)(U)io);
        } else if constexpr (OP == DR_GPU_MIN || OP == DR_GPU_MAX) {
            return apply_arith<OP, T>(in, io);
        } else if constexpr (OP == DR_GPU_BAND) {
            return (T)(in & io);
        } else if constexpr (OP == DR_GPU_BOR) {
            return (T)(in | io);
        } else if constexpr (OP == DR_GPU_BXOR) {
            return (T)(in ^ io);
        } else if constexpr (OP == DR_GPU_LAND) {
            return (T)((in != 0 && io != 0) ? 1 : 0);
        } else if constexpr (OP == DR_GPU_LOR) {
            return (T)((in != 0 || io != 0) ? 1 : 0);
        } else {
            return (T)(((in != 0) != (io != 0)) ? 1 : 0);
        }
    }
}

/* 16-bit floats: min/max select an operand's bits; sum/product round the float result once. */
template <int OP> DR_HD Half apply(Half in, Half io)
{
    const float a = half_to_float(in.bits), b = half_to_float(io.bits);
    if constexpr (OP == DR_GPU_MIN || OP == DR_GPU_MAX) {
        return (OP == DR_GPU_MIN ? a < b : a > b) ? in : io;
    }
    const float r = apply_arith<OP, float>(a, b);
    return Half{r != r ? kHalfNaN : float_to_half(r)};
}

template <int OP> DR_HD BFloat16 apply(BFloat16 in, BFloat16 io)
{
    const float a = bf16_to_float(in.bits), b = bf16_to_float(io.bits);
    if constexpr (OP == DR_GPU_MIN || OP == DR_GPU_MAX) {
        return (OP == DR_GPU_MIN ? a < b : a > b) ? in : io;
    }
    const float r = apply_arith<OP, float>(a, b);
    return BFloat16{r != r ? kBf16NaN : float_to_bf16(r)};
}

/* Host loop over possibly unaligned memory: the stand-in's reduction and the tests' reference. */
template <int OP, typename T> void host_reduce_t(const void *in, void *inout, size_t count)
{
    const unsigned char *a = static_cast<const unsigned char *>(in);
    unsigned char *b = static_cast<unsigned char *>(inout);
    for (size_t i = 0; i < count; ++i) {
        T x, y;
        memcpy(&x, a + i * sizeof(T), sizeof(T));
        memcpy(&y, b + i * sizeof(T), sizeof(T));
        y = apply<OP>(x, y);
        memcpy(b + i * sizeof(T), &y, sizeof(T));
    }
}

/*
 * Call F::template run<OP, T>() for a runtime (op, type); returns false for
 * a pair the kernels do not implement. The one dispatch table of the
 * project: kernels and reference are instantiated from it alike.
 */
template <typename F, int OP> bool dispatch_type(int type, F &f)
{
    switch (type) {
    case DR_GPU_F32:
        f.template run<OP, float>();
        return OP <= DR_GPU_MAX;
    case DR_GPU_F64:
        f.template run<OP, double>();
        return OP <= DR_GPU_MAX;
    case DR_GPU_F16:
        f.template run<OP, Half>();
        return OP <= DR_GPU_MAX;
    case DR_GPU_BF16:
        f.template run<OP, BFloat16>();
        return OP <= DR_GPU_MAX;
    case DR_GPU_I8:
        f.template run<OP, int8_t>();
        return true;
    case DR_GPU_I16:
        f.template run<OP, int16_t>();
        return true;
    case DR_GPU_I32:
        f.template run<OP, int32_t>();
        return true;
    case DR_GPU_I64:
        f.template run<OP, int64_t>();
        return true;
    case DR_GPU_U8:
        f.template run<OP, uint8_t>();
        return true;
    case DR_GPU_U16:
        f.template run<OP, uint16_t>();
        return true;
    case DR_GPU_U32:
        f.template run<OP, uint32_t>();
        return true;
    case DR_GPU_U64:
        f.template run<OP, uint64_t>();
        return true;
    default:
        return false;
    }
}

/* Floating types have only the arithmetic ops: F sees those pairs alone. */
template <typename F, int OP> bool dispatch_checked(int type, F &f)
{
    if (!dr_gpu_op_valid(OP, type)) {
        return false;
    }
    return dispatch_type<F, OP>(type, f);
}

template <typename F> bool dispatch(int op, int type, F &f)
{
    switch (op) {
    case DR_GPU_SUM:
        return dispatch_checked<F, DR_GPU_SUM>(type, f);
    case DR_GPU_PROD:
        return dispatch_checked<F, DR_GPU_PROD>(type, f);
    case DR_GPU_MIN:
        return dispatch_checked<F, DR_GPU_MIN>(type, f);
    case DR_GPU_MAX:
        return dispatch_checked<F, DR_GPU_MAX>(type, f);
    case DR_GPU_BAND:
        return dispatch_checked<F, DR_GPU_BAND>(type, f);
    case DR_GPU_BOR:
        return dispatch_checked<F, DR_GPU_BOR>(type, f);
    case DR_GPU_BXOR:
        return dispatch_checked<F, DR_GPU_BXOR>(type, f);
    case DR_GPU_LAND:
        return dispatch_checked<F, DR_GPU_LAND>(type, f);
    case DR_GPU_LOR:
        return dispatch_checked<F, DR_GPU_LOR>(type, f);
    case DR_GPU_LXOR:
        return dispatch_checked<F, DR_GPU_LXOR>(type, f);
    default:
        return false;
    }
}

/* The host reference / stand-in reduction. false for an unimplemented (op, type). */
struct HostReduce {
    const void *in;
    void *inout;
    size_t count;
    template <int OP, typename T> void run()
    {
        if constexpr (!(std::is_floating_point<T>::value || std::is_same<T, Half>::value ||
                        std::is_same<T, BFloat16>::value) ||
                      OP <= DR_GPU_MAX) {
            host_reduce_t<OP, T>(in, inout, count);
        }
    }
};

inline bool host_reduce(int op, int type, const void *in, void *inout, size_t count)
{
    HostReduce f{in, inout, count};
    return dispatch(op, type, f);
}

} // namespace gpu
} // namespace dualrail

#endif
