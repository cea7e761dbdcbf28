package transform

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pipefeed/pipe/internal/jpegtest"
	"github.com/pipefeed/pipe/internal/shareddata"
)

// greyJPEG is a greyscale JPEG of about 150 bytes whose frame header claims
// w×h pixels: baseline (SOF0), or progressive (SOF2) with one DC scan. Each
// Huffman table holds one code, a single 0 bit for symbol 0, so every zero
// bit of the scan data is a flat grey block's DC difference or end of
// block. data zero bytes of scan follow the header, then an EOI marker if
// eoi is set; without it the file ends inside the scan, as a truncated one
// does.
func greyJPEG(progressive bool, w, h, data int, eoi bool) []byte {
	b := []byte{0xff, 0xd8}
	seg := func(marker byte, payload ...byte) {
		n := len(payload) + 2
		b = append(b, 0xff, marker, byte(n>>8), byte(n))
		b = append(b, payload...)
	}
	dqt := bytes.Repeat([]byte{1}, 65)
	dqt[0] = 0 // 8-bit table 0
	seg(0xdb, dqt...)
	sof, se := byte(0xc0), byte(63)
	if progressive {
		sof, se = 0xc2, 0
	}
	seg(sof, 8, byte(h>>8), byte(h), byte(w>>8), byte(w), 1, 1, 0x11, 0)
	var dht []byte
	for _, class := range []byte{0x00, 0x10} { // DC table 0, AC table 0
		counts := make([]byte, 16)
		counts[0] = 1
		dht = append(append(append(dht, class), counts...), 0)
	}
	seg(0xc4, dht...)
	seg(0xda, 1, 1, 0x00, 0, se, 0)
	b = append(b, make([]byte, data)...)
	if eoi {
		b = append(b, 0xff, 0xd9)
	}
	return b
}

// pngChunk appends a PNG chunk with its CRC.
func pngChunk(b []byte, typ string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	start := len(b)
	b = append(append(b, typ...), data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// hugePNG is a PNG of about 70 bytes whose header (with a valid CRC)
// claims w×h RGB pixels; its image data holds one row's filter byte and a
// few pixels.
func hugePNG(tb testing.TB, w, h uint32) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, w), h)
	b = pngChunk(b, "IHDR", append(ihdr, 8, 2, 0, 0, 0)) // 8-bit RGB
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(make([]byte, 7))
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	b = pngChunk(b, "IDAT", z.Bytes())
	return pngChunk(b, "IEND", nil)
}

// TestDecodeRefusesHugeHeaders decodes files of a few hundred bytes whose
// headers claim gigapixels, as in issue 17 (a progressive 32768×32768 JPEG
// took libjpeg to 9.5 GB; a baseline 65535×65535 one and a 200000×200000
// PNG killed Go's decoders), and ones just over the default limit: every
// way of decoding refuses them with ErrDecode (ErrTooLarge, but where
// libjpeg's header reader refuses a side over 65500 itself), at once, from
// the header, without allocating the image in Go or (peak RSS) in libjpeg.
func TestDecodeRefusesHugeHeaders(t *testing.T) {
	files := map[string][]byte{
		"baseline JPEG 65535x65535, truncated":    greyJPEG(false, 65535, 65535, 16, false),
		"baseline JPEG 65535x65535":               greyJPEG(false, 65535, 65535, 16, true),
		"progressive JPEG 32768x32768, truncated": greyJPEG(true, 32768, 32768, 16, false),
		"progressive JPEG 32768x32768":            greyJPEG(true, 32768, 32768, 16, true),
		"baseline JPEG 8200x8200":                 greyJPEG(false, 8200, 8200, 16, true),
		"progressive JPEG 8200x8200":              greyJPEG(true, 8200, 8200, 16, true),
		"PNG 200000x200000":                       hugePNG(t, 200000, 200000),
		"PNG 8200x8200":                           hugePNG(t, 8200, 8200),
	}
	libjpegRefuses := func(name string) bool { return DecodesInC() && strings.Contains(name, "JPEG 65535") }
	checkRefused(t, files, func(name string, err error) bool {
		return errors.Is(err, ErrDecode) && (errors.Is(err, ErrTooLarge) || libjpegRefuses(name))
	})
}

// checkRefused decodes each of files every way there is (Decode,
// Decoder.Decode, DecodeFor at full and reduced scale): each must be an
// error that refused(name, err) accepts, found at once, without
// allocating the image in Go or (peak RSS) in libjpeg.
func checkRefused(t *testing.T, files map[string][]byte, refused func(name string, err error) bool) {
	t.Helper()
	rrc, _ := RandomResizedCrop(32, [2]float64{0.5, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	ways := map[string]func(data []byte) error{
		"Decode":         func(data []byte) error { var m Image; return Decode(&m, data) },
		"Decoder.Decode": func(data []byte) error { var m Image; return NewDecoder(false).Decode(&m, data) },
		"DecodeFor": func(data []byte) error {
			var m Image
			r := NewRand(1, 0, 0)
			_, err := NewDecoder(false).DecodeFor(&m, data, rrc, &r)
			return err
		},
		"DecodeFor reduced": func(data []byte) error {
			var m Image
			r := NewRand(1, 0, 0)
			_, err := NewDecoder(true).DecodeFor(&m, data, rrc, &r)
			return err
		},
	}
	rss0, rssKnown := peakRSS()
	for name, data := range files {
		for way, decode := range ways {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			err := decode(data)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if !refused(name, err) {
				t.Errorf("%s (%d bytes), %s: %v", name, len(data), way, err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("%s, %s: allocated %d bytes refusing it", name, way, n)
			}
			if took > 2*time.Second {
				t.Errorf("%s, %s: %v to refuse it", name, way, took)
			}
		}
	}
	if rss1, _ := peakRSS(); rssKnown && rss1-rss0 > 256<<20 {
		t.Errorf("peak RSS grew by %d MiB refusing the files", (rss1-rss0)>>20)
	}
}

// TestHeaderOnlyJPEGs: JPEGs within the pixel limit whose scan data is
// too short to hold the blocks their headers claim, such as a 171-byte
// file claiming 8192×8192 pixels (issue 24), are refused alike in both
// builds, from the header, before anything is allocated for them: the
// jpegturbo build decoded that file as a grey image, and the default
// build allocated its 192 MiB of pixels before refusing it.
func TestHeaderOnlyJPEGs(t *testing.T) {
	files := map[string][]byte{
		"baseline JPEG 8192x8192":                           greyJPEG(false, 8192, 8192, 35, true),
		"progressive JPEG 8192x8192":                        greyJPEG(true, 8192, 8192, 35, true),
		"baseline JPEG 8192x8192, no EOI":                   greyJPEG(false, 8192, 8192, 37, false),
		"4:2:0 progressive JPEG 8192x8192, its DC scan cut": jpegtest.Flat(8192, 8192)[:4000],
	}
	if n := len(files["baseline JPEG 8192x8192"]); n != 171 {
		t.Fatalf("the baseline file is %d bytes, want 171", n)
	}
	// The progressive one whole is a valid image.
	var m Image
	if err := Decode(&m, jpegtest.Flat(100, 60)); err != nil || m.Shape() != (Shape{3, 60, 100}) || bytes.Count(m.Pix, []byte{128}) != len(m.Pix) {
		t.Fatalf("jpegtest.Flat(100, 60) decodes to %s (%v), not flat grey", m.Shape(), err)
	}
	checkRefused(t, files, func(name string, err error) bool {
		return errors.Is(err, ErrDecode) && !errors.Is(err, ErrTooLarge) &&
			strings.Contains(err.Error(), "premature end of JPEG file: ") && strings.Contains(err.Error(), "bytes of scan data cannot hold the")
	})
}

// TestDecoderMaxPixels: an image of exactly MaxPixels decodes, one pixel
// fewer allowed refuses it with ErrTooLarge, for baseline and progressive
// JPEGs and PNGs, whole and through DecodeFor.
func TestDecoderMaxPixels(t *testing.T) {
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, image.NewNRGBA(image.Rect(0, 0, 40, 25))); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"baseline JPEG":    photo(t, 40, 25),
		"progressive JPEG": greyJPEG(true, 40, 25, 4, true),
		"PNG":              pngBuf.Bytes(),
	}
	rrc, _ := RandomResizedCrop(16, [2]float64{0.5, 1}, [2]float64{3. / 4, 4. / 3}, Bilinear)
	for name, data := range files {
		for _, limit := range []int{1000, 999} {
			d := &Decoder{Reduce: true, MaxPixels: limit}
			var m Image
			err := d.Decode(&m, data)
			r := NewRand(1, 0, 0)
			_, errFor := d.DecodeFor(&m, data, rrc, &r)
			switch {
			case limit == 1000 && (err != nil || errFor != nil):
				t.Errorf("%s, 40x25 with MaxPixels %d: %v, %v", name, limit, err, errFor)
			case limit == 1000:
				if err := d.Decode(&m, data); err != nil || m.Shape() != (Shape{3, 25, 40}) {
					t.Errorf("%s: decoded %s (%v)", name, m.Shape(), err)
				}
			case !errors.Is(err, ErrTooLarge) || !errors.Is(errFor, ErrTooLarge):
				t.Errorf("%s, 40x25 with MaxPixels %d: %v, %v; want ErrTooLarge", name, limit, err, errFor)
			}
		}
	}
}

// TestTruncatedProgressive: a progressive JPEG cut short is an error in
// both builds (libjpeg's decode stops when it has read the scans, instead
// of producing the grey rows the missing ones leave).
func TestTruncatedProgressive(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "progressive.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(false)
	var m Image
	for _, n := range []int{len(data) / 3, len(data) - 40} {
		if err := d.Decode(&m, data[:n]); !errors.Is(err, ErrDecode) {
			t.Errorf("progressive.jpg cut to %d of %d bytes: %v", n, len(data), err)
		}
	}
	if err := d.Decode(&m, data); err != nil {
		t.Fatal(err)
	}
}

// midScan returns the middle of data's longest scan of entropy-coded data:
// where to cut a JPEG so that a scan runs out (half the file may be a
// progressive JPEG's marker segment between two scans).
func midScan(data []byte) int {
	best, at := 0, 0
	for p := 0; p+3 < len(data); {
		if data[p] != 0xff || data[p+1] != 0xda {
			p++
			continue
		}
		start := p + 2 + (int(data[p+2])<<8 | int(data[p+3]))
		end := start
		for end+1 < len(data) && !(data[end] == 0xff && data[end+1] != 0 && (data[end+1] < 0xd0 || data[end+1] > 0xd7)) {
			end++
		}
		if end-start > best {
			best, at = end-start, (start+end)/2
		}
		p = end
	}
	return at
}

// TestTruncatedScanData: a JPEG whose scan data runs out before its blocks
// do, cut in the middle of a scan (in half, for a baseline file), with or
// without an EOI marker appended, is an error
// naming the problem in both builds, not an image grey from the cut down
// (issue 24: libjpeg warns and carries on, and pipe's decoder did as it
// does where the cut file ends with a marker).
func TestTruncatedScanData(t *testing.T) {
	want := regexp.MustCompile(`premature end of JPEG file: truncated scan data: \d+ of \d+ MCU rows`)
	check := func(t *testing.T, name string, data []byte) {
		t.Helper()
		cut := data[:midScan(data)]
		d := NewDecoder(false)
		var m Image
		for _, c := range []struct {
			how  string
			data []byte
		}{{"cut in half", cut}, {"cut in half, then EOI", append(bytes.Clone(cut), 0xff, 0xd9)}} {
			if err := d.Decode(&m, c.data); !errors.Is(err, ErrDecode) || !want.MatchString(err.Error()) {
				t.Errorf("%s %s: %v, want an error saying %q", name, c.how, err, want)
			}
		}
		if err := d.Decode(&m, data); err != nil {
			t.Fatalf("%s whole: %v", name, err)
		}
	}
	names, _ := filepath.Glob(filepath.Join("testdata", "*.jpg"))
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		check(t, filepath.Base(n), data)
	}
	t.Run("ImageNet", func(t *testing.T) {
		names, data := shareddata.ImageNetJPEGs(t)
		for i := range data {
			check(t, names[i], data[i])
		}
	})
}
