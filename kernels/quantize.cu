// embstab low-precision kernels: float-format rounding (nearest-even / exact stochastic) and
// MX / per-row block-float quantization, one pass over memory.
//
// Loaded at run time through cupy.RawModule (embstab/lowprec/gpu.py). CUDA C rather than Triton
// because embstab pins a CPU build of torch (Triton ships only with CUDA builds) and cupy is the
// declared `gpu` extra; CUDA C also gives exact control over the integer bit manipulation.
//
// The algorithm is the CPU one (embstab/lowprec/floatq.py, embstab/lowprec/csrc/quantize_cpu.c):
// round the fp32 bit pattern with an integer increment in the target's normal range, and
// scale-to-integers in its subnormal range. Both are exact, so round-to-nearest results are
// bit-identical to the CPU path, and stochastic rounding draws the same stream as the CPU kernel.
//
// Randomness is counter based (splitmix64 of seed and element index): results depend on the seed
// and on each element's index only, never on the launch geometry.

// NVRTC (what cupy compiles with) has no C library headers: fixed-width types are own typedefs,
// and NaN / Inf / 2^-24 are built from bit patterns instead of NAN, INFINITY or hex float literals.
// Own names, so they cannot clash with a toolchain that does predefine the <stdint.h> ones.
typedef int i32;
typedef long long i64;
typedef unsigned long long u64;

#define F32_NAN __int_as_float(0x7fc00000)
#define F32_INF __int_as_float(0x7f800000)
#define F32_TWO_M24 __int_as_float(0x33800000)  // 2^-24: scales a 24-bit draw into [0, 1)

#define OVF_SATURATE 0
#define OVF_INF 1
#define OVF_NAN 2

#define MODE_NEAREST 0
#define MODE_STOCHASTIC 1

#define GOLDEN 0x9E3779B97F4A7C15ull

// splitmix64's output function of a state z
__device__ __forceinline__ u64 finalize64(u64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 mix64(u64 seed, u64 index) { return finalize64(seed + (index + 1ull) * GOLDEN); }

// 2^max(emin, -126): below it the bit trick is not exact (see round_float). Computed once per
// thread by the kernels, not once per element.
__device__ __forceinline__ float grid_floor(int emin) { return ldexpf(1.0f, max(emin, -126)); }

// Round one fp32 value onto the format (exp range [emin, ...], man_bits stored bits);
// lowest = grid_floor(emin).
__device__ __forceinline__ float round_float(float v, int man_bits, int emin, int subnormals,
                                             float vmax, int overflow, int has_inf, int fnuz,
                                             int mode, u64 rnd, float lowest) {
    if (isnan(v)) return v;
    i32 b = __float_as_int(v);
    i32 mag = b & 0x7FFFFFFF;
    int d = 23 - man_bits;
    float a = fabsf(v);
    float out;
    // below 2^max(emin, -126) the bit trick is not exact, except on fp32's own subnormal grid
    // (emin == -126 with subnormals and mantissa bits); the CPU kernel uses the same rule
    bool same_grid = emin == -126 && subnormals && man_bits > 0;
    if (!same_grid && a > 0.0f && a < lowest) {
        // subnormal range of the target: grid step 2^(emin - m_sub)
        int m_sub = subnormals ? man_bits : 0;
        int qexp = emin - m_sub;
        if (mode == MODE_NEAREST) {
            float k = rintf(ldexpf(a, -qexp));  // exact scaling; rintf rounds half to even
            out = ldexpf(k, qexp);
        } else {
            // exact SR on the integer significand: S * 2^(E-23) with S < 2^24
            int e_field = mag >> 23;
            i64 S = e_field ? ((mag & 0x7FFFFF) | 0x800000) : (mag & 0x7FFFFF);
            int E = e_field ? e_field - 127 : -126;
            int shift = qexp - (E - 23);          // dropped bits, > 0 here
            i64 q, rem;
            if (shift > 62) { S >>= (shift - 62); shift = 62; }  // probability error < 2^-62
            q = S >> shift;
            rem = S - (q << shift);
            u64 r = rnd >> (64 - shift);
            if ((u64)rem + r >= (1ull << shift)) q += 1;
            out = ldexpf((float)q, qexp);
        }
        out = copysignf(out, v);
    } else {
        if (d > 0) {
            i32 t;
            if (mode == MODE_NEAREST && man_bits == 0) {
                t = b + (1 << (d - 1));  // no mantissa bit to be even: ties away (as on the CPU)
            } else if (mode == MODE_NEAREST) {
                t = b + ((b >> d) & 1) + ((1 << (d - 1)) - 1);
            } else {
                t = b + (i32)(rnd >> (64 - d));
            }
            t &= -(1 << d);
            out = __int_as_float(t);
        } else {
            out = v;
        }
        float ao = fabsf(out);
        if (overflow == OVF_SATURATE) {
            if (!(has_inf && isinf(v))) out = fminf(fmaxf(out, -vmax), vmax);
        } else if (overflow == OVF_INF) {
            if (ao > vmax) out = copysignf(F32_INF, out);
        } else {
            if (ao > vmax) out = F32_NAN;
        }
    }
    if (fnuz) out = out + 0.0f;
    return out;
}

extern "C" __global__ void quantize_float_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                 long long n, int man_bits, int emin, int subnormals,
                                                 float vmax, int overflow, int has_inf, int fnuz,
                                                 int mode, unsigned long long seed) {
    long long stride = (long long)blockDim.x * gridDim.x;
    float lowest = grid_floor(emin);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 rnd = (mode == MODE_STOCHASTIC) ? mix64(seed, (u64)i) : 0ull;
        y[i] = round_float(x[i], man_bits, emin, subnormals, vmax, overflow, has_inf, fnuz, mode, rnd, lowest);
    }
}

// Four consecutive elements from index base; their stochastic states differ by GOLDEN, so one
// multiply serves the four.
__device__ __forceinline__ float4 round4(float4 v, u64 base, int man_bits, int emin, int subnormals, float vmax,
                                         int overflow, int has_inf, int fnuz, int mode, u64 seed, float lowest) {
    bool sr = mode == MODE_STOCHASTIC;
    u64 z = sr ? seed + (base + 1ull) * GOLDEN : 0ull;
    float4 o;
    o.x = round_float(v.x, man_bits, emin, subnormals, vmax, overflow, has_inf, fnuz, mode, sr ? finalize64(z) : 0ull, lowest);
    o.y = round_float(v.y, man_bits, emin, subnormals, vmax, overflow, has_inf, fnuz, mode, sr ? finalize64(z + GOLDEN) : 0ull, lowest);
    o.z = round_float(v.z, man_bits, emin, subnormals, vmax, overflow, has_inf, fnuz, mode, sr ? finalize64(z + 2ull * GOLDEN) : 0ull, lowest);
    o.w = round_float(v.w, man_bits, emin, subnormals, vmax, overflow, has_inf, fnuz, mode, sr ? finalize64(z + 3ull * GOLDEN) : 0ull, lowest);
    return o;
}

// The same rounding, eight elements per thread: two 16-byte loads (x and y 16-byte aligned),
// blockDim.x groups of four apart so that a warp's loads stay contiguous, both issued before
// either group is rounded. A kernel needs that many bytes in flight to run near the memory's
// speed: on an H200, bf16 rounding of 1 GiB took 1.09 ms at one element per thread, 0.65 ms at
// four, 0.58 ms at eight (a copy: 0.51 ms). Element i still draws mix64(seed, i), so results equal
// the scalar kernel's; the thread that meets index n / 4 rounds the n % 4 trailing elements.
extern "C" __global__ void quantize_float4x2_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                    long long n, int man_bits, int emin, int subnormals,
                                                    float vmax, int overflow, int has_inf, int fnuz,
                                                    int mode, unsigned long long seed) {
    long long groups = n >> 2;
    long long span = 2LL * blockDim.x;
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    float4* __restrict__ y4 = reinterpret_cast<float4*>(y);
    float lowest = grid_floor(emin);
    for (long long start = (long long)blockIdx.x * span; start <= groups; start += (long long)gridDim.x * span) {
        long long i0 = start + threadIdx.x, i1 = i0 + blockDim.x;
        float4 v0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v1 = v0;
        if (i0 < groups) v0 = x4[i0];
        if (i1 < groups) v1 = x4[i1];
        if (i0 < groups) y4[i0] = round4(v0, (u64)i0 << 2, man_bits, emin, subnormals, vmax, overflow, has_inf, fnuz, mode, seed, lowest);
        if (i1 < groups) y4[i1] = round4(v1, (u64)i1 << 2, man_bits, emin, subnormals, vmax, overflow, has_inf, fnuz, mode, seed, lowest);
        if (i0 == groups || i1 == groups) {
            for (long long j = groups << 2; j < n; ++j) {
                y[j] = round_float(x[j], man_bits, emin, subnormals, vmax, overflow, has_inf, fnuz, mode,
                                   mode == MODE_STOCHASTIC ? mix64(seed, (u64)j) : 0ull, lowest);
            }
        }
    }
}

// MX: one warp per block of 32 contiguous elements of a row (row_len need not be a multiple of 32).
// Scale exponent s = clamp(floor(log2 amax) - emax_elem, -127, 127); elements rounded (saturating)
// to the element format, or to k * 2^-6 with |k| <= 127 when is_int8. Blocks with Inf/NaN give NaN.
extern "C" __global__ void quantize_mx_kernel(const float* __restrict__ x, float* __restrict__ y,
                                              long long n_rows, int row_len, int emax_elem, int is_int8,
                                              int man_bits, int emin, float vmax, int mode,
                                              unsigned long long seed) {
    int lane = threadIdx.x & 31;
    long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    int blocks_per_row = (row_len + 31) / 32;
    float lowest = grid_floor(emin);
    long long total = n_rows * blocks_per_row;
    bool whole = row_len % 32 == 0;  // blocks tile the rows: element index without a 64-bit division
    for (long long blk = warp; blk < total; blk += warps) {
        bool inside = true;
        long long idx = blk * 32 + lane;
        if (!whole) {
            long long row = blk / blocks_per_row;
            int col = (int)(blk - row * blocks_per_row) * 32 + lane;
            inside = col < row_len;
            idx = row * row_len + col;
        }
        float v = inside ? x[idx] : 0.0f;
        float amax = fabsf(v);
        for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
        if (!inside) continue;
        if (!isfinite(amax)) { y[idx] = F32_NAN; continue; }
        int e = 0;
        if (amax > 0.0f) { frexpf(amax, &e); e -= 1; }
        int s = min(max(e - emax_elem, -127), 127);
        float scaled = ldexpf(v, -s);  // fp32 keeps this exact for normal-range results
        u64 rnd = (mode == MODE_STOCHASTIC) ? mix64(seed, (u64)idx) : 0ull;
        float q;
        if (is_int8) {
            float t = scaled * 64.0f;
            float k;
            if (mode == MODE_NEAREST) {
                k = rintf(t);
            } else {
                float f = floorf(fabsf(t));
                float frac = fabsf(t) - f;
                float u = (float)(rnd >> 40) * F32_TWO_M24;
                k = copysignf(f + (u < frac ? 1.0f : 0.0f), t);
            }
            q = fminf(fmaxf(k, -127.0f), 127.0f) / 64.0f;
        } else {
            q = round_float(scaled, man_bits, emin, 1, vmax, OVF_SATURATE, 0, 0, mode, rnd, lowest);
        }
        y[idx] = ldexpf(q, s);
    }
}
