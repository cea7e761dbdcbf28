// Package nn is the neural network the trainer trains, built from the
// bottom up. A Tensor is a dense float32 array, image
// batches in NCHW order. Layers (convolution, dense, batch normalisation,
// ReLU, pooling, dropout, residual blocks) each have a forward pass and a
// hand-written backward pass, checked against finite differences in the
// tests. Nearly all their arithmetic reduces to one single-precision matrix
// multiply, done the way BLIS and OpenBLAS do it: operands packed into
// panels that stay in cache, a register-tiled micro-kernel in AVX-512 or
// AVX2 assembly where the CPU has it and in Go elsewhere, and transposes
// absorbed by the packing. A Model is a checked sequence of layers; three
// are built in by name, as the train stage asks for them: mlp, keras_cnn
// (Keras' CIFAR-10 example) and resnet (the CIFAR ResNets of He et al.,
// depth 6n+2). The loss is softmax cross-entropy with label smoothing,
// against int labels or soft targets (MixUp's, CutMix's); the
// optimisers are SGD (with momentum, Nesterov or not), Adam and RMSprop,
// with weight decay on weights only; the learning rate follows a schedule
// (constant, step, cosine, one-cycle, with warm-up), scaled from a base
// batch to the global batch.
//
// It is a library of its own: a Model's Forward and Backward, an
// Optimizer's Step, and the state an accelerator or a checkpoint reads and
// restores (Optimizer.Config, State, Steps and SetSteps; Dropout.Index,
// which keys a dropout layer's masks) are its API, used by package trainer
// (the data-parallel loop) and trainer/gpu (the same layers as CUDA
// kernels), neither of which it knows.
package nn
