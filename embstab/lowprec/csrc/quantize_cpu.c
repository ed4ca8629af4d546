/* embstab CPU kernel: round float32 values onto a binary floating-point format in one pass.
 *
 * The same algorithm and random stream as the CUDA kernel (kernels/quantize.cu), so a seed gives
 * the same stochastic rounding on CPU and GPU, and nearest rounding is bit-identical to the torch
 * path in embstab/lowprec/floatq.py:
 *   - normal range of the target (and zeros, Inf, NaN): round the fp32 bit pattern with an integer
 *     increment below the kept mantissa bits, then clear them (a carry bumps the exponent, which is
 *     the correct next value in every binade);
 *   - the target's subnormal range (a uniform grid): nearest by adding and removing a power of two
 *     whose ulp is the grid step; stochastic by exact integer rounding of the significand.
 * Both are computed for every element in one branch-free loop that the compiler vectorises; only
 * stochastic rounding of values far below the grid revisits the chunk (still in cache).
 *
 * Randomness is counter based: splitmix64(seed, element index), so results depend on the seed and
 * each element's index only, never on how the work is split between threads.
 *
 * Loaded with ctypes (embstab/lowprec/native.py); it holds no Python objects, and the module-init
 * function exists only so the build tools can treat it as an extension module.
 */
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MODE_NEAREST 0
#define MODE_STOCHASTIC 1
#define OVF_SATURATE 0
#define OVF_INF 1
#define OVF_NAN 2
#define CHUNK 4096

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline uint64_t mix64(uint64_t seed, uint64_t index) {
    uint64_t z = seed + (index + 1ull) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct {
    int man_bits, emin, subnormals, has_inf, fnuz, mode, overflow;
    float vmax;
    uint64_t seed;
} fmt_t;

/* Exact stochastic rounding of one value below the target's smallest normal (0 < |v| < 2^emin'),
 * for values so far below the grid step that the vectorised 32-bit formula cannot hold them. */
static float round_small(float v, const fmt_t *p, uint64_t rnd) {
    float a = fabsf(v);
    int m_sub = p->subnormals ? p->man_bits : 0;
    int qexp = p->emin - m_sub; /* grid step 2^qexp */
    /* exact SR on the integer significand S * 2^(E - 23), S < 2^24 */
    uint32_t mag = f2u(a);
    int e_field = (int)(mag >> 23);
    int64_t s = e_field ? (int64_t)((mag & 0x7FFFFF) | 0x800000) : (int64_t)(mag & 0x7FFFFF);
    int e = e_field ? e_field - 127 : -126;
    int shift = qexp - (e - 23); /* bits dropped, >= 1 here */
    if (shift > 62) { s >>= (shift - 62); shift = 62; } /* probability error < 2^-62 */
    int64_t q = s >> shift;
    uint64_t rem = (uint64_t)(s - (q << shift));
    uint64_t r = rnd >> (64 - shift);
    if (rem + r >= (1ull << shift)) q += 1;
    float out = ldexpf((float)q, qexp);
    return copysignf(out, v);
}

/* One chunk [lo, hi): mode and overflow are compile-time constants in each specialisation.
 * Both ranges are computed for every element and the right one is selected, so the loop has no
 * data-dependent branch and vectorises. */
static inline __attribute__((always_inline)) void chunk(const float *restrict x, float *restrict y, int64_t lo,
                                                        int64_t hi, const fmt_t *p, const int mode,
                                                        const int overflow, uint32_t thr_bits) {
    const int d = 23 - p->man_bits;
    const uint32_t mask = d > 0 ? ~((1u << d) - 1u) : 0xFFFFFFFFu;
    const uint32_t half_m1 = d > 0 ? (1u << (d - 1)) - 1u : 0u;
    const uint32_t half = d > 0 ? (1u << (d - 1)) : 0u;
    const int ties_away = p->man_bits == 0; /* no mantissa bit to be even: the significand is odd */
    const uint32_t vmax_bits = f2u(p->vmax);
    const int keep_inf = p->has_inf;
    const int fnuz = p->fnuz;
    const uint64_t seed = p->seed;
    const int sh = 64 - (d > 0 ? d : 1);
    /* the target's subnormal range: grid step 2^qexp, qexp >= -149 for formats within float32 */
    const int qexp = p->emin - (p->subnormals ? p->man_bits : 0);
    const float magic = ldexpf(1.0f, qexp + 23); /* a normal float32: qexp >= -149 */
    const float down_scale = ldexpf(1.0f, qexp);
    uint32_t deep = 0;
    for (int64_t i = lo; i < hi; i++) {
        float v = x[i];
        uint32_t b = f2u(v);
        uint32_t mag = b & 0x7FFFFFFFu;
        uint32_t sign = b & 0x80000000u;
        uint64_t rnd = mode == MODE_STOCHASTIC ? mix64(seed, (uint64_t)i) : 0ull;
        uint32_t inc;
        if (mode == MODE_NEAREST) {
            inc = ties_away ? half : ((b >> (d > 0 ? d : 0)) & (d > 0 ? 1u : 0u)) + half_m1;
        } else {
            inc = d > 0 ? (uint32_t)(rnd >> sh) : 0u;
        }
        uint32_t t = (b + inc) & mask;
        uint32_t tmag = t & 0x7FFFFFFFu;
        if (overflow == OVF_SATURATE) {
            /* clamp to +-vmax; infinite inputs stay infinite where the format has Inf */
            uint32_t sat = tmag > vmax_bits ? (sign | vmax_bits) : t;
            t = (keep_inf && mag == 0x7F800000u) ? b : sat;
        } else if (overflow == OVF_INF) {
            t = tmag > vmax_bits ? (sign | 0x7F800000u) : t;
        } else {
            t = tmag > vmax_bits ? 0x7FC00000u : t;
        }
        t = mag > 0x7F800000u ? b : t; /* NaN stays NaN (its pattern may have carried) */
        /* below the smallest normal: round on the uniform grid (values the other path gets wrong) */
        uint32_t small_bits;
        if (mode == MODE_NEAREST) {
            /* a < 2^emin <= magic = 2^(qexp + 23), whose ulp is the grid step 2^qexp: adding and
             * removing it rounds a half to even onto the grid, exactly */
            small_bits = f2u((u2f(mag) + magic) - magic) | sign;
        } else {
            /* exact SR on the integer significand s * 2^(e - 23): drop `shift` bits, carry iff the
             * dropped bits plus as many random bits (the top ones of rnd) overflow, i.e. with
             * probability = dropped fraction. 32-bit lanes here; shifts beyond 31 bits (values
             * 2^8 times below the grid step) are settled below with the 64-bit formula. */
            /* (written without branches so the loop stays vectorised) */
            int32_t e_field = (int32_t)(mag >> 23);
            int32_t normal = e_field != 0;
            uint32_t s = (mag & 0x7FFFFFu) | ((uint32_t)normal << 23);
            int32_t shift = qexp + 23 - ((e_field | (1 - normal)) - 127); /* subnormals: e = -126 */
            int32_t keep = shift < 31 ? shift : 31;
            keep = keep > 1 ? keep : 1;
            uint32_t q = s >> keep;
            uint32_t rem = s - (q << keep);
            uint32_t r = (uint32_t)(rnd >> 32) >> (32 - keep);
            q += (rem + r) >> keep;
            /* q <= 2^23: 2^23 + q is exact in float32's bits, and subtracting 2^23 gives q (an
             * int-to-float conversion here keeps gcc from vectorising the loop) */
            float qf = u2f(0x4B000000u | q) - 8388608.0f;
            small_bits = f2u(qf * down_scale) | sign;
            deep |= (uint32_t)((mag < thr_bits) & (mag != 0u) & (shift > 31));
        }
        uint32_t small = (uint32_t)((mag < thr_bits) & (mag != 0u));
        t = small ? small_bits : t;
        if (fnuz) t = t == 0x80000000u ? 0u : t; /* no negative zero */
        y[i] = u2f(t);
    }
    if (mode == MODE_STOCHASTIC && deep) {
        for (int64_t i = lo; i < hi; i++) {
            uint32_t mag = f2u(x[i]) & 0x7FFFFFFFu;
            if (mag < thr_bits && mag != 0u) {
                float o = round_small(x[i], p, mix64(seed, (uint64_t)i));
                y[i] = (fnuz && o == 0.0f) ? 0.0f : o;
            }
        }
    }
}

#define SPECIALISE(NAME, MODE, OVF)                                                                      \
    static void NAME(const float *x, float *y, int64_t lo, int64_t hi, const fmt_t *p, uint32_t thr) { \
        for (int64_t c = lo; c < hi; c += CHUNK) chunk(x, y, c, c + CHUNK < hi ? c + CHUNK : hi, p, MODE, OVF, thr); \
    }

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
SPECIALISE(nearest_saturate, MODE_NEAREST, OVF_SATURATE)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
SPECIALISE(nearest_inf, MODE_NEAREST, OVF_INF)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
SPECIALISE(nearest_nan, MODE_NEAREST, OVF_NAN)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
SPECIALISE(stochastic_saturate, MODE_STOCHASTIC, OVF_SATURATE)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
SPECIALISE(stochastic_inf, MODE_STOCHASTIC, OVF_INF)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
SPECIALISE(stochastic_nan, MODE_STOCHASTIC, OVF_NAN)

/* Round x[lo:hi] into y[lo:hi]. Returns 0, or -1 for an unknown mode/overflow code. */
int embstab_quantize_float32(const float *x, float *y, int64_t lo, int64_t hi, int man_bits, int emin,
                             int subnormals, float vmax, int overflow, int has_inf, int fnuz, int mode,
                             uint64_t seed) {
    fmt_t p = {man_bits, emin, subnormals, has_inf, fnuz, mode, overflow, vmax, seed};
    /* below 2^max(emin, -126) the bit trick is not exact, except on fp32's own subnormal grid */
    int same_grid = emin == -126 && subnormals && man_bits > 0;
    int e = emin > -126 ? emin : -126;
    uint32_t thr = same_grid ? 0u : (uint32_t)(e + 127) << 23;
    if (mode == MODE_NEAREST) {
        if (overflow == OVF_SATURATE) nearest_saturate(x, y, lo, hi, &p, thr);
        else if (overflow == OVF_INF) nearest_inf(x, y, lo, hi, &p, thr);
        else if (overflow == OVF_NAN) nearest_nan(x, y, lo, hi, &p, thr);
        else return -1;
    } else if (mode == MODE_STOCHASTIC) {
        if (overflow == OVF_SATURATE) stochastic_saturate(x, y, lo, hi, &p, thr);
        else if (overflow == OVF_INF) stochastic_inf(x, y, lo, hi, &p, thr);
        else if (overflow == OVF_NAN) stochastic_nan(x, y, lo, hi, &p, thr);
        else return -1;
    } else {
        return -1;
    }
    return 0;
}

/* Round x[0:n] into y[0:n] together with other threads calling this with the same `next`: each
 * caller takes blocks of `block` elements (a multiple of CHUNK) from the shared counter until none
 * is left. A thread that shares its core with another busy thread (torch's OpenMP workers spin for
 * a while after each parallel op) then takes fewer blocks instead of holding everyone up, as a
 * fixed split would. Results depend on element indices only, never on who rounded what.
 * Returns 0, or -1 for an unknown mode/overflow code. */
static int quantize_shared(const float *x, float *y, int64_t n, int64_t block, int64_t *next, int man_bits,
                           int emin, int subnormals, float vmax, int overflow, int has_inf, int fnuz, int mode,
                           uint64_t seed) {
    for (;;) {
        int64_t lo = __atomic_fetch_add(next, block, __ATOMIC_RELAXED);
        if (lo >= n) return 0;
        int64_t hi = lo + block < n ? lo + block : n;
        if (embstab_quantize_float32(x, y, lo, hi, man_bits, emin, subnormals, vmax, overflow, has_inf, fnuz,
                                     mode, seed) != 0)
            return -1;
    }
}

/* One rounding job shared by a team of threads, each calling this with the same job: the body of
 * an OpenMP parallel region when native.py hands it to the OpenMP runtime torch already runs
 * (GOMP_parallel, so torch's own worker threads, idle or spinning for work right after a torch op,
 * do it instead of competing with threads of ours), or of each thread of native.py's own pool.
 * The layout is mirrored by a ctypes.Structure in native.py. */
typedef struct {
    const float *x;
    float *y;
    int64_t n, block, next;
    int man_bits, emin, subnormals;
    float vmax;
    int overflow, has_inf, fnuz, mode;
    uint64_t seed;
    int status;
} embstab_job_t;

void embstab_quantize_job(void *data) {
    embstab_job_t *j = (embstab_job_t *)data;
    if (quantize_shared(j->x, j->y, j->n, j->block, &j->next, j->man_bits, j->emin, j->subnormals, j->vmax,
                        j->overflow, j->has_inf, j->fnuz, j->mode, j->seed) != 0)
        __atomic_store_n(&j->status, -1, __ATOMIC_RELAXED);
}

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_quantize_cpu",
                                    "CPU rounding kernel (called through ctypes).", -1, NULL};

PyMODINIT_FUNC PyInit__quantize_cpu(void) { return PyModule_Create(&module); }
