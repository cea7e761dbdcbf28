package pipefile

// The shuffle and the image operations: their specs and constructors.

import (
	"errors"
	"fmt"

	"github.com/pipefeed/pipe/transform"
)

// Shuffle permutes the samples anew every epoch; seed also keys the random
// augmentations (it is the pipeline's seed). It is ShuffleBuffer(seed, 0).
func Shuffle(seed uint64) Stage { return ShuffleBuffer(seed, 0) }

// ShuffleBuffer is Shuffle as a streaming reader does it, for sharded
// sources (tfrecord, webdataset): shards in a new random order each epoch,
// read in sequence through a shuffle buffer of buffer samples (see
// sharding.WithShuffleBuffer); a source without shards is one shard.
// Buffer 0 is Shuffle's full permutation.
func ShuffleBuffer(seed uint64, buffer int) Stage {
	return Stage{name: "shuffle", line: canonical("shuffle", "seed", seed, "buffer", buffer), apply: func(c *Compiled) error {
		if buffer < 0 {
			return fmt.Errorf("buffer=%d: want 0 (a full permutation) or more", buffer)
		}
		if err := checkMax("buffer", buffer, samplesBound); err != nil {
			return err
		}
		if err := c.setSeed(seed); err != nil {
			return err
		}
		c.Shuffle, c.ShuffleBuffer = true, buffer
		return nil
	}}
}

func (c *Compiled) setSeed(seed uint64) error {
	if c.SeedSet && c.Seed != seed {
		return fmt.Errorf("seed=%d conflicts with seed=%d set earlier", seed, c.Seed)
	}
	c.Seed, c.SeedSet = seed, true
	return nil
}

// Map applies a per-sample image operation (random_crop, flip, resize, …:
// the constructors of package transform).
func Map(op transform.Op) Stage {
	return Stage{name: op.Name(), line: op.String(), op: op, apply: func(c *Compiled) error {
		if c.afterBatch || c.haveTensor {
			return fmt.Errorf("%s must come before batch and to_tensor: it works on single images", op.Name())
		}
		if c.Norm != nil {
			return fmt.Errorf("%s after normalize: normalize must follow every image operation (it is applied as the tensor is written)", op.Name())
		}
		c.Ops = append(c.Ops, op)
		return nil
	}}
}

// DecodeConfig configures a decode stage; its zero value is the default.
type DecodeConfig struct {
	// FullScale turns off reduced-scale decoding (the .pipe parameter
	// reduce=false): by default, where the first operation is resize or
	// random_resized_crop, a JPEG is decoded at the smallest DCT scale of
	// 1/8, 1/4 and 1/2 that still gives it at least as many pixels as it
	// outputs, in every build.
	FullScale bool
	// MaxPixels is the largest image, width × height, decoded (the .pipe
	// parameter max_pixels=); 0 means transform.DefaultMaxPixels, whose
	// doc says why that default. A larger image is refused from its
	// header, before its pixels are allocated, as a corrupt record
	// (on_error=skip skips it). Negative values are an error.
	MaxPixels int
}

// Decode turns the encoded images of a source such as image_folder (JPEG,
// PNG) into RGB pixels. It comes right after the source, before any image
// operation; a cache after it stores decoded images, so later epochs skip
// the decoding. When the first operation is resize or random_resized_crop,
// only the window of a JPEG it reads is decoded, in every build.
func Decode(d DecodeConfig) Stage {
	limit := d.MaxPixels
	if limit == 0 {
		limit = transform.DefaultMaxPixels
	}
	line := canonical("decode", "reduce", !d.FullScale, "max_pixels", limit)
	return Stage{name: "decode", line: line, apply: func(c *Compiled) error {
		if len(c.Ops) > 0 || c.Cache != nil {
			return errors.New("decode must come before image operations and the cache: they work on pixels")
		}
		if d.MaxPixels < 0 {
			return fmt.Errorf("max_pixels=%d: want a pixel count ≥ 1, or 0 for the default (%d)", d.MaxPixels, transform.DefaultMaxPixels)
		}
		c.Decode, c.Reduce, c.MaxPixels = true, !d.FullScale, limit
		return nil
	}}
}

// Normalize maps pixels to (v/255 - mean) / std per channel as the tensor
// is written; it must follow every image operation and needs a float dtype.
func Normalize(n *transform.Normalization) Stage { return normalize(n, false) }

// DeviceNormalize is Normalize run on the devices (the .pipe parameter
// where=device): batches travel as uint8, a quarter of the bytes of
// float32, and each device converts its slice with the same arithmetic
// (prefetch.Norm). It needs a prefetch stage and a float dtype.
func DeviceNormalize(n *transform.Normalization) Stage { return normalize(n, true) }

func normalize(n *transform.Normalization, device bool) Stage {
	where := "host"
	if device {
		where = "device"
	}
	return Stage{name: "normalize", line: n.String() + " where=" + where, apply: func(c *Compiled) error {
		c.Norm, c.NormOnDevice = n, device
		return nil
	}}
}

var fillParam = Param{Name: "fill", Type: Enum, Enum: transform.FillNames(), Default: "zero",
	Doc: "pixels outside the image: zero, reflect (dcb|abcd), edge (aaa|abcd) or wrap (bcd|abcd)"}

var interpParam = Param{Name: "interpolation", Type: Enum, Enum: []string{"bilinear", "bicubic", "lanczos"}, Default: "bilinear",
	Doc: "resampling filter, antialiased when shrinking (as PIL)"}

var warpInterpParam = Param{Name: "interpolation", Type: Enum, Enum: transform.SamplingNames(), Default: "nearest",
	Doc: "nearest or bilinear sampling (torch grid_sample), torchvision's default nearest"}

var warpFillParam = Param{Name: "fill", Type: Int, Default: "0", Min: bound(0), Max: bound(255),
	Doc: "pixel value of the area the image no longer covers"}

var augBinsParam = Param{Name: "num_bins", Type: Int, Default: "31", Min: bound(2), Max: bound(1024),
	Doc: "number of magnitude bins spanning each operation's range"}

// opSpecs are the shuffle and the image operations.
var opSpecs = []*StageSpec{
	{Name: "shuffle", Kind: "stage", Summary: "a new random order of the samples every epoch; seed also keys the augmentations",
		Params: []Param{
			{Name: "seed", Type: Int, Default: "0", Positional: true, Min: bound(0), Doc: "the pipeline's seed"},
			Param{Name: "buffer", Type: Int, Default: "0", Min: bound(0), Doc: "0: a full permutation; N: shards (tfrecord, webdataset files) in random order, read in sequence through an N-sample shuffle buffer (tf.data, WebDataset)"}.with(samplesBound),
		},
		Build: func(a Args) (Stage, error) { return ShuffleBuffer(uint64(a.Int("seed")), a.Int("buffer")), nil }},
	{Name: "random_crop", Kind: "stage", Summary: "crop size×size at a random place of the image padded by pad (torchvision RandomCrop)",
		Params: []Param{
			Param{Name: "size", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "side of the square crop in pixels"}.with(sideBound),
			Param{Name: "pad", Type: Int, Default: "0", Min: bound(0), Doc: "padding added on every side before cropping"}.with(sideBound),
			fillParam,
		},
		Build: func(a Args) (Stage, error) {
			f, _ := transform.ParseFill(a.String("fill"))
			op, err := transform.RandomCrop(a.Int("size"), a.Int("pad"), f)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "flip", Kind: "stage", Summary: "mirror the image with probability p",
		Params: []Param{
			{Name: "direction", Type: Enum, Enum: []string{"horizontal", "vertical"}, Default: "horizontal", Positional: true, Doc: "horizontal (left-right) or vertical (top-bottom)"},
			{Name: "p", Type: Float, Default: "0.5", Min: bound(0), Max: bound(1), Doc: "probability of flipping"},
		},
		Build: func(a Args) (Stage, error) {
			d, _ := transform.ParseDirection(a.String("direction"))
			op, err := transform.Flip(d, a.Float("p"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "shift", Kind: "stage", Summary: "translate by a random whole number of pixels (Keras ImageDataGenerator width/height_shift_range)",
		Params: []Param{
			Param{Name: "width", Type: Float, Default: "0.1", Min: bound(0), Doc: "largest horizontal shift: a fraction of the width if < 1, else pixels"}.with(sideBound),
			Param{Name: "height", Type: Float, Default: "0.1", Min: bound(0), Doc: "largest vertical shift: a fraction of the height if < 1, else pixels"}.with(sideBound),
			fillParam,
		},
		Build: func(a Args) (Stage, error) {
			f, _ := transform.ParseFill(a.String("fill"))
			op, err := transform.Shift(a.Float("width"), a.Float("height"), f)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "decode", Kind: "stage", Summary: "JPEG/PNG bytes to RGB pixels (greyscale and CMYK become RGB); right after an image source, before a cache that should skip decoding",
		Params: []Param{
			{Name: "reduce", Type: Bool, Default: "true", Doc: "decode only the window a following resize/random_resized_crop reads at the smallest DCT scale (1/8, 1/4, 1/2) that keeps it at least its output size; false: at full scale"},
			Param{Name: "max_pixels", Type: Int, Default: itoa(transform.DefaultMaxPixels), Min: bound(1), Doc: "largest image decoded, width × height (the default, 2^26, is an 8192×8192 square, above a 61-MP photograph); checked from the header before anything is allocated: a larger image is a corrupt record, which on_error=skip skips"}.with(pixelsBound),
		},
		Build: func(a Args) (Stage, error) {
			return Decode(DecodeConfig{FullScale: !a.Bool("reduce"), MaxPixels: a.Int("max_pixels")}), nil
		}},
	{Name: "resize", Kind: "stage", Summary: "scale so the shorter side is shorter= pixels, keeping the aspect ratio (torchvision Resize(int))",
		Params: []Param{
			Param{Name: "shorter", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "length of the shorter side after resizing"}.with(sideBound),
			interpParam,
		},
		Build: func(a Args) (Stage, error) {
			in, _ := transform.ParseInterp(a.String("interpolation"))
			op, err := transform.Resize(a.Int("shorter"), in)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "center_crop", Kind: "stage", Summary: "the central size×size window, zero-padded if the image is smaller (torchvision CenterCrop)",
		Params: []Param{Param{Name: "size", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "side of the square crop"}.with(sideBound)},
		Build: func(a Args) (Stage, error) {
			op, err := transform.CenterCrop(a.Int("size"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "random_resized_crop", Kind: "stage", Summary: "a random area and aspect-ratio crop resized to size×size (torchvision RandomResizedCrop, with its centre-crop fallback)",
		Params: []Param{
			Param{Name: "size", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "side of the output"}.with(sideBound),
			{Name: "scale", Type: Floats, Default: "0.08,1", Doc: "range of the crop's area as a fraction of the image's"},
			{Name: "ratio", Type: Floats, Default: "0.75,1.3333333333333333", Doc: "range of the crop's aspect ratio (width/height), drawn log-uniformly"},
			interpParam,
		},
		Build: func(a Args) (Stage, error) {
			sc, ra := a.Floats("scale"), a.Floats("ratio")
			if len(sc) != 2 || len(ra) != 2 {
				return Stage{}, fmt.Errorf("scale and ratio take two values each: min,max")
			}
			in, _ := transform.ParseInterp(a.String("interpolation"))
			op, err := transform.RandomResizedCrop(a.Int("size"), [2]float64{sc[0], sc[1]}, [2]float64{ra[0], ra[1]}, in)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "color_jitter", Kind: "stage", Summary: "random brightness, contrast, saturation and hue in a random order (torchvision ColorJitter)",
		Params: []Param{
			{Name: "brightness", Type: Float, Default: "0", Min: bound(0), Doc: "factor drawn from [max(0, 1-v), 1+v]"},
			{Name: "contrast", Type: Float, Default: "0", Min: bound(0), Doc: "factor drawn from [max(0, 1-v), 1+v], around the mean grey"},
			{Name: "saturation", Type: Float, Default: "0", Min: bound(0), Doc: "factor drawn from [max(0, 1-v), 1+v], around each pixel's grey"},
			{Name: "hue", Type: Float, Default: "0", Min: bound(0), Max: bound(0.5), Doc: "shift of each pixel's hue drawn from [-v, v] of the colour wheel (torchvision's adjust_hue)"},
		},
		Build: func(a Args) (Stage, error) {
			op, err := transform.ColorJitter(a.Float("brightness"), a.Float("contrast"), a.Float("saturation"), a.Float("hue"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "random_erasing", Kind: "stage", Summary: "with probability p overwrite a random rectangle of the image (torchvision RandomErasing, before normalize: value on the [0,1] scale)",
		Params: []Param{
			{Name: "p", Type: Float, Default: "0.5", Min: bound(0), Max: bound(1), Doc: "probability of erasing"},
			{Name: "scale", Type: Floats, Default: "0.02,0.33", Doc: "range of the rectangle's area as a fraction of the image's, 0 < min ≤ max ≤ 1"},
			{Name: "ratio", Type: Floats, Default: "0.3,3.3", Doc: "range of the rectangle's aspect ratio (height/width, as torchvision), drawn log-uniformly"},
			{Name: "value", Type: String, Default: "0", Doc: "fill: one level in [0,1] for every channel, three per-channel levels (the normalize mean erases to 0 after it), or random bytes"},
		},
		Build: func(a Args) (Stage, error) {
			sc, ra := a.Floats("scale"), a.Floats("ratio")
			if len(sc) != 2 || len(ra) != 2 {
				return Stage{}, fmt.Errorf("scale and ratio take two values each: min,max")
			}
			v, err := transform.ParseEraseValue(a.String("value"))
			if err != nil {
				return Stage{}, err
			}
			op, err := transform.RandomErasing(a.Float("p"), [2]float64{sc[0], sc[1]}, [2]float64{ra[0], ra[1]}, v)
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "grayscale", Kind: "stage", Summary: "with probability p, each pixel's grey 0.2989R+0.587G+0.114B in all three channels (torchvision RandomGrayscale)",
		Params: []Param{{Name: "p", Type: Float, Default: "0.1", Min: bound(0), Max: bound(1), Doc: "probability of turning the image grey"}},
		Build: func(a Args) (Stage, error) {
			op, err := transform.Grayscale(a.Float("p"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "gaussian_blur", Kind: "stage", Summary: "a kernel×kernel Gaussian blur, sigma drawn per sample, reflect padding (torchvision GaussianBlur)",
		Params: []Param{
			Param{Name: "kernel", Type: Int, Required: true, Positional: true, Min: bound(1), Doc: "side of the kernel, odd"}.with(kernelBound),
			{Name: "sigma", Type: Floats, Default: "0.1,2", Doc: "range min,max the standard deviation is drawn from uniformly, 0 < min ≤ max (one value: fixed)"},
		},
		Build: func(a Args) (Stage, error) {
			s := a.Floats("sigma")
			if len(s) == 1 {
				s = append(s, s[0])
			}
			if len(s) != 2 {
				return Stage{}, fmt.Errorf("sigma takes one value or two: min,max")
			}
			op, err := transform.GaussianBlur(a.Int("kernel"), [2]float64{s[0], s[1]})
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "rotate", Kind: "stage", Summary: "with probability p rotate by an angle uniform in [-degrees, degrees] about the centre (torchvision RandomRotation)",
		Params: []Param{
			{Name: "degrees", Type: Float, Required: true, Positional: true, Min: bound(0), Max: bound(180), Doc: "largest angle in degrees, counter-clockwise positive"},
			warpInterpParam, warpFillParam,
			{Name: "expand", Type: Bool, Default: "false", Doc: "true: the output is the rotated image's bounding box, so its size varies with the angle; false: the input's size"},
			{Name: "p", Type: Float, Default: "1", Min: bound(0), Max: bound(1), Doc: "probability of rotating"},
		},
		Build: func(a Args) (Stage, error) {
			in, _ := transform.ParseSampling(a.String("interpolation"))
			op, err := transform.Rotate(a.Float("degrees"), in, a.Int("fill"), a.Bool("expand"), a.Float("p"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "affine", Kind: "stage", Summary: "a random rotation, translation, scale and shear about the centre (torchvision RandomAffine)",
		Params: []Param{
			{Name: "degrees", Type: Float, Required: true, Positional: true, Min: bound(0), Max: bound(180), Doc: "the angle is uniform in [-degrees, degrees], clockwise positive (as torchvision's affine)"},
			{Name: "translate", Type: Floats, Default: "0,0", Doc: "largest shifts tx,ty as fractions of the width and height, each in [0, 1]; the shift is a whole number of pixels"},
			{Name: "scale", Type: Floats, Default: "1,1", Doc: "range min,max the scale is drawn from uniformly, 0 < min ≤ max ≤ 100"},
			{Name: "shear", Type: Floats, Default: "0", Doc: "shear angles in degrees: s (x in [-s, s]), x_min,x_max, or x_min,x_max,y_min,y_max; each in (-90, 90)"},
			warpInterpParam, warpFillParam,
		},
		Build: func(a Args) (Stage, error) {
			tr, sc, sh := a.Floats("translate"), a.Floats("scale"), a.Floats("shear")
			if len(tr) != 2 || len(sc) != 2 {
				return Stage{}, fmt.Errorf("translate and scale take two values each: tx,ty and min,max")
			}
			var shear [4]float64
			switch len(sh) {
			case 1:
				if sh[0] != 0 {
					shear[0], shear[1] = -sh[0], sh[0]
				}
			case 2, 4:
				copy(shear[:], sh)
			default:
				return Stage{}, fmt.Errorf("shear takes one value, two (x_min,x_max) or four (x_min,x_max,y_min,y_max)")
			}
			in, _ := transform.ParseSampling(a.String("interpolation"))
			op, err := transform.Affine(a.Float("degrees"), [2]float64{tr[0], tr[1]}, [2]float64{sc[0], sc[1]}, shear, in, a.Int("fill"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "rand_augment", Kind: "stage", Summary: "n operations drawn from torchvision's 14 (shears, translations, rotation, colour, posterize, solarize, autocontrast, equalize) at magnitude bin m (torchvision RandAugment)",
		Params: []Param{
			{Name: "n", Type: Int, Default: "2", Min: bound(1), Max: bound(16), Doc: "operations applied in turn"},
			{Name: "m", Type: Int, Default: "9", Min: bound(0), Doc: "magnitude bin, below num_bins"},
			augBinsParam, warpInterpParam, warpFillParam,
		},
		Build: func(a Args) (Stage, error) {
			in, _ := transform.ParseSampling(a.String("interpolation"))
			op, err := transform.RandAugment(a.Int("n"), a.Int("m"), a.Int("num_bins"), in, a.Int("fill"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "trivial_augment", Kind: "stage", Summary: "one operation drawn from torchvision's 14 at a random magnitude bin (torchvision TrivialAugmentWide)",
		Params: []Param{augBinsParam, warpInterpParam, warpFillParam},
		Build: func(a Args) (Stage, error) {
			in, _ := transform.ParseSampling(a.String("interpolation"))
			op, err := transform.TrivialAugment(a.Int("num_bins"), in, a.Int("fill"))
			if err != nil {
				return Stage{}, err
			}
			return Map(op), nil
		}},
	{Name: "normalize", Kind: "stage", Summary: "(v/255 - mean) / std per channel, applied as the tensor is written; needs a float dtype",
		Params: []Param{
			{Name: "mean", Type: Floats, Required: true, Doc: "per-channel means on the [0,1] scale, comma-separated (one value: all channels)"},
			{Name: "std", Type: Floats, Required: true, Doc: "per-channel standard deviations on the [0,1] scale, all > 0"},
			{Name: "where", Type: Enum, Enum: []string{"host", "device"}, Default: "host", Doc: "device: ship uint8 (4× fewer bytes) and normalise on each device; needs prefetch"},
		},
		Build: func(a Args) (Stage, error) {
			n, err := transform.Normalize(a.Floats("mean"), a.Floats("std"))
			if err != nil {
				return Stage{}, err
			}
			if a.String("where") == "device" {
				return DeviceNormalize(n), nil
			}
			return Normalize(n), nil
		}},
}
