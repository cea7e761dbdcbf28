package pipe

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/internal/shareddata"
	"github.com/pipefeed/pipe/pipefile"
)

// segRects are the two rectangles of image i (w×h) the segmentation tests
// draw into its mask, as x0, y0, x1, y1 in pixels, with their classes.
func segRects(w, h, i int) (rects [2][4]int, classes [2]int) {
	return [2][4]int{{w / 4, h / 4, w / 2, h / 2}, {w / 3, h / 2, 5 * w / 6, 3 * h / 4}}, [2]int{1 + i%20, 21 + i%20}
}

// segMask is image i's mask: class 0 with its two rectangles, the second
// over the first where they meet.
func segMask(w, h, i int) []byte {
	m := image.NewGray(image.Rect(0, 0, w, h))
	rects, classes := segRects(w, h, i)
	for k, r := range rects {
		for y := r[1]; y < r[3]; y++ {
			for x := r[0]; x < r[2]; x++ {
				m.Pix[y*w+x] = uint8(classes[k])
			}
		}
	}
	var b bytes.Buffer
	png.Encode(&b, m)
	return b.Bytes()
}

// segData writes n of the real ImageNet JPEGs as a flat image folder
// (dir/images, with labels.csv) with their masks (dir/masks/NAME.png), and
// as WebDataset shards (dir/wds/shard-K.tar: NAME.jpg, NAME.mask.png,
// NAME.json with boxes and classes, NAME.cls).
func segData(t *testing.T, dir string, n, shards int) {
	t.Helper()
	names, data := shareddata.ImageNetJPEGs(t)
	n = min(n, len(names))
	for _, d := range []string{"images", "masks", "wds"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	labels := "file,label\n"
	tws := make([]*tar.Writer, shards)
	bufs := make([]bytes.Buffer, shards)
	for s := range tws {
		tws[s] = tar.NewWriter(&bufs[s])
	}
	put := func(tw *tar.Writer, name string, b []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	for i := range n {
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(data[i]))
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(names[i], filepath.Ext(names[i]))
		mask := segMask(cfg.Width, cfg.Height, i)
		if err := os.WriteFile(filepath.Join(dir, "images", names[i]), data[i], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "masks", base+".png"), mask, 0o644); err != nil {
			t.Fatal(err)
		}
		labels += fmt.Sprintf("%s,%d\n", names[i], i%10)
		rects, classes := segRects(cfg.Width, cfg.Height, i)
		js, _ := json.Marshal(map[string]any{"boxes": rects, "classes": classes})
		key := fmt.Sprintf("%06d", i)
		tw := tws[i%shards]
		put(tw, key+".jpg", data[i])
		put(tw, key+".mask.png", mask)
		put(tw, key+".json", js)
		put(tw, key+".cls", []byte(fmt.Sprint(i%10)))
	}
	if err := os.WriteFile(filepath.Join(dir, "images", "labels.csv"), []byte(labels), 0o644); err != nil {
		t.Fatal(err)
	}
	for s, tw := range tws {
		tw.Close()
		if err := os.WriteFile(filepath.Join(dir, "wds", fmt.Sprintf("shard-%d.tar", s)), bufs[s].Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fieldsPipeline loads text (its sources under DIR=dir) with workers
// workers.
func fieldsPipeline(t *testing.T, text, dir string, workers int) *Pipeline {
	t.Helper()
	f, err := pipefile.Parse("fields.pipe", text, func(k string) (string, bool) { return dir, k == "DIR" })
	if err != nil {
		t.Fatal(err)
	}
	p, err := loadFile(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	p.SetWorkers(workers)
	return p
}

// epochSums runs epochs 0 and 1 of p and returns their checksums, which
// cover every field.
func epochSums(t *testing.T, p *Pipeline) string {
	t.Helper()
	stats, err := p.Run(context.Background(), RunOptions{Epochs: 2, Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	return stats[0].Checksum + " " + stats[1].Checksum
}

const segFolder = `source image_folder path=${DIR}/images labels=${DIR}/images/labels.csv
fields image mask label
decode
shuffle seed=3
random_resized_crop 48 scale=0.3,1
flip
`

const segWDS = `source webdataset path=${DIR}/wds/shard-*.tar
fields image mask boxes classes label max_boxes=4 min_area=4
decode
shuffle seed=3
random_resized_crop 48 scale=0.3,1
flip
`

// TestFieldsDeterminism: a pipeline with a mask (from an image folder)
// or a mask and boxes (from WebDataset shards) gives the same epochs for
// 1 and 3 workers, through an augmentation cache (cold and warm) as live,
// and resumed mid-epoch as run whole; the checksums cover every field.
func TestFieldsDeterminism(t *testing.T) {
	dir := t.TempDir()
	segData(t, dir, 40, 3)
	for _, c := range []struct{ name, text string }{{"folder", segFolder}, {"webdataset", segWDS}} {
		t.Run(c.name, func(t *testing.T) {
			tail := "batch 8\nto_tensor dtype=uint8\n"
			p := fieldsPipeline(t, c.text+tail, dir, 1)
			want := epochSums(t, p)
			resumeMatches(t, p)
			p.Close()
			p = fieldsPipeline(t, c.text+tail, dir, 3)
			if got := epochSums(t, p); got != want {
				t.Errorf("3 workers: %s, 1 worker %s", got, want)
			}
			p.Close()
			// A cache after the random crop stores the moved fields; one
			// after the decode stores them whole, and the crop cannot
			// decode at a reduced scale: it gives what a live decode at
			// full scale gives.
			full := strings.Replace(c.text, "decode\n", "decode reduce=false\n", 1)
			p = fieldsPipeline(t, full+tail, dir, 1)
			wantFull := epochSums(t, p)
			p.Close()
			for _, at := range []struct{ text, after, want string }{{c.text, "flip\n", want}, {full, "decode reduce=false\n", wantFull}} {
				cached := strings.Replace(at.text, at.after, at.after+"cache dir="+t.TempDir()+" epochs=2\n", 1) + tail
				for _, run := range []string{"cold", "warm"} {
					p := fieldsPipeline(t, cached, dir, 2)
					if got := epochSums(t, p); got != at.want {
						t.Errorf("cache after %s, %s: %s, live %s", strings.TrimSpace(at.after), run, got, at.want)
					}
					p.Close()
				}
			}
		})
	}
}

// resumeMatches checks that epoch 1 of p resumed at batch 2 gives the
// batches of the whole epoch from batch 2 on, fields and all.
func resumeMatches(t *testing.T, p *Pipeline) {
	t.Helper()
	sum := func(first int) []string {
		x, err := p.EpochFrom(context.Background(), 1, first)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		var out []string
		for {
			b, err := x.Next()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			c := NewChecksum()
			c.Add(b)
			out = append(out, c.String())
			b.Release()
		}
	}
	whole, resumed := sum(0), sum(2)
	if strings.Join(whole[2:], " ") != strings.Join(resumed, " ") {
		t.Errorf("resumed at batch 2: %v, the whole epoch's from batch 2 %v", resumed, whole[2:])
	}
}

// TestFieldsFollowTheImage: through the JPEG decode with its region
// decoding, a random resized crop, a flip and a rotation, each mask's
// classes lie inside their boxes, and the boxes keep their classes.
func TestFieldsFollowTheImage(t *testing.T) {
	dir := t.TempDir()
	segData(t, dir, 30, 2)
	p := fieldsPipeline(t, strings.Replace(segWDS, "flip\n", "flip\nrotate 10\n", 1)+"batch 10\nto_tensor dtype=uint8\n", dir, 2)
	defer p.Close()
	x, err := p.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	seen := 0
	for {
		b, err := x.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		mv, _ := b.Field(fields.Mask)
		bv, _ := b.Field(fields.Boxes)
		cv, _ := b.Field(fields.Classes)
		boxes, _ := bv.Float32()
		classes, _ := cv.Int64()
		for k := range b.N {
			mask := mv.Data[k*48*48 : (k+1)*48*48]
			for j := range int(bv.Counts[k]) {
				q, class := boxes[(k*4+j)*4:(k*4+j)*4+4], classes[k*4+j]
				for p, v := range mask {
					x, y := float32(p%48)+0.5, float32(p/48)+0.5
					if int64(v) == class && (x < q[0]-1.5 || x > q[2]+1.5 || y < q[1]-1.5 || y > q[3]+1.5) {
						t.Fatalf("sample %d: a pixel of class %d at (%v, %v) lies outside its box %v", b.Samples[k], class, x, y, q)
					}
				}
				seen++
			}
		}
		b.Release()
	}
	if seen < 20 {
		t.Fatalf("only %d boxes survived the crops", seen)
	}
}

// TestFieldsFromObjectStore: WebDataset shards with masks, boxes and
// classes read from an S3 server give the epochs of the same shards on
// disk.
func TestFieldsFromObjectStore(t *testing.T) {
	dir := t.TempDir()
	segData(t, dir, 30, 3)
	srv := dataBucket(t)
	shards, _ := filepath.Glob(filepath.Join(dir, "wds", "*.tar"))
	for _, p := range shards {
		srv.PutFile(t, "data", "seg/"+filepath.Base(p), p)
	}
	tail := "batch 8\nto_tensor dtype=uint8\n"
	p := fieldsPipeline(t, segWDS+tail, dir, 2)
	want := epochSums(t, p)
	p.Close()
	url := fmt.Sprintf(`source webdataset path="s3://data/seg/shard-*.tar" endpoint=%s path_style=true cache_dir=%s`, srv.Endpoint, t.TempDir())
	p = fieldsPipeline(t, strings.Replace(segWDS, "source webdataset path=${DIR}/wds/shard-*.tar", url, 1)+tail, dir, 2)
	defer p.Close()
	if got := epochSums(t, p); got != want {
		t.Errorf("from S3: %s, from disk %s", got, want)
	}
}

// TestAugmentedFields: the preview's sample carries the mask and boxes
// the batch holds for it.
func TestAugmentedFields(t *testing.T) {
	dir := t.TempDir()
	segData(t, dir, 12, 2)
	p := fieldsPipeline(t, segWDS+"batch 6\nto_tensor dtype=uint8\n", dir, 2)
	defer p.Close()
	x, err := p.Epoch(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	b, err := x.Next()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	mv, _ := b.Field(fields.Mask)
	bv, _ := b.Field(fields.Boxes)
	boxes, _ := bv.Float32()
	for k := range b.N {
		img, f, _, idx, err := p.AugmentedFields(0, k)
		if err != nil {
			t.Fatal(err)
		}
		if idx != b.Samples[k] || !bytes.Equal(img.Pix, b.Data[k*img.C*48*48:(k+1)*img.C*48*48]) || !bytes.Equal(f.Mask.Pix, mv.Data[k*48*48:(k+1)*48*48]) {
			t.Fatalf("sample %d: the preview's image or mask is not the batch's", idx)
		}
		if len(f.Boxes) != int(bv.Counts[k]) {
			t.Fatalf("sample %d: %d boxes in the preview, %d in the batch", idx, len(f.Boxes), bv.Counts[k])
		}
		for j, q := range f.Boxes {
			if got := boxes[(k*4+j)*4 : (k*4+j)*4+4]; got[0] != q.X0 || got[1] != q.Y0 || got[2] != q.X1 || got[3] != q.Y1 {
				t.Fatalf("sample %d box %d: %v in the preview, %v in the batch", idx, j, q, got)
			}
		}
	}
}

// TestFieldsWithTraining: a pipeline with fields trains and evaluates its
// held-out split, whose samples carry the same fields.
func TestFieldsWithTraining(t *testing.T) {
	p := fieldsPipeline(t, `source synthetic n=256
fields image mask label
random_crop 32 pad=4 fill=zero
batch 64
train mlp epochs=1
eval split=test
`, "", 1)
	defer p.Close()
	if p.evalP == nil || p.evalP.Schema().String() != p.Schema().String() {
		t.Fatalf("the held-out pipeline has fields %v, the training one %v", p.evalP.Schema(), p.Schema())
	}
	if _, err := p.evalP.Run(context.Background(), RunOptions{Epochs: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestFieldsChecksumOnDevices: an epoch's checksum covers the fields
// whether the batches stay on the host or are cut into device slices.
func TestFieldsChecksumOnDevices(t *testing.T) {
	text := "source synthetic n=256\nfields image mask boxes classes label max_boxes=4\nrandom_crop 32 pad=4 fill=zero\nbatch 64\n"
	p := fieldsPipeline(t, text, "", 2)
	want := epochSums(t, p)
	p.Close()
	p = fieldsPipeline(t, text+"prefetch devices=cpu:2\n", "", 2)
	defer p.Close()
	if got := epochSums(t, p); got != want {
		t.Errorf("on 2 devices: %s, on the host %s", got, want)
	}
}
