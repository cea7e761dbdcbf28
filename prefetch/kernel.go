package prefetch

import _ "embed"

//go:generate ../scripts/ptx normalize.cu normalize.ptx

// normalizePTX holds the normalize kernels (normalize_f32, normalize_f16)
// compiled from normalize.cu; the CUDA device loads it with cu's module API.
//
//go:embed normalize.ptx
var normalizePTX string
