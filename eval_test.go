package pipe

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/pipefile"
)

// pngFolder writes an image_folder layout under root/train and root/val:
// per split, n PNGs of w×h in each of two classes.
func pngFolder(t *testing.T, n, w, h int) string {
	t.Helper()
	root := t.TempDir()
	for _, split := range []string{"train", "val"} {
		for c, class := range []string{"dark", "light"} {
			dir := filepath.Join(root, split, class)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				img := image.NewRGBA(image.Rect(0, 0, w+i%3, h))
				for p := range img.Pix {
					img.Pix[p] = uint8(40 + 150*c + (p*7+i)%30)
				}
				img.Set(0, 0, color.RGBA{255, 0, 0, 255})
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d.png", i)))
				if err != nil {
					t.Fatal(err)
				}
				if err := png.Encode(f, img); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
		}
	}
	return filepath.Join(root, "train")
}

func loadString(t *testing.T, body string) (*Pipeline, error) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "t.pipe")
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(context.Background(), name)
}

// TestEvalOnEncodedImages: evaluation of a model trained on an encoded
// source runs the training's decode and deterministic operations, with
// each random one replaced by its evaluation counterpart (it used to stop
// at the first evaluation: "source image_folder gives encoded images").
func TestEvalOnEncodedImages(t *testing.T) {
	train := pngFolder(t, 8, 40, 36)
	for _, ops := range []string{
		"resize shorter=32\ncenter_crop size=32\n",
		"random_resized_crop 32\nflip horizontal\n",
		"resize shorter=36\nrandom_crop size=32\n",
	} {
		p, err := loadString(t, "source image_folder path="+train+"\ndecode\n"+ops+
			"normalize mean=0.5 std=0.25\nbatch 4\nto_tensor\ntrain mlp width=8 epochs=1\neval split=test batch=5\n")
		if err != nil {
			t.Fatalf("%s: %v", ops, err)
		}
		res, err := p.Fit(context.Background(), TrainOptions{})
		p.Close()
		if err != nil {
			t.Fatalf("%s: %v", ops, err)
		}
		if h := res.History; len(h) != 1 || h[0].TestAccuracy == nil {
			t.Fatalf("%s: no evaluation: %+v", ops, h)
		}
	}
}

// TestEvalShapeMismatchIsACheckError: where the deterministic stages cannot
// make the training shape for the held-out images, Load (and so pipe check)
// says so at the eval line, before any training.
func TestEvalShapeMismatchIsACheckError(t *testing.T) {
	train := pngFolder(t, 2, 40, 36)
	_, err := loadString(t, "source image_folder path="+train+"\ndecode\nresize shorter=30\ncenter_crop size=30\nrandom_crop size=32 pad=2\n"+
		"batch 4\nto_tensor\ntrain mlp width=8 epochs=1\neval split=test\n")
	var se *pipefile.StageError
	if !errors.As(err, &se) || se.Stage != "eval" || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "evaluation does not pad") {
		t.Fatalf("err = %v; want an eval stage error about padding", err)
	}
	if !strings.Contains(err.Error(), ":9:") {
		t.Errorf("err = %v; want the eval line, 9", err)
	}
}
