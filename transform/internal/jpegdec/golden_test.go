package jpegdec

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/internal/shareddata"
)

// goldenWindows are the windows the golden file records for an image of
// w×h pixels at scale num/8: the whole image and two inner windows.
func goldenWindows(w, h, num int) [][4]int {
	sw, sh := Scaled(w, num), Scaled(h, num)
	wins := [][4]int{{0, 0, sw, sh}}
	if sw > 4 && sh > 4 {
		wins = append(wins, [4]int{sw / 3, sh / 4, sw / 2, sh / 2}, [4]int{sw - sw/5 - 1, 1, sw / 5, sh - 2})
	}
	return wins
}

// goldenKey names one decode in the golden file.
func goldenKey(name string, num int, win [4]int) string {
	return fmt.Sprintf("%s %d/8 %dx%d+%d+%d", name, num, win[2], win[3], win[0], win[1])
}

func pixelHash(pix []byte) string {
	h := sha256.Sum256(pix)
	return hex.EncodeToString(h[:12])
}

// readGolden reads testdata/golden.txt: the SHA-256 (first 12 bytes) of
// libjpeg-turbo 2.1.5's decode of each test image, at each DCT scale and in
// each of goldenWindows, written by the jpegturbo build's
// TestWriteGolden.
func readGolden(t *testing.T) map[string]string {
	f, err := os.Open("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		out[line[:i]] = line[i+1:]
	}
	return out
}

// goldenFiles returns the test JPEGs: the package's (made by libjpeg-turbo:
// every sampling, progressive, restart intervals, separate scans, CMYK and
// YCCK) and transform's.
func goldenFiles(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for _, pattern := range []string{"testdata/*.jpg", "../../testdata/*.jpg"} {
		names, _ := filepath.Glob(pattern)
		for _, n := range names {
			data, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(n)] = data
		}
	}
	if len(out) < 20 {
		t.Fatalf("%d test JPEGs", len(out))
	}
	return out
}

// TestGoldenImageNet checks the real ImageNet sample (where it is present)
// against libjpeg-turbo's pixels likewise.
func TestGoldenImageNet(t *testing.T) {
	golden := readGolden(t)
	names, data := shareddata.ImageNetJPEGs(t)
	files := map[string][]byte{}
	for i := range names {
		files["imagenet-sample/"+names[i]] = data[i]
	}
	checkGolden(t, golden, files)
}

// TestGolden decodes every test JPEG at every DCT scale, whole and in
// windows, and checks the pixels against libjpeg-turbo's, recorded in
// testdata/golden.txt: the default build's check that the decoder gives
// libjpeg-turbo's pixels (the jpegturbo build compares the two directly).
func TestGolden(t *testing.T) {
	checkGolden(t, readGolden(t), goldenFiles(t))
}

func checkGolden(t *testing.T, golden map[string]string, files map[string][]byte) {
	d := New()
	checked := 0
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	}) {
		data := files[name]
		w, h, err := d.Header(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, num := range []int{8, 4, 2, 1} {
			for _, win := range goldenWindows(w, h, num) {
				key := goldenKey(name, num, win)
				want, ok := golden[key]
				if !ok {
					t.Fatalf("%s is not in testdata/golden.txt (go test -tags jpegturbo -run TestWriteGolden -golden)", key)
				}
				pix := make([]byte, 3*win[2]*win[3])
				if _, _, err := d.Header(data); err != nil {
					t.Fatal(err)
				}
				if err := d.Decode(pix, num, win[0], win[1], win[2], win[3]); err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if got := pixelHash(pix); got != want {
					t.Errorf("%s: pixels hash to %s, libjpeg-turbo's to %s", key, got, want)
				}
				checked++
			}
		}
	}
	t.Logf("%d decodes of %d files match libjpeg-turbo's", checked, len(files))
}
