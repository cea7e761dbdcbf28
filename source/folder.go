package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cespare/xxhash/v2"

	"github.com/pipefeed/pipe/source/remote"
)

// ErrUnknownFormat means a file is not an image format a source reads.
var ErrUnknownFormat = errors.New("unknown image format")

// ErrBrokenLink means a folder's file is a symbolic link that leads to no
// file: its target does not exist (dangling), or following it goes round a
// loop of links.
var ErrBrokenLink = errors.New("broken symbolic link")

// imageExts are the file name extensions image sources decode,
// lower-case.
var imageExts = []string{".jpg", ".jpeg", ".png"}

func isImage(name string) bool {
	return slices.Contains(imageExts, strings.ToLower(filepath.Ext(name)))
}

// folderImageExts are torchvision's IMG_EXTENSIONS, lower-case: the files
// its ImageFolder takes as samples, and image_folder's class folders too;
// other files there are passed over. Of these pipe decodes JPEG and PNG.
var folderImageExts = []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}

func isFolderImage(name string) bool {
	return slices.Contains(folderImageExts, strings.ToLower(filepath.Ext(name)))
}

// Folder reads JPEG and PNG files from a directory: either one
// sub-directory per class (torchvision's ImageFolder, the ILSVRC train/
// layout; classes are the sub-directory names, sorted), or a flat directory
// whose labels come from a CSV file (ImageNet's validation set). Read gives
// each file's bytes as Record.Enc; the decode stage makes them pixels.
type Folder struct {
	root   string
	files  []string // relative to root, in index order
	sizes  []int64
	mtimes []int64
	labels []int // -1 for a corrupt label
	// remote is set for a folder named by a URL (see folder_remote.go).
	remote *remoteFolder
	// nonImages counts files in class folders passed over for their
	// extension.
	nonImages int
	info      Info
	corrupt   []*RecordError
	bad       map[int]*RecordError // corrupt by index

	// fields is set for a folder opened WithFields (see
	// folderfields.go); then masks[i] is sample i's mask file (a local
	// path or an object; its URL empty where it is missing) in the mask
	// folder maskRoot, and its multi-labels are
	// multi[multiOff[i]:multiOff[i+1]].
	fields   *folderFields
	maskRoot string
	masks    []remote.Object
	multi    []int64
	multiOff []int
}

type folderConfig struct {
	labels, classes string
	remote          *Remote
	fields          *folderFields
}

// WithLabels makes the folder flat: path is a CSV of file,label lines (a
// header line is skipped), with labels 0, 1, ...; the files it lists are
// the samples, in its order. A file is a path under the folder: a CSV that
// names one by an absolute path or a path whose ".." leave the folder, or
// names one file on two lines (with two labels or the same one: it would
// be read twice an epoch), is refused, naming its lines. Files in the
// folder that are symbolic links are followed wherever they lead: the
// folder's owner put them there. Without [WithClassNames] the classes are
// 0..the largest label; past 1,024 classes, labels that use fewer than
// half of those are an error: they cannot be the class count. A line whose label is not a number in
// 0..MaxClasses-1 (or, with [WithClassNames], one it names) makes its file
// a corrupt record.
//
// With [WithFields] the CSV may have more columns, each line as many as
// the first: a field's key names a column of the header line (the first),
// label's default being the second column and labels' the column
// "labels"; a labels cell holds ints separated by spaces or semicolons
// (none when empty), each below the field's Classes. Columns are split at
// every comma: a CSV without quoting. A file named *.json, with fields or
// without, is a JSON labels file instead: a list of objects with the file
// under "file", or an object from each file to its object, holding the
// label and the labels (a list of ints; absent or null: none) under the
// fields' keys ("label" and "labels" by default). A bad labels cell or
// value makes its file a corrupt record as a bad label does.
// For OpenFolder.
func WithLabels(path string) Option {
	return Option{"WithLabels", func(o *options) error {
		if path == "" {
			return errors.New("an empty path")
		}
		o.folder.labels = path
		return nil
	}}
}

// WithClassNames names the labels from a CSV of label,name lines (such as
// ILSVRC's synsets); its labels are the classes, so they must run from 0
// without gaps, and with class folders, name every one. Default: class
// folders' names, or the label numbers.
// For OpenFolder.
func WithClassNames(path string) Option {
	return Option{"WithClassNames", func(o *options) error {
		if path == "" {
			return errors.New("an empty path")
		}
		o.folder.classes = path
		return nil
	}}
}

// OpenFolder lists the folder at root. In class folders, as in
// torchvision's ImageFolder, only files with an image extension (.jpg,
// .jpeg, .png, .ppm, .bmp, .pgm, .tif, .tiff, .webp, in any case) are
// samples; others (a notes.txt) are passed over and counted
// (Info.NonImages), and dot files ignored. Images pipe does not decode
// (the extensions after .png), empty files, and, in a flat folder, listed
// files without a .jpg, .jpeg or .png extension and files whose line of
// the labels CSV has a bad label, and symbolic links that lead to no file
// (dangling, or a loop: ErrBrokenLink), are kept as corrupt records (see
// Corrupt): with on_error=skip they are skipped and listed, otherwise the
// run stops on the first, before any batch. Listing stats every file,
// which takes a while for a folder the size of ImageNet; cancelling ctx
// stops it before the next file, and the error wraps ctx's.
//
// [WithFields] takes an image (its key empty), a label (its key a column
// of the labels file, see [WithLabels]), multi-labels (labels: a column
// of the labels file) and a mask: its key is the mask folder (default
// "masks"), absolute or relative to the image folder's parent (a URL, or a
// path under the parent URL, for a remote folder), which mirrors the image
// folder: the mask of images/a/b/x.jpg is masks/a/b/x.png, the image's
// path with its extension replaced by .png, and Read gives its bytes in
// the mask's Value. The mask folder is listed once when the folder opens
// (a HEAD per mask over http(s)://): an image without its mask, or with an
// empty one, is a corrupt record (ErrFormat) naming both; files in the
// mask folder that are no image's mask are ignored. Other fields are
// refused, naming the sources that carry them.
func OpenFolder(ctx context.Context, root string, opts ...Option) (*Folder, error) {
	o, err := apply("image_folder", opts, "WithLabels", "WithClassNames", "WithRemote", "WithFields")
	if err != nil {
		return nil, err
	}
	cfg := o.folder
	cfg.remote = o.remote
	if o.fields != nil {
		if cfg.fields, err = newFolderFields(o.fields, cfg.labels != ""); err != nil {
			return nil, fmt.Errorf("image_folder: WithFields: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("image_folder: %w", err)
	}
	var f *Folder
	var classes []string
	if remote.IsURL(root) {
		f, classes, err = openRemoteFolder(ctx, root, cfg)
	} else {
		f, classes, err = openLocalFolder(ctx, root, cfg)
	}
	if err != nil {
		return nil, err
	}
	if len(f.files) == 0 {
		err = fmt.Errorf("image_folder: %s: %w: no image files (files without an image extension, passed over: %d)", root, ErrFormat, f.nonImages)
	} else {
		err = f.listFields(ctx, cfg.fields)
	}
	if err != nil {
		if f.remote != nil {
			f.remote.cancel()
		}
		return nil, err
	}
	for i, name := range f.files {
		file := f.path(i)
		e, ok := f.bad[i]
		switch {
		case ok:
		case !isImage(name) && isFolderImage(name):
			e = &RecordError{File: file, Index: i,
				Err: fmt.Errorf("%w: %s is an image format pipe does not decode (it decodes JPEG and PNG; convert the file, or skip it with on_error=skip)", ErrUnknownFormat, filepath.Ext(name))}
		case !isImage(name):
			e = &RecordError{File: file, Index: i,
				Err: fmt.Errorf("%w: extension %q (want .jpg, .jpeg or .png)", ErrUnknownFormat, filepath.Ext(name))}
		case f.sizes[i] == 0:
			e = &RecordError{File: file, Index: i, Err: fmt.Errorf("%w: empty file", ErrFormat)}
		case f.masks != nil && (f.masks[i].URL == "" || f.masks[i].Size == 0):
			e = f.maskError(i)
		default:
			continue
		}
		f.bad[i] = e
		f.corrupt = append(f.corrupt, e)
	}
	if f.remote != nil {
		f.prefetch(cfg.remote.progress())
	}
	id := "image_folder " + f.root
	args := []Arg{{"path", f.root}}
	if cfg.labels != "" {
		id += " labels=" + cfg.labels
		args = append(args, Arg{"labels", cfg.labels})
	}
	if cfg.classes != "" {
		id += " classes=" + cfg.classes
		args = append(args, Arg{"classes", cfg.classes})
	}
	if f.fields != nil {
		id += f.fields.identity(f.maskRoot)
	}
	args = append(args, cfg.remote.args(root)...)
	f.info = Info{Name: "image_folder", Identity: id, C: 3, Classes: classes, Encoded: true, NonImages: f.nonImages, Args: args, Fields: o.fields}
	return f, nil
}

// openLocalFolder lists a folder on a local disk.
func openLocalFolder(ctx context.Context, root string, cfg folderConfig) (*Folder, []string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("image_folder: %w", err)
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("image_folder: %s is not a directory", root)
	}
	f := &Folder{root: abs, bad: map[int]*RecordError{}}
	read := func(name string) ([]byte, error) { return readAnywhere(ctx, cfg.remote, name) }
	add := func(name string, label int) error {
		return f.addLocal(filepath.Join(abs, name), name, label)
	}
	var classes []string
	if cfg.labels == "" {
		if classes, err = f.listClasses(ctx); err == nil && cfg.classes != "" {
			classes, err = readClassCSV(read, cfg.classes, classes)
		}
		return f, classes, err
	}
	classes, err = f.listFlat(ctx, read, cfg, func([]csvRow) (addFunc, error) { return add, nil })
	return f, classes, err
}

// path is where sample i is, for errors and records: a local path or a
// URL.
func (f *Folder) path(i int) string {
	if f.remote != nil {
		return f.root + "/" + f.files[i]
	}
	return filepath.Join(f.root, f.files[i])
}

// listClasses lists class sub-directories and their files, both sorted.
// Each file costs a stat, so it looks at ctx before each.
func (f *Folder) listClasses(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(f.root)
	if err != nil {
		return nil, fmt.Errorf("image_folder: %w", err)
	}
	var classes []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && entryIsDir(filepath.Join(f.root, e.Name()), e) {
			classes = append(classes, e.Name())
		}
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("image_folder: %s: %w: no class sub-directories (for a flat folder, give labels=)", f.root, ErrFormat)
	}
	for label, class := range classes {
		files, err := os.ReadDir(filepath.Join(f.root, class))
		if err != nil {
			return nil, fmt.Errorf("image_folder: %w", err)
		}
		for _, e := range files {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("image_folder: %s: listing: %w", f.root, err)
			}
			path := filepath.Join(f.root, class, e.Name())
			if strings.HasPrefix(e.Name(), ".") || entryIsDir(path, e) {
				continue
			}
			if !isFolderImage(e.Name()) {
				f.nonImages++
				continue
			}
			if err := f.addLocal(path, filepath.Join(class, e.Name()), label); err != nil {
				return nil, err
			}
		}
	}
	return classes, nil
}

// addLocal adds the file at path, name under the root, with its size and
// modification time. It stats path, not the directory entry: a symbolic
// link (how ImageNet subsets are laid out) is read at its target's size.
// A link that leads to no file is a corrupt record (ErrBrokenLink), so
// that on_error=skip passes over it; any other failure to stat is an
// error.
func (f *Folder) addLocal(path, name string, label int) error {
	st, err := os.Stat(path)
	if err == nil {
		f.add(name, label, st.Size(), st.ModTime().UnixNano())
		return nil
	}
	broken := brokenLink(path, err)
	if broken == nil {
		return fmt.Errorf("image_folder: %w", err)
	}
	f.bad[len(f.files)] = &RecordError{File: path, Index: len(f.files), Err: broken}
	f.add(name, label, 0, 0)
	return nil
}

// brokenLink says why path, which stat failed on with err, leads to no
// file, if it is a symbolic link that is dangling or part of a loop; nil
// otherwise.
func brokenLink(path string, err error) error {
	if st, lerr := os.Lstat(path); lerr != nil || st.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	switch {
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%w: a symbolic link loop (following it never reaches a file)", ErrBrokenLink)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		target, _ := os.Readlink(path)
		return fmt.Errorf("%w: a dangling symbolic link (its target %s does not exist)", ErrBrokenLink, target)
	}
	return nil
}

// entryIsDir reports whether entry e at path is a directory, following a
// symbolic link to its target.
func entryIsDir(path string, e fs.DirEntry) bool {
	if e.Type()&fs.ModeSymlink == 0 {
		return e.IsDir()
	}
	return isDir(path)
}

// add appends a sample: its name under the root, label, size and
// modification time (0 for an object, whose version is its ETag).
func (f *Folder) add(name string, label int, size, mtime int64) {
	f.files = append(f.files, name)
	f.sizes = append(f.sizes, size)
	f.mtimes = append(f.mtimes, mtime)
	f.labels = append(f.labels, label)
}

// addFunc adds a file of a flat folder with its label (-1: a corrupt
// record).
type addFunc func(name string, label int) error

// listFlat takes the samples from the labels file (cfg.labels), each added
// by the add that addFor makes from its rows: the files it lists. A line
// whose label is not a number, or is not below the number of classes
// cfg.classes names (when given) or else MaxClasses, is a corrupt record,
// as is one whose multi-labels are bad (parseLabels); without names, the
// classes are the numbers up to the largest good label (or, without a
// label field, the multi-labels' classes), and at least past 1,024
// classes half of them must appear (denseLabels). Adding a file may cost
// a stat or a request, so it looks at ctx before each.
func (f *Folder) listFlat(ctx context.Context, read readFunc, cfg folderConfig, addFor func(rows []csvRow) (addFunc, error)) ([]string, error) {
	var names []string
	if cfg.classes != "" {
		var err error
		if names, err = readClassCSV(read, cfg.classes, nil); err != nil {
			return nil, err
		}
	}
	table, err := readLabels(read, cfg)
	if err != nil {
		return nil, err
	}
	rows := table.rows
	if err := f.checkFlatRows(cfg.labels, rows, table.label); err != nil {
		return nil, err
	}
	add, err := addFor(rows)
	if err != nil {
		return nil, err
	}
	if table.labels >= 0 {
		f.multiOff = []int{0}
	}
	csvPath, namesPath := cfg.labels, cfg.classes
	maxLabel := -1
	seen := make(map[int]bool)
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("image_folder: %s: listing: %w", f.root, err)
		}
		if r.head {
			continue
		}
		name := r.fields[0]
		label := 0
		var bad error
		if c := table.label; c >= 0 {
			label, err = strconv.Atoi(r.fields[c])
			switch {
			case err != nil:
				bad = fmt.Errorf("%w: line %d: %s: label %q is not a number", ErrLabel, r.line, name, r.fields[c])
			case label < 0 || label >= MaxClasses:
				bad = fmt.Errorf("%w: line %d: %s: label %d is not in 0..%d (MaxClasses-1)", ErrLabel, r.line, name, label, MaxClasses-1)
			case names != nil && label >= len(names):
				bad = fmt.Errorf("%w: line %d: %s: label %d, but %s names classes 0..%d", ErrLabel, r.line, name, label, namesPath, len(names)-1)
			}
		}
		if c := table.labels; c >= 0 {
			if bad == nil {
				bad = f.parseLabels(r.fields[c], r.line, name, cfg.fields.classes)
			}
			f.multiOff = append(f.multiOff, len(f.multi))
		}
		if bad != nil {
			f.bad[len(f.files)] = &RecordError{File: remote.Redact(csvPath), Offset: r.off, Index: len(f.files), Err: bad}
			label = -1
		}
		if err := add(name, label); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", remote.Redact(csvPath), r.line, err)
		}
		maxLabel = max(maxLabel, label)
		if label >= 0 {
			seen[label] = true
		}
	}
	if names != nil {
		return names, nil
	}
	if table.label < 0 {
		return numbered(cfg.fields.classes), nil
	}
	if err := denseLabels("image_folder: "+csvPath, len(seen), maxLabel, "number the classes 0..%d, or name them with classes=FILE (label,name lines)"); err != nil {
		return nil, err
	}
	return numbered(maxLabel + 1), nil
}

type csvRow struct {
	line   int   // 1-based
	off    int64 // byte offset of the line
	fields []string
	// head marks a labels file's header: a first line whose label is not
	// a number, or the first line, where the fields name its columns.
	head bool
}

// checkFlatRows refuses a labels CSV (at csvPath, for errors) that names a
// file outside the folder, by an absolute path or a path whose ".." leave
// it, or the folder itself, before any of its files is looked for; and one
// that names a file on two lines, with two labels or the same one (it
// would be read twice an epoch; the labels from column label, if ≥ 0).
// Names are compared cleaned: a/./b.jpg is a/b.jpg.
func (f *Folder) checkFlatRows(csvPath string, rows []csvRow, label int) error {
	csvPath = remote.Redact(csvPath)
	first := make(map[string]csvRow, len(rows))
	for _, r := range rows {
		if r.head {
			continue
		}
		name := r.fields[0]
		clean := filepath.Clean(name)
		if !filepath.IsLocal(name) || clean == "." {
			return fmt.Errorf("image_folder: %s:%d: %w: %q is not a file under the folder %s (name files by their path in it, without leaving it by ..)",
				csvPath, r.line, ErrFormat, name, remote.Redact(f.root))
		}
		if prev, ok := first[clean]; ok {
			var labels string
			switch {
			case label < 0:
			case prev.fields[label] == r.fields[label]:
				labels = ", each with label " + r.fields[label]
			default:
				labels = ", with labels " + prev.fields[label] + " and " + r.fields[label]
			}
			return fmt.Errorf("image_folder: %s:%d and %s:%d both name %s%s: %w: list each file once",
				csvPath, prev.line, csvPath, r.line, name, labels, ErrFormat)
		}
		first[clean] = r
	}
	return nil
}

// readFunc reads a whole file: a local path or a URL.
type readFunc func(name string) ([]byte, error)

// readCSV reads lines of two comma-separated fields; if wide, of two or
// more, each as many as the first line.
func readCSV(read readFunc, path string, wide bool) ([]csvRow, error) {
	b, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("image_folder: %w", err)
	}
	var rows []csvRow
	for n, off := 1, 0; off < len(b); n++ {
		end := bytes.IndexByte(b[off:], '\n')
		if end < 0 {
			end = len(b) - off
		}
		line := strings.TrimSpace(string(b[off : off+end]))
		if line != "" {
			fields := strings.Split(line, ",")
			switch {
			case wide && len(rows) > 0 && len(fields) != len(rows[0].fields):
				return nil, fmt.Errorf("image_folder: %s:%d: want %d comma-separated fields, as on line %d, got %q", remote.Redact(path), n, len(rows[0].fields), rows[0].line, line)
			case wide && len(fields) < 2:
				return nil, fmt.Errorf("image_folder: %s:%d: want a file and its labels, comma-separated, got %q", remote.Redact(path), n, line)
			case !wide && len(fields) != 2:
				return nil, fmt.Errorf("image_folder: %s:%d: want two comma-separated fields, got %q", path, n, line)
			}
			for i := range fields {
				fields[i] = strings.TrimSpace(fields[i])
			}
			rows = append(rows, csvRow{line: n, off: int64(off), fields: fields})
		}
		off += end + 1
	}
	return rows, nil
}

// readClassCSV reads label,name lines, labels below MaxClasses; there must
// be a name for every label up to the largest, and for every class in have.
func readClassCSV(read readFunc, path string, have []string) ([]string, error) {
	rows, err := readCSV(read, path, false)
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	n := len(have)
	for _, r := range rows {
		label, err := strconv.Atoi(r.fields[0])
		if err != nil || label < 0 {
			if r.line == 1 {
				continue
			}
			return nil, fmt.Errorf("image_folder: %s:%d: label %q is not a number ≥ 0", path, r.line, r.fields[0])
		}
		if label >= MaxClasses {
			return nil, fmt.Errorf("image_folder: %s:%d: label %d is not below MaxClasses (%d)", path, r.line, label, MaxClasses)
		}
		names[label] = r.fields[1]
		n = max(n, label+1)
	}
	out := make([]string, n)
	for i := range out {
		name, ok := names[i]
		if !ok {
			return nil, fmt.Errorf("image_folder: %s: no name for label %d", path, i)
		}
		out[i] = name
	}
	return out, nil
}

func (f *Folder) Len() int   { return len(f.files) }
func (f *Folder) Info() Info { return f.info }

// Corrupt lists the files found unreadable when the folder was listed.
func (f *Folder) Corrupt() []*RecordError { return f.corrupt }

// Read sets rec.Enc to sample i's file bytes (read into rec.Buf) and,
// with WithFields, rec.Fields: a mask's bytes and multi-labels are read
// into the memory rec.Fields holds.
func (f *Folder) Read(i int, rec *Record) error {
	if i < 0 || i >= len(f.files) {
		return fmt.Errorf("image_folder: sample %d out of range [0, %d)", i, len(f.files))
	}
	// Files of other formats, empty files and bad labels are all here.
	if e, ok := f.bad[i]; ok {
		return e
	}
	path := f.path(i)
	fail := func(err error) error { return &RecordError{File: path, Index: i, Err: err} }
	var fh *os.File
	var err error
	if f.remote != nil {
		fh, err = f.openRemote(i)
		if err != nil {
			return err // a download failure stops the epoch: it is not the record's
		}
	} else if fh, err = os.Open(path); err != nil {
		return fail(err)
	}
	defer fh.Close()
	n := int(f.sizes[i])
	if cap(rec.Buf) < n {
		rec.Buf = make([]byte, n)
	}
	buf := rec.Buf[:n]
	if _, err := io.ReadFull(fh, buf); err != nil {
		return fail(fmt.Errorf("%w: %v (the file changed since it was listed?)", ErrFormat, err))
	}
	if f.fields == nil {
		*rec = Record{Enc: buf, Label: f.labels[i], Buf: rec.Buf, Path: path}
		return nil
	}
	*rec = Record{Enc: buf, Label: f.labels[i], Buf: rec.Buf, Path: path, Fields: rec.Fields}
	return f.readFields(i, rec)
}

// Fingerprint covers every file's name, size and modification time (an
// object's ETag, or its Last-Modified where the server gives no ETag),
// its mask's as well, and its multi-labels.
func (f *Folder) Fingerprint() (string, error) {
	h := xxhash.New()
	fmt.Fprintf(h, "%s\x00%d\x00%q\x00", f.info.Identity, len(f.files), f.info.Classes)
	for i, name := range f.files {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00", name, f.sizes[i], f.mtimes[i], f.labels[i])
		if f.remote != nil {
			fmt.Fprintf(h, "%s\x00", f.remote.etags[i])
			if f.remote.etags[i] == "" && !f.remote.modified[i].IsZero() {
				fmt.Fprintf(h, "%d\x00", f.remote.modified[i].Unix())
			}
		}
		if f.masks != nil {
			m := f.masks[i]
			fmt.Fprintf(h, "%d\x00%s\x00", m.Size, m.ETag)
			if f.remote == nil {
				fmt.Fprintf(h, "%d\x00", m.LastModified.UnixNano())
			} else if m.ETag == "" && !m.LastModified.IsZero() {
				fmt.Fprintf(h, "%d\x00", m.LastModified.Unix())
			}
		}
		if f.multiOff != nil {
			fmt.Fprintf(h, "%v\x00", f.multi[f.multiOff[i]:f.multiOff[i+1]])
		}
	}
	return fmt.Sprintf("%016x", h.Sum64()), nil
}

// Close stops fetching a remote folder's files; a local folder holds
// nothing.
func (f *Folder) Close() error {
	if f.remote != nil {
		f.remote.close()
	}
	return nil
}
