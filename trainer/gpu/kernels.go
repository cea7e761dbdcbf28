package gpu

import _ "embed"

//go:generate ../../scripts/ptx kernels.cu kernels.ptx compute_80 --fmad=false

// kernelsPTX holds the trainer's kernels compiled from kernels.cu for
// compute capability 8.0 (the driver compiles it for the GPU at hand: A100,
// H100, H200 and newer); a replica loads it with cu's module API.
//
//go:embed kernels.ptx
var kernelsPTX string

// kernelNames are the kernels a replica resolves when it loads the module.
var kernelNames = []string{
	"gemm_nn_16", "gemm_nt_16", "gemm_tn_16", "gemm_tt_16",
	"gemm_nn_32", "gemm_nt_32", "gemm_tn_32", "gemm_tt_32",
	"gemm_nn_64", "gemm_nt_64", "gemm_tn_64", "gemm_tt_64",
	"im2col", "col2im", "cnhw_to_nchw", "nchw_to_cnhw", "plane_sums", "accum64", "bias_rows",
	"relu_fwd", "relu_bwd", "add", "mul", "maxpool_fwd", "maxpool_bwd", "gap_fwd", "gap_bwd", "dropout_fwd",
	"bn_part_sums", "bn_stats", "bn_apply", "bn_bwd_part_sums", "bn_bwd_sums", "bn_bwd_apply", "softmax_xent",
	"sgd", "adam", "rmsprop", "mean_ordered",
}
