// Package transform holds the per-sample image operations of a pipeline
// and the random generator that parameterises them.
//
// Images travel between operations as [Image] values in CHW layout (one
// uint8 plane per channel), the layout CIFAR is stored in and the one
// channels-first models want, so the common path from record to NCHW
// tensor is a straight walk over memory.
//
// Determinism: an operation draws its random parameters only from the
// [Rand] it is handed, and the pipeline keys that generator by (seed,
// epoch, global sample index); a sample's operations draw from it in turn.
// The output of a sample therefore does not depend on which worker ran
// it, in what order, or how many workers there were.
//
// Allocation: operations write into a destination image whose buffer the
// caller owns and reuses; in steady state nothing is allocated per sample.
//
// Fields: a sample's mask and boxes ([Fields]) move with its image. Every
// operation that moves pixels is [Spatial]: it draws a [Geometry] (a
// window, possibly mirrored; a resampled window; an affine map) once, and
// that one draw makes the image and moves the fields
// ([Chain.ApplySample]): the mask by its nearest pixels, as torchvision
// moves a mask with InterpolationMode.NEAREST, the boxes by their corners,
// as torchvision.transforms.v2 moves them, clipped to the image, and
// dropped after the last operation when smaller than a minimum area.
// Colour operations leave the fields alone. rand_augment and
// trivial_augment, whose drawn sub-operations may be geometric or colour
// ones, are [FieldsOp]s: each shear, translation or rotation moves the
// fields by its geometry.
//
// JPEGs decode to libjpeg-turbo's pixels, byte for byte, in every build:
// with pipe's own decoder (internal/jpegdec, Go with AVX2 kernels), or with
// libjpeg-turbo itself in the jpegturbo build (internal/jpegturbo), the
// reference the tests compare with. A [Decoder] decodes only the window a
// following resize or random_resized_crop reads, at a reduced DCT scale
// where that allows. PNGs decode with Go's image/png.
//
// Decoding trusts no header: [Decode] and a [Decoder] read an image's size
// first and refuse one over a pixel limit ([DefaultMaxPixels], or
// Decoder.MaxPixels) before allocating anything for it, so what one image
// can cost in memory is bounded whatever a few hundred bytes claim. Such an
// image, like any unreadable one, is an [ErrDecode] error, which a pipeline
// treats as a corrupt record. What all decoders of the process hold at
// once is bounded too: large images take their memory from one budget
// ([SetDecodeMemory]), so the bound does not grow with the workers, and the
// budget fits inside the memory limit the process has (its cgroup's, its
// address space's): an image needing more than the budget is refused
// ([ErrOverBudget]) rather than run the process out of memory.
package transform
