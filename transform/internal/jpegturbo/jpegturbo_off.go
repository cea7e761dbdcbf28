//go:build !jpegturbo

package jpegturbo

// Compiled reports whether this build decodes with libjpeg-turbo: build
// with -tags jpegturbo for it.
const Compiled = false

// Version is empty without libjpeg-turbo.
var Version = ""

// Decoder is the jpegturbo build's decompressor; here every call fails.
type Decoder struct {
	MaxMemory int // the jpegturbo build's cap on libjpeg's memory; unused here
}

func New() (*Decoder, error)                                        { return nil, ErrNoJPEGTurbo }
func (d *Decoder) Header(data []byte) (w, h int, err error)         { return 0, 0, ErrNoJPEGTurbo }
func (d *Decoder) Need(num, x0, y0, cw, ch int) (int, error)        { return 0, ErrNoJPEGTurbo }
func (d *Decoder) Decode(dst []byte, num, x0, y0, cw, ch int) error { return ErrNoJPEGTurbo }
func (d *Decoder) Abort()                                           {}

// LibjpegOnly is the jpegturbo build's PIPE_LIBJPEG_ONLY switch; this build
// has no libjpeg.
const LibjpegOnly = false

// EncodeOptions are the jpegturbo build's test-image settings.
type EncodeOptions struct {
	Quality        int
	H, V           [4]int
	Progressive    bool
	Separate       bool
	Restart        int
	YCCK, Optimize bool
}

// Encode needs libjpeg-turbo: here it fails.
func Encode(pix []byte, w, h, nc int, o EncodeOptions) ([]byte, error) { return nil, ErrNoJPEGTurbo }
