package transform

import (
	"fmt"
	"math"
	"sync"
)

// MaxBlurKernel is the largest kernel size gaussian_blur takes.
const MaxBlurKernel = 255

// GaussianBlurOp blurs every channel with a Kernel×Kernel Gaussian whose
// sigma is drawn uniformly from [Sigma[0], Sigma[1]] for each sample
// (torchvision's GaussianBlur): a separable kernel of weights
// exp(-x²/2σ²) normalised to sum 1, over an image extended by reflection
// (padding_mode="reflect"), computed in float32 and rounded half to even,
// as torchvision's gaussian_blur does for uint8 images.
type GaussianBlurOp struct {
	Kernel int
	Sigma  [2]float64
}

// GaussianBlur returns the gaussian_blur operation: kernel is odd, in
// [1, MaxBlurKernel]; sigma is a range 0 < min ≤ max.
func GaussianBlur(kernel int, sigma [2]float64) (*GaussianBlurOp, error) {
	if kernel < 1 || kernel > MaxBlurKernel || kernel%2 == 0 {
		return nil, paramErr("gaussian_blur", "kernel=%d: must be odd, between 1 and %d", kernel, MaxBlurKernel)
	}
	if !(sigma[0] > 0 && sigma[0] <= sigma[1]) || math.IsInf(sigma[1], 0) {
		return nil, paramErr("gaussian_blur", "sigma=%g,%g: want 0 < min ≤ max", sigma[0], sigma[1])
	}
	return &GaussianBlurOp{Kernel: kernel, Sigma: sigma}, nil
}

func (o *GaussianBlurOp) Name() string { return "gaussian_blur" }
func (o *GaussianBlurOp) Random() bool { return true }
func (o *GaussianBlurOp) String() string {
	return fmt.Sprintf("gaussian_blur kernel=%d sigma=%g,%g", o.Kernel, o.Sigma[0], o.Sigma[1])
}

func (o *GaussianBlurOp) OutShape(in Shape) (Shape, error) { return in, nil }

func (o *GaussianBlurOp) Apply(dst, src *Image, r *Rand) bool {
	blur(dst, src, o.Kernel, r.Uniform(o.Sigma[0], o.Sigma[1]))
	return true
}

// blurRows holds the float32 row buffers of blur, reused across calls so a
// steady stream of images allocates nothing.
var blurRows = sync.Pool{New: func() any { return new([]float32) }}

// blur writes src blurred by a kernel×kernel Gaussian of the given sigma
// into dst. Each output row is the kernel's weighted sum of the source rows
// around it (reflected at the top and bottom), kept in float32 and extended
// by reflection at both ends, then the same weighted sum along the row.
func blur(dst, src *Image, kernel int, sigma float64) {
	var wk [MaxBlurKernel]float32
	w := wk[:kernel]
	half := kernel / 2
	var sum float64
	for i := range w {
		x := float64(i-half) / sigma
		sum += math.Exp(-0.5 * x * x)
	}
	for i := range w {
		x := float64(i-half) / sigma
		w[i] = float32(math.Exp(-0.5*x*x) / sum)
	}
	dst.Resize(src.C, src.H, src.W)
	h, wd := src.H, src.W
	if h == 0 || wd == 0 {
		return
	}
	bp := blurRows.Get().(*[]float32)
	defer blurRows.Put(bp)
	if n := wd + 2*half; cap(*bp) < n {
		*bp = make([]float32, n)
	}
	row := (*bp)[:wd+2*half]
	var rows [MaxBlurKernel][]uint8
	for c := 0; c < src.C; c++ {
		sp, dp := src.Plane(c), dst.Plane(c)
		for y := 0; y < h; y++ {
			for k := range w {
				sy := FillReflect.source(y+k-half, h)
				rows[k] = sp[sy*wd : sy*wd+wd]
			}
			// The kernel is symmetric: each pair of rows at the same
			// distance shares a weight, so it is added before the multiply.
			mid := row[half : half+wd]
			centre := rows[half][:wd]
			wc := w[half]
			for x, v := range centre {
				mid[x] = wc * float32(v)
			}
			for k := 0; k < half; k++ {
				a, b, wt := rows[k][:wd], rows[kernel-1-k][:wd], w[k]
				for x := range mid {
					mid[x] += wt * float32(int(a[x])+int(b[x]))
				}
			}
			for i := 0; i < half; i++ {
				row[i] = mid[FillReflect.source(i-half, wd)]
				row[half+wd+i] = mid[FillReflect.source(wd+i, wd)]
			}
			out := dp[y*wd : y*wd+wd]
			for x := range out {
				win := row[x : x+kernel]
				acc := w[half] * win[half]
				for k, wt := range w[:half] {
					acc += wt * (win[k] + win[kernel-1-k])
				}
				out[x] = roundByte(acc)
			}
		}
	}
}

// roundByte is v rounded half to even and clamped to [0, 255].
func roundByte(v float32) uint8 {
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return uint8(math.RoundToEven(float64(v)))
}
