package source

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pipefeed/pipe/fields"
	"github.com/pipefeed/pipe/internal/s3server"
	"github.com/pipefeed/pipe/source/remote"
)

// maskPNG is a w×h one-channel mask of class v, encoded.
func maskPNG(t testing.TB, w, h int, v uint8) []byte {
	t.Helper()
	m := image.NewGray(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = v
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imagePNG is a w×h RGB image of one colour, encoded.
func imagePNG(t testing.TB, w, h int, v uint8) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{v, v / 2, 255 - v, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// maskedFolder writes, under a temporary directory, data/images with
// class folders cat and dog and data/masks mirroring them (each mask a
// .png of the image's name), without the mask of dog/c.jpg, and with a
// mask of no image and a notes file beside the masks. It returns the
// directory and every file written, by its path under it.
func maskedFolder(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	files := map[string][]byte{
		"data/images/cat/a.png":  imagePNG(t, 4, 3, 10),
		"data/images/cat/b.JPEG": imagePNG(t, 4, 3, 20), // PNG bytes under a .JPEG name: Read does not decode
		"data/images/dog/c.jpg":  imagePNG(t, 4, 3, 30),
		"data/images/dog/d.png":  imagePNG(t, 5, 2, 40),
		"data/masks/cat/a.png":   maskPNG(t, 4, 3, 1),
		"data/masks/cat/b.png":   maskPNG(t, 4, 3, 2),
		"data/masks/dog/d.png":   maskPNG(t, 5, 2, 3),
		"data/masks/dog/e.png":   maskPNG(t, 5, 2, 4), // no image dog/e.*: ignored
		"data/masks/notes.txt":   []byte("drawn by hand"),
	}
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, files
}

// TestFolderMasks: an image folder opened with a mask field reads each
// image's mask from the sibling folder that mirrors it (images/dog/d.png
// → masks/dog/d.png, images/cat/b.JPEG → masks/cat/b.png) into its
// Value, the image's and label's values empty; an image without a mask
// is a corrupt record (ErrFormat) naming both paths, found when the folder
// opens; the mask folder's files of no image are ignored. The mask
// folder's key may be relative to the images' parent or absolute; a
// missing mask folder or the image folder itself is refused.
func TestFolderMasks(t *testing.T) {
	dir, files := maskedFolder(t)
	images, masks := filepath.Join(dir, "data", "images"), filepath.Join(dir, "data", "masks")
	schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Mask}, {Kind: fields.Label}}}
	for _, key := range []string{"", "masks", masks} {
		schema.Fields[1].Key = key
		f, err := OpenFolder(t.Context(), images, WithFields(schema))
		if err != nil {
			t.Fatalf("mask=%q: %v", key, err)
		}
		want := []string{"cat/a.png", "cat/b.JPEG", "dog/c.jpg", "dog/d.png"}
		if f.Len() != len(want) || f.files[1] != want[1] {
			t.Fatalf("mask=%q: samples %v, want %v", key, f.files, want)
		}
		bad := f.Corrupt()
		missing := filepath.Join(masks, "dog", "c.png")
		if len(bad) != 1 || bad[0].Index != 2 || !errors.Is(bad[0], ErrFormat) ||
			!strings.Contains(bad[0].Error(), "no mask "+missing+" for the image "+filepath.Join(images, "dog", "c.jpg")) {
			t.Fatalf("mask=%q: corrupt %v; want sample 2, without its mask %s", key, bad, missing)
		}
		var rec Record
		if err := f.Read(2, &rec); !errors.Is(err, ErrFormat) {
			t.Errorf("mask=%q: Read of the image without a mask: %v", key, err)
		}
		for i, name := range want {
			if i == 2 {
				continue
			}
			if err := f.Read(i, &rec); err != nil {
				t.Fatal(err)
			}
			mask := files["data/masks/"+strings.TrimSuffix(name, filepath.Ext(name))+".png"]
			if len(rec.Fields) != 3 || !bytes.Equal(rec.Fields[1].Bytes, mask) || !bytes.Equal(rec.Enc, files["data/images/"+name]) ||
				len(rec.Fields[0].Bytes) != 0 || len(rec.Fields[2].Ints) != 0 || rec.Label != i/2 {
				t.Errorf("mask=%q: sample %d (%s): %d fields, mask of %d bytes (want %d), label %d", key, i, name, len(rec.Fields), len(rec.Fields[1].Bytes), len(mask), rec.Label)
			}
		}
		f.Close()
	}

	// An empty mask is as bad as none.
	if err := os.WriteFile(filepath.Join(masks, "dog", "c.png"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	schema.Fields[1].Key = ""
	if f, err := OpenFolder(t.Context(), images, WithFields(schema)); err != nil || len(f.Corrupt()) != 1 ||
		!strings.Contains(f.Corrupt()[0].Error(), filepath.Join(masks, "dog", "c.png")+": offset 0: sample 2: bad format: the mask of "+filepath.Join(images, "dog", "c.jpg")+" is an empty file") {
		t.Errorf("an empty mask: %v, corrupt %v", err, f.Corrupt())
	}

	for _, c := range []struct{ key, want string }{
		{"nomasks", "masks: " + filepath.Join(dir, "data", "nomasks") + ": bad format"},
		{"images", "is the image folder " + images + " itself"},
		{"s3://b/masks", "the masks of a local folder are a local folder"},
	} {
		schema.Fields[1].Key = c.key
		if _, err := OpenFolder(t.Context(), images, WithFields(schema)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mask=%s: %v; want an error saying %q", c.key, err, c.want)
		}
	}

	// A flat folder's masks mirror its labels CSV's paths.
	labels := filepath.Join(dir, "labels.csv")
	os.WriteFile(labels, []byte("dog/d.png,1\ncat/a.png,0\n"), 0o644)
	schema.Fields[1].Key = ""
	f, err := OpenFolder(t.Context(), images, WithLabels(labels), WithFields(schema))
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := f.Read(0, &rec); err != nil || !bytes.Equal(rec.Fields[1].Bytes, files["data/masks/dog/d.png"]) || rec.Label != 1 || len(f.Corrupt()) != 0 {
		t.Errorf("flat folder: %v, label %d, corrupt %v", err, rec.Label, f.Corrupt())
	}
}

// TestFolderFieldsKeepsDefault: the default schema (an image and a
// label) reads what a folder without fields reads, with the same
// fingerprint, and two empty values; a mask field changes the
// fingerprint, and so does a changed mask.
func TestFolderFieldsKeepsDefault(t *testing.T) {
	dir, _ := maskedFolder(t)
	images := filepath.Join(dir, "data", "images")
	plain, err := OpenFolder(t.Context(), images)
	if err != nil {
		t.Fatal(err)
	}
	def, err := OpenFolder(t.Context(), images, WithFields(fields.Default()))
	if err != nil {
		t.Fatal(err)
	}
	fp := func(f *Folder) string {
		s, err := f.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if fp(plain) != fp(def) || plain.Info().Identity != def.Info().Identity {
		t.Errorf("the default schema changes the fingerprint or identity: %q, %q", plain.Info().Identity, def.Info().Identity)
	}
	var a, b Record
	for i := range plain.Len() {
		if err := plain.Read(i, &a); err != nil {
			t.Fatal(err)
		}
		if err := def.Read(i, &b); err != nil || !bytes.Equal(a.Enc, b.Enc) || a.Label != b.Label || len(b.Fields) != 2 || a.Fields != nil {
			t.Fatalf("sample %d: %v; label %d and %d, %d fields", i, err, a.Label, b.Label, len(b.Fields))
		}
	}
	schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Label}, {Kind: fields.Mask}}}
	masked, err := OpenFolder(t.Context(), images, WithFields(schema))
	if err != nil {
		t.Fatal(err)
	}
	before := fp(masked)
	if before == fp(plain) {
		t.Error("a mask field leaves the fingerprint as it was")
	}
	os.WriteFile(filepath.Join(dir, "data", "masks", "cat", "a.png"), maskPNG(t, 4, 3, 5)[:40], 0o644)
	again, err := OpenFolder(t.Context(), images, WithFields(schema))
	if err != nil {
		t.Fatal(err)
	}
	if fp(again) == before {
		t.Error("a changed mask leaves the fingerprint as it was")
	}
}

// TestFolderLabelColumns: with fields, the labels CSV may have more
// columns, named by its first line: label=COLUMN picks the int label's,
// labels the multi-labels' (ints separated by spaces or semicolons,
// an empty cell none). Bad cells (not a number, negative, over
// MaxClasses, past the field's classes) are corrupt records (ErrLabel)
// naming the CSV's line; what cannot be read at all (a column the header
// lacks, label and labels in one column, a line of another width) is
// refused. Without fields, a CSV of more than two columns is refused as
// before.
func TestFolderLabelColumns(t *testing.T) {
	csv := "file,fine,labels,notes\n" +
		"a.jpg,1,1 3,x\n" + // 2
		"b.jpg,0,2;4,y\n" + // 3
		"c.jpg,2,,z\n" + // 4
		"d.jpg,x,1,q\n" + // 5: the label is no number
		"e.jpg,1,1 -2,q\n" + // 6: negative
		"f.jpg,1,1048576,q\n" + // 7: MaxClasses
		"g.jpg,1,7,q\n" + // 8: past classes=5
		"h.jpg,1,1;two,q\n" + // 9
		"i.jpg,4,0 ; 4,q\n" // 10
	root, labels := folderWithCSV(t, csv, "a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg", "f.jpg", "g.jpg", "h.jpg", "i.jpg")
	schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Labels, Classes: 5}, {Kind: fields.Image}, {Kind: fields.Label, Key: "fine"}}}
	f, err := OpenFolder(t.Context(), root, WithLabels(labels), WithFields(schema))
	if err != nil {
		t.Fatal(err)
	}
	if f.Len() != 9 || len(f.Info().Classes) != 5 {
		t.Fatalf("%d samples, %d classes; want 9 and 5", f.Len(), len(f.Info().Classes))
	}
	good := map[int]struct {
		label int
		multi []int64
	}{0: {1, []int64{1, 3}}, 1: {0, []int64{2, 4}}, 2: {2, nil}, 8: {4, []int64{0, 4}}}
	var rec Record
	for i, w := range good {
		if err := f.Read(i, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Label != w.label || !slices.Equal(rec.Fields[0].Ints, w.multi) || len(rec.Fields) != 3 {
			t.Errorf("sample %d: label %d, labels %v; want %d, %v", i, rec.Label, rec.Fields[0].Ints, w.label, w.multi)
		}
	}
	bad := f.Corrupt()
	want := []struct {
		line int
		says string
	}{{5, `label "x" is not a number`}, {6, `labels "1 -2": -2 is not in 0..1048575`}, {7, "1048576 is not in 0..1048575 (MaxClasses-1)"},
		{8, `labels "7": 7 is not below the field's classes (5)`}, {9, `"two" is not a number`}}
	if len(bad) != len(want) {
		t.Fatalf("corrupt %v; want lines 5 to 9", bad)
	}
	for k, w := range want {
		e := bad[k]
		line := strings.Split(csv, "\n")[w.line-1]
		if e.Index != w.line-2 || e.File != labels || e.Offset != int64(strings.Index(csv, line)) || !errors.Is(e, ErrLabel) ||
			!strings.Contains(e.Error(), "line "+strings.TrimSpace(string(rune('0'+w.line)))+": "+line[:5]+": ") || !strings.Contains(e.Error(), w.says) {
			t.Errorf("corrupt record %v; want sample %d at line %d saying %q", e, w.line-2, w.line, w.says)
		}
		if err := f.Read(e.Index, &rec); !errors.Is(err, ErrLabel) {
			t.Errorf("Read(%d): %v", e.Index, err)
		}
	}
	if !errors.Is(bad[3], fields.ErrValue) {
		t.Errorf("a label past the field's classes: %v; want fields.ErrValue too", bad[3])
	}

	// Multi-labels alone: the classes are the field's.
	only := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Labels, Classes: 6}}}
	if g, err := OpenFolder(t.Context(), root, WithLabels(labels), WithFields(only)); err != nil || len(g.Info().Classes) != 6 || len(g.Corrupt()) != 4 {
		t.Errorf("labels alone: %v", err)
	}

	for _, c := range []struct {
		csv    string
		schema []fields.Field
		want   string
	}{
		{"file,fine\na.jpg,1\n", []fields.Field{{Kind: fields.Image}, {Kind: fields.Labels, Classes: 5}}, `labels.csv:1: bad format: no column "labels" in the header (file,fine)`},
		{"file,labels\na.jpg,1\n", []fields.Field{{Kind: fields.Image}, {Kind: fields.Label}, {Kind: fields.Labels, Classes: 5}}, "label and labels both read column 2 (labels)"},
		{"file,label\na.jpg,1\n", []fields.Field{{Kind: fields.Image}, {Kind: fields.Label, Key: "fine"}}, `no column "fine"`},
		{"file,fine,labels\na.jpg,1,2\nb.jpg,1\n", []fields.Field{{Kind: fields.Image}, {Kind: fields.Label, Key: "fine"}}, `labels.csv:3: want 3 comma-separated fields, as on line 1, got "b.jpg,1"`},
		{"a.jpg,1,2\n", nil, `labels.csv:1: want two comma-separated fields, got "a.jpg,1,2"`},
	} {
		os.WriteFile(labels, []byte(c.csv), 0o644)
		opts := []Option{WithLabels(labels)}
		if c.schema != nil {
			opts = append(opts, WithFields(&fields.Schema{Fields: c.schema}))
		}
		if _, err := OpenFolder(t.Context(), root, opts...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error saying %q", c.csv, err, c.want)
		}
	}
}

// TestFolderJSONLabels: a labels file named *.json, a list of objects with
// "file" or an object from each file to its own, gives what the CSV of
// the same labels gives, in its order; bad values are corrupt records at
// their entry's line, and an entry without a file is refused.
func TestFolderJSONLabels(t *testing.T) {
	root, csvPath := folderWithCSV(t, "file,label,labels\nb.jpg,1,2 0\na.jpg,0,\nc.jpg,2,5\nd.jpg,x,1\n", "a.jpg", "b.jpg", "c.jpg", "d.jpg")
	schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Label}, {Kind: fields.Labels, Classes: 3}}}
	read := func(path string) (labels [][]int64, corrupt []string) {
		t.Helper()
		f, err := OpenFolder(t.Context(), root, WithLabels(path), WithFields(schema))
		if err != nil {
			t.Fatal(err)
		}
		var rec Record
		for i := range f.Len() {
			if err := f.Read(i, &rec); err == nil {
				labels = append(labels, append([]int64{int64(rec.Label)}, rec.Fields[2].Ints...))
			}
		}
		for _, e := range f.Corrupt() {
			_, says, _ := strings.Cut(e.Err.Error(), "line ")
			corrupt = append(corrupt, says)
		}
		return labels, corrupt
	}
	wantLabels, wantCorrupt := read(csvPath)
	if len(wantLabels) != 2 || len(wantCorrupt) != 2 {
		t.Fatalf("the CSV: labels %v, corrupt %v", wantLabels, wantCorrupt)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"list.json": `[{"file": "b.jpg", "label": 1, "labels": [2, 0]}, {"file": "a.jpg", "label": 0},
{"file": "c.jpg", "label": 2, "labels": [5]},
{"file": "d.jpg", "label": "x", "labels": [1]}]`,
		"dict.JSON": "{\n\"b.jpg\": {\"label\": 1, \"labels\": [2, 0]},\n \"a.jpg\": {\"label\": 0, \"labels\": null}, \"c.jpg\": {\"label\": 2, \"labels\": [5]},\n \"d.jpg\": {\"labels\": [1], \"label\": \"x\"}}",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		labels, corrupt := read(p)
		wantLines := []string{"2: c.jpg: labels", "3: d.jpg: label"}
		if name == "dict.JSON" {
			wantLines = []string{"3: c.jpg: labels", "4: d.jpg: label"}
		}
		if !slices.EqualFunc(labels, wantLabels, slices.Equal) || len(corrupt) != 2 ||
			!strings.HasPrefix(corrupt[0], wantLines[0]) || !strings.HasPrefix(corrupt[1], wantLines[1]) {
			t.Errorf("%s: labels %v, corrupt %q; the CSV gives %v, and want lines %q", name, labels, corrupt, wantLabels, wantLines)
		}
	}
	// Without fields, the label is under "label".
	f, err := OpenFolder(t.Context(), root, WithLabels(filepath.Join(dir, "list.json")))
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := f.Read(0, &rec); err != nil || rec.Label != 1 || f.Len() != 4 || len(f.Corrupt()) != 1 {
		t.Errorf("without fields: label %d, %v, %d samples, corrupt %v", rec.Label, err, f.Len(), f.Corrupt())
	}
	for name, c := range map[string]struct{ body, want string }{
		"nofile.json": {"[{\"file\": \"a.jpg\", \"label\": 0},\n{\"name\": \"b.jpg\", \"label\": 1}]", `nofile.json:2: bad format: an entry without a "file" string`},
		"null.json":   {"{\"a.jpg\": {\"label\": 0},\n\n \"b.jpg\": null}", "null.json:3: bad format: an entry that is null"},
		"number.json": {"[{\"file\": \"a.jpg\", \"label\": 0}, 7]", "number.json:1: bad format: an entry that is not an object"},
		"scalar.json": {"\"a.jpg\"", "scalar.json:1: bad format: want a list of objects"},
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(c.body), 0o644)
		if _, err := OpenFolder(t.Context(), root, WithLabels(p), WithFields(schema)); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", name, err, c.want)
		}
	}
}

// TestFolderFieldsRefused: what an image folder cannot read is refused
// when it opens, naming the field and where it can be read.
func TestFolderFieldsRefused(t *testing.T) {
	dir, _ := maskedFolder(t)
	images := filepath.Join(dir, "data", "images")
	for _, c := range []struct {
		f    fields.Field
		want string
	}{
		{fields.Field{Kind: fields.Boxes, Max: 4}, "an image folder holds no boxes: it reads an image, a mask from a sibling folder, and label and labels from a labels file; boxes are read by webdataset (json:boxes)"},
		{fields.Field{Kind: fields.Tokens, Max: 4}, "tokens are read by webdataset (json:tokens)"},
		{fields.Field{Kind: fields.Labels, Classes: 3}, `labels come from a column of a labels file, and class folders have none: give labels=FILE with a "labels" column`},
		{fields.Field{Kind: fields.Label, Key: "fine"}, "label=fine names a column of a labels file, and class folders have none"},
	} {
		schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, c.f}}
		if _, err := OpenFolder(t.Context(), images, WithFields(schema)); !errors.Is(err, fields.ErrSchema) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.f.Kind, err, c.want)
		}
	}
}

// TestRemoteFolderMasks: a folder in S3 finds its masks in one listing of
// the mask folder beside it (no request per image: the store's requests
// to the server are counted), and a flat folder over HTTP by a HEAD
// each; both read the masks the local folder reads, and an image without
// its mask is the same corrupt record, naming the URLs.
func TestRemoteFolderMasks(t *testing.T) {
	dir, files := maskedFolder(t)
	srv := s3server.Start(t)
	srv.Bucket(t, "data")
	for name, b := range files {
		srv.Put(t, "data", strings.TrimPrefix(name, "data/"), b)
	}
	os.WriteFile(filepath.Join(dir, "data", "labels.csv"), []byte("file,label\ndog/d.png,1\ncat/a.png,0\ndog/c.jpg,1\ncat/b.JPEG,0\n"), 0o644)
	web := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(dir, "data"))))
	defer web.Close()
	target, _ := url.Parse(srv.Endpoint)
	forward := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var heads, lists int
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		switch {
		case r.Method == http.MethodHead:
			heads++
		case r.URL.Query().Has("list-type"):
			lists++
		}
		mu.Unlock()
		forward.ServeHTTP(w, r)
	}))
	defer counting.Close()
	schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Mask}, {Kind: fields.Label}}}
	s3 := &Remote{Store: remote.New(remote.Options{Endpoint: counting.URL, PathStyle: true, AccessKey: s3server.AccessKey, SecretKey: s3server.SecretKey}),
		Cache: &remote.Cache{Dir: t.TempDir()}}
	defer s3.Store.Close()
	for _, c := range []struct {
		name, root string
		opts       []Option
	}{
		{"s3", "s3://data/images/", []Option{WithRemote(s3)}},
		{"http", web.URL + "/images", []Option{WithLabels(web.URL + "/labels.csv"), WithRemote(&Remote{Store: remote.New(remote.Options{}), Cache: &remote.Cache{Dir: t.TempDir()}})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := OpenFolder(t.Context(), c.root, append(c.opts, WithFields(schema))...)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if c.name == "s3" {
				mu.Lock()
				if heads != 0 || lists != 2 {
					t.Errorf("opening asked for %d listings and %d HEADs; want 2 (the images, the masks) and none", lists, heads)
				}
				mu.Unlock()
			}
			root := strings.TrimSuffix(c.root, "/")
			bad := f.Corrupt()
			maskRoot := strings.TrimSuffix(root, "images") + "masks"
			if len(bad) != 1 || !errors.Is(bad[0], ErrFormat) || bad[0].File != root+"/dog/c.jpg" ||
				!strings.Contains(bad[0].Error(), "no mask "+maskRoot+"/dog/c.png for the image "+root+"/dog/c.jpg") {
				t.Fatalf("corrupt %v; want dog/c.jpg without its mask", bad)
			}
			read := 0
			var rec Record
			for i := range f.Len() {
				if i == bad[0].Index {
					continue
				}
				if err := f.Read(i, &rec); err != nil {
					t.Fatal(err)
				}
				name := f.files[i]
				if !bytes.Equal(rec.Fields[1].Bytes, files["data/masks/"+strings.TrimSuffix(name, filepath.Ext(name))+".png"]) || !bytes.Equal(rec.Enc, files["data/images/"+name]) {
					t.Errorf("sample %d (%s): mask of %d bytes", i, name, len(rec.Fields[1].Bytes))
				}
				read++
			}
			if read != 3 {
				t.Errorf("%d masks read, want 3", read)
			}
		})
	}
}

// TestFolderFieldsAllocs: once warm, a Read with a mask and multi-labels
// allocates only what opening the mask's file costs, as opening the
// image's does: a Read without fields allocates as many.
func TestFolderFieldsAllocs(t *testing.T) {
	dir, _ := maskedFolder(t)
	images := filepath.Join(dir, "data", "images")
	labels := filepath.Join(dir, "labels.csv")
	os.WriteFile(labels, []byte("file,label,labels\ncat/a.png,0,1 2 3\ndog/d.png,1,0\n"), 0o644)
	two := filepath.Join(dir, "two.csv")
	os.WriteFile(two, []byte("file,label\ncat/a.png,0\ndog/d.png,1\n"), 0o644)
	plain, err := OpenFolder(t.Context(), images, WithLabels(two))
	if err != nil {
		t.Fatal(err)
	}
	schema := &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Label}, {Kind: fields.Labels, Classes: 4}}}
	multi, err := OpenFolder(t.Context(), images, WithLabels(labels), WithFields(schema))
	if err != nil {
		t.Fatal(err)
	}
	schema = &fields.Schema{Fields: []fields.Field{{Kind: fields.Image}, {Kind: fields.Mask}, {Kind: fields.Label}, {Kind: fields.Labels, Classes: 4}}}
	masked, err := OpenFolder(t.Context(), images, WithLabels(labels), WithFields(schema))
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(f *Folder) float64 {
		var rec Record
		for i := range f.Len() {
			if err := f.Read(i, &rec); err != nil {
				t.Fatal(err)
			}
		}
		return testing.AllocsPerRun(50, func() { f.Read(0, &rec); f.Read(1, &rec) }) / 2
	}
	base := allocs(plain)
	if n := allocs(multi); n != base {
		t.Errorf("a Read with multi-labels allocates %g times, without fields %g", n, base)
	}
	if n := allocs(masked); n > 2*base {
		t.Errorf("a Read with a mask allocates %g times; without fields %g, and the mask's file costs no more than the image's", n, base)
	}
	t.Logf("allocations per Read: %g without fields, %g with a mask and multi-labels", base, allocs(masked))
}
