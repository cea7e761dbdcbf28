package main

import (
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/pipefeed/pipe"
	"github.com/pipefeed/pipe/transform"
)

func newPreview() *cobra.Command {
	var out string
	var n, epoch, scale, cols int
	c := &cobra.Command{
		Use:   "preview FILE -o grid.png|grid.jpg",
		Short: "draw augmented samples with their class names into a PNG or JPEG grid",
		Long: `preview draws the first N samples of an epoch as the pipeline makes them
(after every image operation, before the tensor is written), each labelled
with its class name and sample index, so a person can see that the
augmentation is right.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if out == "" {
				return usageError{fmt.Errorf("preview needs -o FILE.png (or .jpg)")}
			}
			encode, err := encoderFor(out)
			if err != nil {
				return usageError{err}
			}
			if n < 1 || scale < 1 || cols < 1 || epoch < 0 {
				return usageError{fmt.Errorf("--n, --scale and --cols must be at least 1 and --epoch at least 0")}
			}
			p, err := load(c, args[0])
			if err != nil {
				return err
			}
			defer p.Close()
			n = min(n, p.Samples())
			grid, err := drawGrid(p, epoch, n, cols, scale)
			if err != nil {
				return err
			}
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			if err := encode(f, grid); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "wrote %d samples of epoch %d to %s\n", n, epoch, out)
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "file to write: .png, or .jpg/.jpeg for a JPEG")
	c.Flags().IntVarP(&n, "n", "n", 64, "samples to draw")
	c.Flags().IntVar(&epoch, "epoch", 0, "epoch whose augmentations to draw")
	c.Flags().IntVar(&scale, "scale", 3, "pixel magnification")
	c.Flags().IntVar(&cols, "cols", 8, "samples per row")
	return c
}

// encoderFor returns the image encoder that name's extension asks for.
func encoderFor(name string) (func(io.Writer, image.Image) error, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png":
		return png.Encode, nil
	case ".jpg", ".jpeg":
		return func(w io.Writer, m image.Image) error { return jpeg.Encode(w, m, &jpeg.Options{Quality: 95}) }, nil
	}
	return nil, fmt.Errorf("-o %s: the grid is written as .png or .jpg/.jpeg; say which by the extension", name)
}

// caption is a tile's caption: the class name (or number) and the sample.
func caption(classes []string, label, sample int) string {
	name := fmt.Sprint(label)
	if label >= 0 && label < len(classes) {
		name = classes[label]
	}
	return fmt.Sprintf("%s #%d", name, sample)
}

func drawGrid(p *pipe.Pipeline, epoch, n, cols, scale int) (*image.RGBA, error) {
	classes := p.Source().Info().Classes
	var tiles []*transform.Image
	var moved []*transform.Fields
	var captions []string
	cw, ch := 0, 0
	for i := range n {
		img, f, label, idx, err := p.AugmentedFields(epoch, i)
		if err != nil {
			return nil, err
		}
		tiles, moved = append(tiles, img), append(moved, f)
		captions = append(captions, caption(classes, label, idx))
		cw, ch = max(cw, img.W*scale), max(ch, img.H*scale)
	}
	// Each tile is as wide as its longest caption, whole, plus a glyph's
	// width between captions (basicfont's glyphs are 7 pixels wide).
	const textH, pad, glyph = 14, 4, 7
	for _, c := range captions {
		cw = max(cw, glyph*(utf8.RuneCountInString(c)+1))
	}
	rows := (n + cols - 1) / cols
	grid := image.NewRGBA(image.Rect(0, 0, cols*(cw+pad)+pad, rows*(ch+textH+pad)+pad))
	for i := range grid.Pix {
		grid.Pix[i] = 255
	}
	for i, t := range tiles {
		x0, y0 := pad+(i%cols)*(cw+pad), pad+(i/cols)*(ch+textH+pad)
		for y := 0; y < t.H*scale; y++ {
			for x := 0; x < t.W*scale; x++ {
				var c color.RGBA
				c.A = 255
				sy, sx := y/scale, x/scale
				v := func(ch int) uint8 { return t.Pix[(min(ch, t.C-1)*t.H+sy)*t.W+sx] }
				c.R, c.G, c.B = v(0), v(1), v(2)
				if f := moved[i]; f != nil && f.Mask.Pix != nil {
					c = tint(c, maskClass(f.Mask, sy, sx))
				}
				grid.SetRGBA(x0+x, y0+y, c)
			}
		}
		if f := moved[i]; f != nil {
			for _, b := range f.Boxes {
				outline(grid, x0, y0, b, scale, classColour(b.Class))
			}
		}
		d := font.Drawer{Dst: grid, Src: image.Black, Face: basicfont.Face7x13,
			Dot: fixed.P(x0, y0+ch+textH-3)}
		d.DrawString(captions[i])
	}
	return grid, nil
}

// maskClass is the class id of a mask's pixel (y, x).
func maskClass(m transform.Mask, y, x int) int {
	i := (y*m.W + x) * m.Size
	if m.Size == 2 {
		return int(m.Pix[i]) | int(m.Pix[i+1])<<8
	}
	return int(m.Pix[i])
}

// classColour is a colour of its own for each class.
func classColour(class int64) color.RGBA {
	h := uint32(class)*2654435761 + 12345
	return color.RGBA{uint8(h >> 24), uint8(h >> 16), uint8(h >> 8), 255}
}

// tint blends a pixel with its mask class's colour; class 0 (the
// background) is left as it is.
func tint(c color.RGBA, class int) color.RGBA {
	if class == 0 {
		return c
	}
	k := classColour(int64(class))
	mix := func(a, b uint8) uint8 { return uint8((3*int(a) + 2*int(b)) / 5) }
	return color.RGBA{mix(c.R, k.R), mix(c.G, k.G), mix(c.B, k.B), 255}
}

// outline draws box b of a tile at (x0, y0), magnified scale times, as a
// one-pixel frame.
func outline(dst *image.RGBA, x0, y0 int, b transform.Box, scale int, c color.RGBA) {
	l, t := x0+int(b.X0*float32(scale)), y0+int(b.Y0*float32(scale))
	r, bt := x0+int(b.X1*float32(scale))-1, y0+int(b.Y1*float32(scale))-1
	for x := l; x <= r; x++ {
		dst.SetRGBA(x, t, c)
		dst.SetRGBA(x, bt, c)
	}
	for y := t; y <= bt; y++ {
		dst.SetRGBA(l, y, c)
		dst.SetRGBA(r, y, c)
	}
}
