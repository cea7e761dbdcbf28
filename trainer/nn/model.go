package nn

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Model is a sequence of layers from an input of a fixed per-sample shape
// to class scores (logits).
type Model struct {
	Name   string
	In     []int // per-sample input shape, e.g. [3 32 32]
	Layers []Layer
	params []*Param
}

// NewModel checks that the layers fit the input shape and end in a vector
// of scores, and initialises them from seed.
func NewModel(name string, in []int, seed uint64, layers ...Layer) (*Model, error) {
	out, err := shapes(layers, in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("trainer: %s: ends in %v, want a vector of class scores (add flatten and dense)", name, out)
	}
	m := &Model{Name: name, In: append([]int(nil), in...), Layers: layers}
	for i, l := range layers {
		initLayer(l, seed, i)
		m.params = append(m.params, l.Params()...)
	}
	return m, nil
}

// Params returns the parameters and buffers in a fixed order.
func (m *Model) Params() []*Param { return m.params }

// Classes is the length of the output.
func (m *Model) Classes() int {
	out, _ := shapes(m.Layers, m.In)
	return out[0]
}

// Size is the number of trained values.
func (m *Model) Size() int {
	n := 0
	for _, p := range m.params {
		if !p.Buffer {
			n += len(p.W)
		}
	}
	return n
}

// Hash is the SHA-256, in hex, of every parameter and buffer's values
// (float32, little-endian) in the model's order: equal hashes are equal
// models, bit for bit, whichever process or run computed them.
func (m *Model) Hash() string {
	h := sha256.New()
	var b []byte
	for _, p := range m.params {
		b = b[:0]
		for _, v := range p.W {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Forward runs the layers on x and returns the logits [N, classes].
func (m *Model) Forward(ctx *Context, x *Tensor) *Tensor {
	for _, l := range m.Layers {
		x = l.Forward(ctx, x)
	}
	return x
}

// Backward propagates dL/dlogits through the layers, adding to the
// gradients.
func (m *Model) Backward(ctx *Context, dy *Tensor) {
	for i := len(m.Layers) - 1; i >= 0; i-- {
		dy = m.Layers[i].Backward(ctx, dy)
	}
}

// ZeroGrad clears every gradient.
func (m *Model) ZeroGrad() {
	for _, p := range m.params {
		clear(p.G)
		clear(p.G64)
	}
}

// Grads rounds the accumulated float64 gradients into G, for the optimiser.
func (m *Model) Grads() {
	for _, p := range m.params {
		for j, v := range p.G64 {
			p.G[j] = float32(v)
		}
	}
}

// CopyFrom sets m's parameters and buffers to src's (same architecture).
func (m *Model) CopyFrom(src *Model) {
	for i, p := range m.params {
		copy(p.W, src.params[i].W)
	}
}

// ModelSpec names a built-in model and its settings, as the train stage
// gives them: "mlp", "keras_cnn", "resnet depth=20".
type ModelSpec struct {
	Name string
	// Depth is the ResNet depth, 6n+2: 8, 14, 20, 32, ...
	Depth int
	// Width is the first stage's channels (ResNet, default 16) or the hidden
	// units (MLP, default 512).
	Width int
}

// String is the spec as the train stage writes it: "mlp width=512",
// "resnet depth=20 width=16".
func (s ModelSpec) String() string {
	switch s.Name {
	case "resnet":
		return fmt.Sprintf("resnet depth=%d width=%d", cmp.Or(s.Depth, 20), cmp.Or(s.Width, 16))
	case "mlp":
		return fmt.Sprintf("mlp width=%d", cmp.Or(s.Width, 512))
	}
	return s.Name
}

// Models lists the built-in models.
var Models = []string{"mlp", "keras_cnn", "resnet"}

// Build returns the model for per-sample input shape in ([C, H, W]) and
// the number of classes.
func (s ModelSpec) Build(in []int, classes int, seed uint64) (*Model, error) {
	name, layers, err := s.layers(in, classes)
	if err != nil {
		return nil, err
	}
	return NewModel(name, in, seed, layers...)
}

// Values counts the model's trained values and its buffers' (batch-norm
// statistics) without allocating either, checking its shapes as Build
// does.
func (s ModelSpec) Values(in []int, classes int) (params, buffers int, err error) {
	name, layers, err := s.layers(in, classes)
	if err != nil {
		return 0, 0, err
	}
	out, err := shapes(layers, in)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) != 1 {
		return 0, 0, fmt.Errorf("trainer: %s: ends in %v, want a vector of class scores", name, out)
	}
	for _, l := range layers {
		for _, p := range l.Params() {
			if p.Buffer {
				buffers += prod(p.Shape)
			} else {
				params += prod(p.Shape)
			}
		}
	}
	return params, buffers, nil
}

// layers declares the model's layers, their parameters not yet allocated.
func (s ModelSpec) layers(in []int, classes int) (string, []Layer, error) {
	if len(in) != 3 {
		return "", nil, fmt.Errorf("trainer: models take [C H W] images, not %v", in)
	}
	if classes < 1 {
		return "", nil, fmt.Errorf("trainer: %d classes: the data names none", classes)
	}
	c, h, w := in[0], in[1], in[2]
	switch s.Name {
	case "mlp":
		hidden := s.Width
		if hidden == 0 {
			hidden = 512
		}
		return "mlp", []Layer{&Flatten{}, NewDense(c*h*w, hidden), &ReLU{}, NewDense(hidden, classes)}, nil
	case "keras_cnn":
		// Keras' cifar10_cnn.py: 'same' then 'valid' 3×3 convolutions.
		h1, w1 := (h-2)/2, (w-2)/2
		h2, w2 := (h1-2)/2, (w1-2)/2
		return "keras_cnn", []Layer{
			NewConv2D(c, 32, 3, 1, 1), &ReLU{}, NewConv2D(32, 32, 3, 1, 0), &ReLU{},
			NewMaxPool2D(2, 2), &Dropout{P: 0.25},
			NewConv2D(32, 64, 3, 1, 1), &ReLU{}, NewConv2D(64, 64, 3, 1, 0), &ReLU{},
			NewMaxPool2D(2, 2), &Dropout{P: 0.25},
			&Flatten{}, NewDense(64*h2*w2, 512), &ReLU{}, &Dropout{P: 0.5}, NewDense(512, classes)}, nil
	case "resnet":
		return resnet(in, classes, s.Depth, s.Width)
	}
	return "", nil, fmt.Errorf("trainer: unknown model %q (want one of %s)", s.Name, strings.Join(Models, ", "))
}

// resnet is the CIFAR ResNet of He et al. (2016), section 4.2: a 3×3
// convolution, three stages of n basic blocks with w, 2w, 4w channels (the
// second and third starting with stride 2 and a 1×1 projection shortcut),
// global average pooling and a dense layer; depth = 6n+2.
func resnet(in []int, classes, depth, width int) (string, []Layer, error) {
	if depth == 0 {
		depth = 20
	}
	if depth < 8 || (depth-2)%6 != 0 {
		return "", nil, fmt.Errorf("trainer: resnet depth=%d: want 6n+2 with n ≥ 1 (8, 14, 20, 32, 44, 56, 110)", depth)
	}
	if width == 0 {
		width = 16
	}
	n := (depth - 2) / 6
	conv := func(i, o, stride int) []Layer {
		return []Layer{NewConv2DNoBias(i, o, 3, stride, 1), NewBatchNorm(o)}
	}
	layers := append(conv(in[0], width, 1), &ReLU{})
	ch := width
	for stage := range 3 {
		out := width << stage
		for b := range n {
			stride := 1
			if stage > 0 && b == 0 {
				stride = 2
			}
			body := append(append(conv(ch, out, stride), &ReLU{}), conv(out, out, 1)...)
			var short []Layer
			if stride != 1 || ch != out {
				short = []Layer{NewConv2DNoBias(ch, out, 1, stride, 0), NewBatchNorm(out)}
			}
			layers = append(layers, &Residual{Body: body, Shortcut: short}, &ReLU{})
			ch = out
		}
	}
	layers = append(layers, &GlobalAvgPool{}, NewDense(ch, classes))
	return "resnet" + strconv.Itoa(depth), layers, nil
}

// SoftmaxCrossEntropy is the mean over the batch of the cross-entropy
// between softmax(logits) and the one-hot label smoothed by Smoothing:
// target = (1-ε)·onehot + ε/K.
type SoftmaxCrossEntropy struct {
	Smoothing float64
	grad      *Tensor
}

// LossSum is a sum of per-sample losses in fixed point, in units of 2^-32,
// so that it does not depend on how the samples were grouped: the losses of
// a batch split among replicas, or an epoch stopped and resumed, add up to
// the very sum one replica running straight through gets. An int64 holds
// sums up to 2^31 (a million samples of loss 2000).
type LossSum int64

// LossOf is v in fixed point, rounded to the nearest unit.
func LossOf(v float64) LossSum { return LossSum(math.Round(v * (1 << 32))) }

// Float is s as a float64.
func (s LossSum) Float() float64 { return float64(s) / (1 << 32) }

// Loss returns the mean loss, the number of correct top-1 predictions, and
// dL/dlogits (valid until the next call).
func (l *SoftmaxCrossEntropy) Loss(logits *Tensor, labels []int32) (loss float64, correct int, grad *Tensor) {
	sum, correct, grad := l.Sum(logits, labels)
	return sum.Float() / float64(logits.Shape[0]), correct, grad
}

// Sum is Loss with the loss summed over the samples (see LossSum).
func (l *SoftmaxCrossEntropy) Sum(logits *Tensor, labels []int32) (total LossSum, correct int, grad *Tensor) {
	n, k := logits.Shape[0], logits.Shape[1]
	l.grad = reuse(l.grad, n, k)
	eps := l.Smoothing
	for i := range n {
		z := logits.Data[i*k : (i+1)*k]
		g := l.grad.Data[i*k : (i+1)*k]
		lse, arg := logSumExp(z)
		if arg == int(labels[i]) {
			correct++
		}
		var loss float64
		for j, v := range z {
			t := eps / float64(k)
			if j == int(labels[i]) {
				t += 1 - eps
			}
			p := math.Exp(float64(v) - lse)
			loss -= t * (float64(v) - lse)
			g[j] = float32((p - t) / float64(n))
		}
		total += LossOf(loss)
	}
	return total, correct, l.grad
}

// SumTargets is Sum against soft targets, [N, K] row-major (MixUp's and
// CutMix's, each row summing to 1), smoothed as PyTorch's CrossEntropyLoss
// smooths them: target = (1-ε)·t + ε/K. With one-hot targets it is Sum.
// A prediction is correct where its top class is the targets' (the first
// of equal ones).
func (l *SoftmaxCrossEntropy) SumTargets(logits *Tensor, targets []float32) (total LossSum, correct int, grad *Tensor) {
	n, k := logits.Shape[0], logits.Shape[1]
	l.grad = reuse(l.grad, n, k)
	eps := l.Smoothing
	for i := range n {
		z := logits.Data[i*k : (i+1)*k]
		g := l.grad.Data[i*k : (i+1)*k]
		row := targets[i*k : (i+1)*k]
		lse, arg := logSumExp(z)
		if arg == argmax(row) {
			correct++
		}
		var loss float64
		for j, v := range z {
			t := (1-eps)*float64(row[j]) + eps/float64(k)
			p := math.Exp(float64(v) - lse)
			loss -= t * (float64(v) - lse)
			g[j] = float32((p - t) / float64(n))
		}
		total += LossOf(loss)
	}
	return total, correct, l.grad
}

// logSumExp returns log Σ exp(z) and the index of z's largest value (the
// first of equal ones).
func logSumExp(z []float32) (float64, int) {
	zmax, arg := z[0], 0
	for j, v := range z {
		if v > zmax {
			zmax, arg = v, j
		}
	}
	var sum float64
	for _, v := range z {
		sum += math.Exp(float64(v - zmax))
	}
	return float64(zmax) + math.Log(sum), arg
}

func argmax(v []float32) int {
	arg := 0
	for j, x := range v {
		if x > v[arg] {
			arg = j
		}
	}
	return arg
}
