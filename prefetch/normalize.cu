// normalize where=device: uint8 values in, floats out.
//
// Value v of channel c becomes float(v)*scale[c] + bias[c], with the product
// and the sum each rounded to float (__fmul_rn and __fadd_rn keep nvcc from
// fusing them into one multiply-add), which is exactly what the CPU device
// computes in Go (prefetch.Norm.Value), so both give the same bits.
//
// The channel of value i is (i / plane) % channels in a channels-first
// layout (plane = H*W) and i % channels in a channels-last one (plane = 0).
//
// Every parameter is passed in a slot of its own, as gorgonia.org/cu's
// Function.Launch passes them. Regenerate normalize.ptx with `go generate`
// (it needs nvcc) after changing this file; a test checks that the PTX was
// made from this source.

#include <cuda_fp16.h>

__device__ __forceinline__ float convert(unsigned char v, unsigned long long i, unsigned int plane,
                                         unsigned int channels, float s0, float s1, float s2, float s3,
                                         float b0, float b1, float b2, float b3) {
    unsigned int c = plane ? (unsigned int)((i / plane) % channels) : (unsigned int)(i % channels);
    float s = c == 0 ? s0 : c == 1 ? s1 : c == 2 ? s2 : s3;
    float b = c == 0 ? b0 : c == 1 ? b1 : c == 2 ? b2 : b3;
    return __fadd_rn(__fmul_rn((float)v, s), b);
}

extern "C" __global__ void normalize_f32(float *dst, const unsigned char *src, unsigned long long n,
                                         unsigned int plane, unsigned int channels, float s0, float s1,
                                         float s2, float s3, float b0, float b1, float b2, float b3) {
    unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = convert(src[i], i, plane, channels, s0, s1, s2, s3, b0, b1, b2, b3);
    }
}

extern "C" __global__ void normalize_f16(unsigned short *dst, const unsigned char *src, unsigned long long n,
                                         unsigned int plane, unsigned int channels, float s0, float s1,
                                         float s2, float s3, float b0, float b1, float b2, float b3) {
    unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = __half_as_ushort(__float2half_rn(convert(src[i], i, plane, channels, s0, s1, s2, s3, b0, b1, b2, b3)));
    }
}
