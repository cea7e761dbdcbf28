// The GPU trainer's kernels: every layer's forward and backward pass, the
// loss, the optimisers and the ordered sums, mirroring package trainer's CPU
// code (the reference every kernel is tested against).
//
// Determinism: no kernel uses atomics, and every sum runs in an order fixed
// by the shapes alone (a thread's own loop, or a shared-memory tree of a
// fixed block size), so a run gives the same bits every time. Gradients are
// computed as float32 partial sums over groups of samples and the groups are
// added in float64, in order: 16 samples a group for a dense layer's weights
// (the CPU trainer's gradChunk), one for a convolution's (the CPU groups
// those by 16 too; one a group keeps the GPU busy, and the convolution
// gradients then agree with the CPU's to rounding, not to the bit). A
// replica whose slice starts at a multiple of 16 computes exactly the
// partials one GPU computes for the same samples.
//
// The PTX is compiled with --fmad=false, so nvcc contracts no a*b+c into a
// fused multiply-add (fmaf, written out, and the maths library's own still
// are one): the float64 sums of batch norm and the loss round as the CPU's
// Go does.
//
// Element-wise arithmetic that the CPU does in float32 is written with
// __fmul_rn, __fadd_rn and __fdiv_rn, which nvcc does not fuse into
// multiply-adds, so that ReLU, pooling, dropout, the batch-norm apply and
// the optimiser updates give the CPU's bits from the same inputs.
//
// Every parameter is passed in a slot of its own, as gorgonia.org/cu's
// Function.Launch passes them. Regenerate kernels.ptx with `go generate
// ./trainer/gpu` (it needs nvcc) after changing this file; a test checks
// that the PTX was made from this source.

typedef unsigned long long u64;

#define FOR_EACH(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (long long)(n); i += (long long)blockDim.x * gridDim.x)

// FOR_EACH32 is FOR_EACH with int indexes, for kernels that divide them
// (64-bit division costs several times 32-bit's), over fewer than 2^31
// values: the host refuses larger tensors (maxElems).
#define FOR_EACH32(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// ---------------------------------------------------------------------------
// GEMM: C[m,n] (+)= sum over k of A(m,k)·B(k,n), for blockIdx.z matrices at
// strides sA, sB, sC. A(m,k) is A[m*lda+k], or A[k*lda+m] when TA; B(k,n) is
// B[k*ldb+n], or B[n*ldb+k] when TB. Each thread owns TM×TN outputs and adds
// their terms in k order, so the result does not depend on the tiling.

template <int BM, int BN, int TM, int TN, bool TA, bool TB>
__device__ void gemm_tile(int M, int N, int K, const float *A, int lda, long long sA, const float *B, int ldb,
                          long long sB, float *C, int ldc, long long sC, int acc) {
    const int BK = 16;
    const int TX = BN / TN;  // threads across
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    A += blockIdx.z * sA;
    B += blockIdx.z * sB;
    C += blockIdx.z * sC;
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    float c[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) c[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += 256) {
            int m, k;
            if (TA) {
                m = e % BM, k = e / BM;
            } else {
                m = e / BK, k = e % BK;
            }
            int gm = m0 + m, gk = k0 + k;
            float v = 0.f;
            if (gm < M && gk < K) v = TA ? A[(long long)gk * lda + gm] : A[(long long)gm * lda + gk];
            As[k][m] = v;
        }
        for (int e = tid; e < BN * BK; e += 256) {
            int n, k;
            if (TB) {
                n = e / BK, k = e % BK;
            } else {
                n = e % BN, k = e / BN;
            }
            int gn = n0 + n, gk = k0 + k;
            float v = 0.f;
            if (gn < N && gk < K) v = TB ? B[(long long)gn * ldb + gk] : B[(long long)gk * ldb + gn];
            Bs[k][n] = v;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; k++) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i++) a[i] = As[k][ty + i * (BM / TM)];
#pragma unroll
            for (int j = 0; j < TN; j++) b[j] = Bs[k][tx + j * TX];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) c[i][j] = fmaf(a[i], b[j], c[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; i++) {
        int gm = m0 + ty + i * (BM / TM);
        if (gm >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int gn = n0 + tx + j * TX;
            if (gn >= N) continue;
            float *p = &C[(long long)gm * ldc + gn];
            *p = acc ? *p + c[i][j] : c[i][j];
        }
    }
}

// One entry per tile shape (rows of C: 16, 32 or 64 a block) and
// transposition: gemm_<ta><tb>_<rows>.
#define GEMM(name, BM, BN, TA, TB)                                                                                  \
    extern "C" __global__ void __launch_bounds__(256) name(int M, int N, int K, const float *A, int lda, long long sA, \
                                                           const float *B, int ldb, long long sB, float *C, int ldc,   \
                                                           long long sC, int acc) {                                    \
        gemm_tile<BM, BN, 4, 4, TA, TB>(M, N, K, A, lda, sA, B, ldb, sB, C, ldc, sC, acc);                            \
    }
#define GEMMS(BM, BN)                          \
    GEMM(gemm_nn_##BM, BM, BN, false, false)   \
    GEMM(gemm_nt_##BM, BM, BN, false, true)    \
    GEMM(gemm_tn_##BM, BM, BN, true, false)    \
    GEMM(gemm_tt_##BM, BM, BN, true, true)
GEMMS(16, 256)
GEMMS(32, 128)
GEMMS(64, 64)

// ---------------------------------------------------------------------------
// Convolution. cols is [C·K·K, N·Ho·Wo]: row (c·K+ky)·K+kx, column
// i·Ho·Wo + oy·Wo + ox holds x[i, c, oy·s-p+ky, ox·s-p+kx] (0 outside).

// im2col runs on a grid (⌈N·Ho·Wo/256⌉, C·K·K) of 256 threads: blockIdx.y
// is the row, so a thread divides only to place its column (two 32-bit
// divisions, where one thread per value over the whole matrix took nine).
extern "C" __global__ void im2col(float *cols, const float *x, int n, int c, int h, int w, int k, int s, int p, int ho,
                                  int wo) {
    int q = n * ho * wo, plane = ho * wo, row = blockIdx.y;
    int kx = row % k, ky = (row / k) % k, ci = row / (k * k);
    float *out = cols + (long long)row * q;
    for (int col = blockIdx.x * blockDim.x + threadIdx.x; col < q; col += blockDim.x * gridDim.x) {
        int i = col / plane, o = col - i * plane;
        int oy = o / wo, ox = o - oy * wo;
        int iy = oy * s - p + ky, ix = ox * s - p + kx;
        float v = 0.f;
        if (iy >= 0 && iy < h && ix >= 0 && ix < w) v = x[(((long long)i * c + ci) * h + iy) * w + ix];
        out[col] = v;
    }
}

// col2im is im2col's adjoint: each pixel of dx sums the column values taken
// from it, in (ky, kx) order, as the CPU's col2im adds them. Stride 1, the
// common case, takes no division per tap.
extern "C" __global__ void col2im(float *dx, const float *cols, int n, int c, int h, int w, int k, int s, int p, int ho,
                                  int wo) {
    int q = n * ho * wo;
    FOR_EACH32(e, n * c * h * w) {
        int ix = e % w, iy = (e / w) % h, ci = (e / (w * h)) % c;
        int i = e / (w * h * c);
        const float *base = cols + (long long)ci * k * k * q + i * ho * wo;
        float sum = 0.f;
        for (int ky = 0; ky < k; ky++) {
            int ty = iy + p - ky, oy;
            if (s == 1) {
                if (ty < 0 || ty >= ho) continue;
                oy = ty;
            } else {
                if (ty < 0 || ty % s != 0 || ty / s >= ho) continue;
                oy = ty / s;
            }
            for (int kx = 0; kx < k; kx++) {
                int tx = ix + p - kx, ox;
                if (s == 1) {
                    if (tx < 0 || tx >= wo) continue;
                    ox = tx;
                } else {
                    if (tx < 0 || tx % s != 0 || tx / s >= wo) continue;
                    ox = tx / s;
                }
                sum = __fadd_rn(sum, base[(long long)(ky * k + kx) * q + oy * wo + ox]);
            }
        }
        dx[e] = sum;
    }
}

// cnhw_to_nchw turns the convolution's [C, N·HW] product into the batch
// [N, C, HW], adding bias[c] when bias is not null.
extern "C" __global__ void cnhw_to_nchw(float *y, const float *src, const float *bias, int n, int c, int hw) {
    FOR_EACH32(e, n * c * hw) {
        int o = e % hw, ci = (e / hw) % c, i = e / (hw * c);
        float v = src[((long long)ci * n + i) * hw + o];
        y[e] = bias ? __fadd_rn(v, bias[ci]) : v;
    }
}

// nchw_to_cnhw is its inverse, for the gradient.
extern "C" __global__ void nchw_to_cnhw(float *dst, const float *x, int n, int c, int hw) {
    FOR_EACH32(e, n * c * hw) {
        int o = e % hw, ci = (e / hw) % c, i = e / (hw * c);
        dst[((long long)ci * n + i) * hw + o] = x[e];
    }
}

// plane_sums sums each of rows planes of hw values in float32, in order.
extern "C" __global__ void plane_sums(float *out, const float *x, int rows, int hw) {
    FOR_EACH(r, rows) {
        const float *p = x + r * (long long)hw;
        float s = 0.f;
        for (int j = 0; j < hw; j++) s = __fadd_rn(s, p[j]);
        out[r] = s;
    }
}

// accum64 adds count groups of n float32 partial sums into g, in float64,
// group after group: g[j] += part[0·n+j] + part[1·n+j] + ….
extern "C" __global__ void accum64(double *g, const float *part, int count, int n) {
    FOR_EACH(j, n) {
        double s = g[j];
        for (int c = 0; c < count; c++) s += (double)part[(long long)c * n + j];
        g[j] = s;
    }
}

// bias_rows adds b to every row of y [n, out].
extern "C" __global__ void bias_rows(float *y, const float *b, int n, int out) {
    FOR_EACH(e, (long long)n * out) { y[e] = __fadd_rn(y[e], b[e % out]); }
}

// ---------------------------------------------------------------------------
// Element-wise layers.

extern "C" __global__ void relu_fwd(float *y, const float *x, long long n) {
    FOR_EACH(i, n) { y[i] = fmaxf(x[i], 0.f); }
}

// relu_bwd passes dy where y > 0 (y is never -0).
extern "C" __global__ void relu_bwd(float *dx, const float *dy, const float *y, long long n) {
    FOR_EACH(i, n) { dx[i] = y[i] > 0.f ? dy[i] : 0.f; }
}

extern "C" __global__ void add(float *y, const float *a, const float *b, long long n) {
    FOR_EACH(i, n) { y[i] = __fadd_rn(a[i], b[i]); }
}

// maxpool_fwd: the maximum of each K×K window, the first one on ties, and
// its index within the plane.
extern "C" __global__ void maxpool_fwd(float *y, int *arg, const float *x, int planes, int h, int w, int k, int s,
                                       int ho, int wo) {
    FOR_EACH(o, (long long)planes * ho * wo) {
        int ox = (int)(o % wo), oy = (int)((o / wo) % ho);
        long long pl = o / ((long long)wo * ho);
        const float *src = x + pl * h * w;
        float best = -__int_as_float(0x7f800000);
        int bi = 0;
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                int i = (oy * s + ky) * w + ox * s + kx;
                if (src[i] > best) best = src[i], bi = i;
            }
        y[o] = best;
        arg[o] = bi;
    }
}

// maxpool_bwd gathers, for each input value, the gradients of the windows
// whose maximum it was, in the windows' order.
extern "C" __global__ void maxpool_bwd(float *dx, const float *dy, const int *arg, int planes, int h, int w, int k,
                                       int s, int ho, int wo) {
    FOR_EACH(e, (long long)planes * h * w) {
        int ix = (int)(e % w), iy = (int)((e / w) % h);
        long long pl = e / ((long long)w * h);
        int self = iy * w + ix;
        float sum = 0.f;
        int oy0 = iy - k + 1 > 0 ? (iy - k + 1 + s - 1) / s : 0, oy1 = min(iy / s, ho - 1);
        int ox0 = ix - k + 1 > 0 ? (ix - k + 1 + s - 1) / s : 0, ox1 = min(ix / s, wo - 1);
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                long long o = (pl * ho + oy) * wo + ox;
                if (arg[o] == self) sum = __fadd_rn(sum, dy[o]);
            }
        dx[e] = sum;
    }
}

extern "C" __global__ void gap_fwd(float *y, const float *x, int planes, int hw) {
    FOR_EACH(p, planes) {
        const float *src = x + p * (long long)hw;
        float s = 0.f;
        for (int j = 0; j < hw; j++) s = __fadd_rn(s, src[j]);
        y[p] = __fdiv_rn(s, (float)hw);
    }
}

extern "C" __global__ void gap_bwd(float *dx, const float *dy, int planes, int hw) {
    FOR_EACH(e, (long long)planes * hw) { dx[e] = __fdiv_rn(dy[e / hw], (float)hw); }
}

// The CPU trainer's splitmix keys (package internal/splitmix).
__device__ __forceinline__ u64 mix(u64 z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ double uniform(u64 seed, long long a, long long b, long long c) {
    u64 x = mix(seed ^ mix((u64)a ^ mix((u64)b ^ mix((u64)c))));
    return (double)(x >> 11) / 9007199254740992.0;
}

// dropout_fwd keeps value j of sample n when uniform(key, samples[n], j, 0)
// ≥ p, key = seed ^ mix(step ^ mix(index)): the CPU's masks, bit for bit.
extern "C" __global__ void dropout_fwd(float *y, float *mask, const float *x, const long long *samples, int n, int per,
                                       u64 seed, long long step, int index, double p, float scale) {
    u64 key = seed ^ mix((u64)step ^ mix((u64)index));
    FOR_EACH(e, (long long)n * per) {
        int i = (int)(e / per), j = (int)(e % per);
        float m = uniform(key, samples[i], j, 0) >= p ? scale : 0.f;
        mask[e] = m;
        y[e] = __fmul_rn(x[e], m);
    }
}

extern "C" __global__ void mul(float *y, const float *a, const float *b, long long n) {
    FOR_EACH(i, n) { y[i] = __fmul_rn(a[i], b[i]); }
}

// ---------------------------------------------------------------------------
// Batch normalisation. A channel's n·hw values are summed in float64 in
// `parts` parts of fixed bounds (the host picks parts from the shape alone),
// a block of 256 threads per part, each thread over a fixed stride of its
// part, then a tree of fixed shape; the parts are then added in order. The
// sums never depend on timing, and a layer of few channels still fills the
// GPU with blocks (one block per channel left all but a few SMs idle).

#define BN_THREADS 256

__device__ double block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = BN_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

// bn_span is part p's share [lo, hi) of a channel's cnt values, and this
// thread's first value's sample i and offset j in the plane.
__device__ void bn_span(long long cnt, int parts, int p, int hw, long long *lo, long long *hi, int *i, int *j) {
    *lo = cnt * p / parts;
    *hi = cnt * (p + 1) / parts;
    long long e = *lo + threadIdx.x;
    *i = (int)(e / hw);
    *j = (int)(e % hw);
}

// bn_next steps (i, j) on by BN_THREADS values.
__device__ void bn_next(int hw, int *i, int *j) {
    *j += BN_THREADS;
    while (*j >= hw) {
        *j -= hw;
        (*i)++;
    }
}

// bn_part_sums, grid (parts, c): pass 0 sets part[ch·parts+p] to the sum of
// part p of channel ch; pass 1 sets part[(c+ch)·parts+p] to the sum of the
// squared deviations from the channel's mean, the mean being pass 0's parts
// added in order.
extern "C" __global__ void __launch_bounds__(BN_THREADS)
    bn_part_sums(double *part, const float *x, int n, int c, int hw, int parts, int pass) {
    __shared__ double sh[BN_THREADS];
    int p = blockIdx.x, ch = blockIdx.y;
    long long cnt = (long long)n * hw, lo, hi;
    int i, j;
    bn_span(cnt, parts, p, hw, &lo, &hi, &i, &j);
    double mu = 0;
    if (pass == 1) {
        for (int q = 0; q < parts; q++) mu += part[ch * parts + q];
        mu /= (double)cnt;
    }
    double s = 0;
    for (long long e = lo + threadIdx.x; e < hi; e += BN_THREADS) {
        double v = (double)x[((long long)i * c + ch) * hw + j] - mu;
        s += pass == 1 ? v * v : v;
        bn_next(hw, &i, &j);
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) part[(pass * c + ch) * parts + p] = s;
}

// bn_stats, a thread per channel, sets mean[c] and inv[c] = 1/√(σ²+ε) of
// channel c: the batch's from bn_part_sums' parts (train, updating the
// running averages as PyTorch does) or the running ones.
extern "C" __global__ void bn_stats(float *mean, float *inv, float *run_mean, float *run_var, const double *part, int n,
                                    int c, int hw, int parts, int train, double eps, double momentum) {
    FOR_EACH(ch, c) {
        long long cnt = (long long)n * hw;
        double mu, var;
        if (train) {
            double s = 0, ss = 0;
            for (int q = 0; q < parts; q++) s += part[ch * parts + q];
            for (int q = 0; q < parts; q++) ss += part[(c + ch) * parts + q];
            mu = s / (double)cnt;
            var = ss / (double)cnt;
            double unbiased = cnt > 1 ? ss / (double)(cnt - 1) : var;
            run_mean[ch] = (float)((1 - momentum) * (double)run_mean[ch] + momentum * mu);
            run_var[ch] = (float)((1 - momentum) * (double)run_var[ch] + momentum * unbiased);
        } else {
            mu = run_mean[ch], var = run_var[ch];
        }
        mean[ch] = (float)mu;
        inv[ch] = (float)(1 / sqrt(var + eps));
    }
}

// bn_apply: x̂ = (x-μ)·inv, y = γ·x̂ + β.
extern "C" __global__ void bn_apply(float *y, float *xhat, const float *x, const float *mean, const float *inv,
                                    const float *gamma, const float *beta, int n, int c, int hw) {
    FOR_EACH32(e, n * c * hw) {
        int ch = (e / hw) % c;
        float xh = __fmul_rn(__fadd_rn(x[e], -mean[ch]), inv[ch]);
        xhat[e] = xh;
        y[e] = __fadd_rn(__fmul_rn(gamma[ch], xh), beta[ch]);
    }
}

// bn_bwd_part_sums, grid (parts, c): part[(ch·parts+p)·2] and [...+1] are
// the sums of dy and of dy·x̂ over part p of channel ch.
extern "C" __global__ void __launch_bounds__(BN_THREADS)
    bn_bwd_part_sums(double *part, const float *dy, const float *xhat, int n, int c, int hw, int parts) {
    __shared__ double sh[BN_THREADS];
    int p = blockIdx.x, ch = blockIdx.y;
    long long cnt = (long long)n * hw, lo, hi;
    int i, j;
    bn_span(cnt, parts, p, hw, &lo, &hi, &i, &j);
    double sdy = 0, sdyx = 0;
    for (long long e = lo + threadIdx.x; e < hi; e += BN_THREADS) {
        long long k = ((long long)i * c + ch) * hw + j;
        sdy += (double)dy[k];
        sdyx += (double)dy[k] * (double)xhat[k];
        bn_next(hw, &i, &j);
    }
    sdy = block_sum(sdy, sh);
    sdyx = block_sum(sdyx, sh);
    if (threadIdx.x == 0) {
        part[(ch * parts + p) * 2] = sdy;
        part[(ch * parts + p) * 2 + 1] = sdyx;
    }
}

// bn_bwd_sums, a thread per channel, adds Σdy·x̂ and Σdy (bn_bwd_part_sums'
// parts in order) to γ's and β's gradients, and leaves k = γ·inv, mean(dy)
// and mean(dy·x̂) in coef[3c…3c+2].
extern "C" __global__ void bn_bwd_sums(double *ggamma, double *gbeta, float *coef, const double *part,
                                       const float *gamma, const float *inv, int n, int c, int hw, int parts) {
    FOR_EACH(ch, c) {
        long long cnt = (long long)n * hw;
        double sdy = 0, sdyx = 0;
        for (int q = 0; q < parts; q++) {
            sdy += part[(ch * parts + q) * 2];
            sdyx += part[(ch * parts + q) * 2 + 1];
        }
        ggamma[ch] += sdyx;
        gbeta[ch] += sdy;
        coef[3 * ch] = __fmul_rn(gamma[ch], inv[ch]);
        coef[3 * ch + 1] = __fdiv_rn((float)sdy, (float)cnt);
        coef[3 * ch + 2] = __fdiv_rn((float)sdyx, (float)cnt);
    }
}

// bn_bwd_apply: dx = k·(dy - mean(dy) - x̂·mean(dy·x̂)).
extern "C" __global__ void bn_bwd_apply(float *dx, const float *dy, const float *xhat, const float *coef, int n, int c,
                                        int hw) {
    FOR_EACH32(e, n * c * hw) {
        int ch = (e / hw) % c;
        float k = coef[3 * ch], mdy = coef[3 * ch + 1], mdyx = coef[3 * ch + 2];
        dx[e] = __fmul_rn(k, __fadd_rn(__fadd_rn(dy[e], -mdy), -__fmul_rn(xhat[e], mdyx)));
    }
}

// ---------------------------------------------------------------------------
// softmax_xent: per sample, the smoothed cross-entropy (loss[i], float64),
// whether the top score is the label (hit[i]), and dL/dlogits for the mean
// over total samples.
extern "C" __global__ void softmax_xent(float *grad, double *loss, int *hit, const float *logits, const int *labels,
                                        int n, int k, double eps, int total) {
    FOR_EACH(i, n) {
        const float *z = logits + i * (long long)k;
        float *g = grad + i * (long long)k;
        int label = labels[i];
        float zmax = z[0];
        int arg = 0;
        for (int j = 1; j < k; j++)
            if (z[j] > zmax) zmax = z[j], arg = j;
        double sum = 0;
        for (int j = 0; j < k; j++) sum += exp((double)__fadd_rn(z[j], -zmax));
        double lse = (double)zmax + log(sum), l = 0;
        for (int j = 0; j < k; j++) {
            double t = eps / k + (j == label ? 1 - eps : 0);
            double pr = exp((double)z[j] - lse);
            l -= t * ((double)z[j] - lse);
            g[j] = (float)((pr - t) / total);
        }
        loss[i] = l;
        hit[i] = arg == label;
    }
}

// ---------------------------------------------------------------------------
// Optimisers, over every trained value at once: g is the float64 gradient
// sum, rounded to float32 as the CPU's Model.Grads rounds it; wd applies
// where decay[j] is set.

__device__ __forceinline__ float grad(const double *g64, const float *w, const unsigned char *decay, float wd,
                                      long long j) {
    float g = (float)g64[j];
    return decay[j] ? __fadd_rn(g, __fmul_rn(wd, w[j])) : g;
}

extern "C" __global__ void sgd(float *w, float *s, const double *g64, const unsigned char *decay, long long n, float lr,
                               float m, float wd, int nesterov) {
    FOR_EACH(j, n) {
        float d = grad(g64, w, decay, wd, j);
        if (m != 0.f) {
            float sj = __fadd_rn(__fmul_rn(m, s[j]), d);
            s[j] = sj;
            d = nesterov ? __fadd_rn(d, __fmul_rn(m, sj)) : sj;
        }
        w[j] = __fadd_rn(w[j], -__fmul_rn(lr, d));
    }
}

extern "C" __global__ void adam(float *w, float *s, float *q, const double *g64, const unsigned char *decay, long long n,
                                float step, float b1, float b2, float sc2, float eps, float wd) {
    FOR_EACH(j, n) {
        float d = grad(g64, w, decay, wd, j);
        float sj = __fadd_rn(__fmul_rn(b1, s[j]), __fmul_rn(__fadd_rn(1.f, -b1), d));
        float qj = __fadd_rn(__fmul_rn(b2, q[j]), __fmul_rn(__fmul_rn(__fadd_rn(1.f, -b2), d), d));
        s[j] = sj, q[j] = qj;
        float den = __fadd_rn(__fdiv_rn((float)sqrt((double)qj), sc2), eps);
        w[j] = __fadd_rn(w[j], -__fdiv_rn(__fmul_rn(step, sj), den));
    }
}

extern "C" __global__ void rmsprop(float *w, float *s, float *q, const double *g64, const unsigned char *decay,
                                   long long n, float lr, float a, float m, float eps, float wd) {
    FOR_EACH(j, n) {
        float d = grad(g64, w, decay, wd, j);
        float qj = __fadd_rn(__fmul_rn(a, q[j]), __fmul_rn(__fmul_rn(__fadd_rn(1.f, -a), d), d));
        q[j] = qj;
        float u = __fdiv_rn(d, __fadd_rn((float)sqrt((double)qj), eps));
        if (m != 0.f) {
            float sj = __fadd_rn(__fmul_rn(m, s[j]), u);
            s[j] = sj;
            u = sj;
        }
        w[j] = __fadd_rn(w[j], -__fmul_rn(lr, u));
    }
}

// ---------------------------------------------------------------------------
// mean_ordered averages r copies of n float64 values laid end to end in
// src, in replica order (((src0 + src1) + src2) + …)·inv, into dst: the
// peer-copy all-reduce's sum, the order LocalAllReduce takes on the CPU.
extern "C" __global__ void mean_ordered(double *dst, const double *src, int r, long long n, double inv) {
    FOR_EACH(j, n) {
        double s = src[j];
        for (int k = 1; k < r; k++) s += src[(long long)k * n + j];
        dst[j] = s * inv;
    }
}
