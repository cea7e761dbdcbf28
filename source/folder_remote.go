package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pipefeed/pipe/source/remote"
)

// maxCSV bounds a labels or classes file read from a URL: ImageNet's
// validation labels are under 2 MB.
const maxCSV = 256 << 20

// readAnywhere reads a local file, or an object named by a URL through
// rem's store.
func readAnywhere(ctx context.Context, rem *Remote, name string) ([]byte, error) {
	if !remote.IsURL(name) {
		return os.ReadFile(name)
	}
	store, _ := rem.parts()
	obj, err := store.Stat(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDownload, err)
	}
	if obj.Size > maxCSV {
		return nil, fmt.Errorf("%s: %d bytes, more than a labels file may have (%d)", name, obj.Size, maxCSV)
	}
	r, err := store.Open(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDownload, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDownload, err)
	}
	return b, nil
}

// remoteFolder is where a folder named by a URL keeps its objects: every
// file is fetched into the shard cache, in the background in listing
// order from when the folder opens (the store's concurrency at once), and
// at once by a Read that finds it not there yet.
type remoteFolder struct {
	root  string // the folder's URL, without a trailing slash
	files []string
	sizes []int64
	etags []string

	store *remote.Store
	cache *remote.Cache

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stop   func() // ends progress reports
}

func (r *remoteFolder) object(i int) remote.Object {
	return remote.Object{URL: r.root + "/" + r.files[i], Size: r.sizes[i], ETag: r.etags[i]}
}

// open returns file i opened from the shard cache, fetching it first if
// the cache lacks it; the cache's lock on it is held until it is open, so
// it cannot be evicted in between.
func (r *remoteFolder) open(i int) (*os.File, error) {
	obj := r.object(i)
	p, _, release, err := r.cache.Fetch(r.ctx, r.store, obj)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("image_folder: %s: %w", obj.URL, err)
		}
		return nil, fmt.Errorf("image_folder: %w: %w", ErrDownload, err)
	}
	defer release()
	fh, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("image_folder: %s: shard cache: %w", obj.URL, err)
	}
	return fh, nil
}

// prefetch fetches every file into the cache in listing order, up to the
// store's concurrency at once. The first failure stops it: a Read of a
// file not yet there fetches it itself and reports its own error.
func (r *remoteFolder) prefetch(progress func(done, total int64)) {
	r.stop = func() {}
	if progress != nil {
		objs := make([]remote.Object, len(r.files))
		for i := range objs {
			objs[i] = r.object(i)
		}
		r.stop = reportFetch(objs, progress)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	var next atomic.Int64
	var workers sync.WaitGroup
	for range min(r.store.Options().Concurrency, len(r.files)) {
		workers.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(r.files) {
					return
				}
				_, _, release, err := r.cache.Fetch(ctx, r.store, r.object(i))
				if err != nil {
					cancel()
					return
				}
				release()
			}
		})
	}
	r.wg.Go(func() {
		workers.Wait()
		cancel()
		r.stop()
	})
}

func (r *remoteFolder) close() {
	r.cancel()
	r.wg.Wait()
	r.store.Close()
}

// openRemoteFolder lists a folder named by a URL. With class folders the
// store must be listable (s3://): the classes are the names of the
// prefixes one level under the URL that hold objects, sorted, and their
// samples the objects directly in them, sorted by name, as on a local
// disk. A flat folder's files come from its labels CSV: their sizes and
// ETags from one listing (s3://) or a HEAD each (http(s)://, the store's
// concurrency at once).
func openRemoteFolder(ctx context.Context, root string, cfg folderConfig) (*Folder, []string, error) {
	store, cache := cfg.remote.parts()
	root = strings.TrimRight(root, "/")
	rf := &remoteFolder{root: root, store: store, cache: cache}
	f := &Folder{root: root, bad: map[int]*RecordError{}, remote: rf}
	read := func(name string) ([]byte, error) { return readAnywhere(ctx, cfg.remote, name) }
	fail := func(err error) (*Folder, []string, error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("image_folder: %s: listing: %w", root, err)
		}
		if errors.Is(err, ErrDownload) || strings.HasPrefix(err.Error(), "image_folder:") {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("image_folder: %w: %w", ErrDownload, err)
	}
	listable := strings.HasPrefix(root, "s3://")
	var classes []string
	var err error
	if cfg.labels == "" {
		if !listable {
			return nil, nil, fmt.Errorf("image_folder: %s: %w: an HTTP server cannot be listed, so class folders cannot be found: give labels=FILE, a CSV of file,label lines naming the files under the URL", root, remote.ErrBadURL)
		}
		objs, err := store.ListTree(ctx, root)
		if err != nil {
			return fail(err)
		}
		if classes, err = f.listRemoteClasses(objs); err != nil {
			return nil, nil, err
		}
		if cfg.classes != "" {
			if classes, err = readClassCSV(read, cfg.classes, classes); err != nil {
				return fail(err)
			}
		}
	} else {
		var names []string
		if cfg.classes != "" {
			if names, err = readClassCSV(read, cfg.classes, nil); err != nil {
				return fail(err)
			}
		}
		b, err := read(cfg.labels)
		if err != nil {
			return fail(fmt.Errorf("image_folder: %w", err))
		}
		labels := func(string) ([]byte, error) { return b, nil } // read once
		rows, err := readCSV(labels, cfg.labels)
		if err != nil {
			return fail(err)
		}
		objs, err := flatObjects(ctx, store, root, rows, listable)
		if err != nil {
			return fail(err)
		}
		add := func(name string, label int) error {
			o, ok := objs[name]
			if !ok {
				return fmt.Errorf("image_folder: %s/%s: %w: no such object", root, name, remote.ErrNotFound)
			}
			f.add(name, label, o.Size, 0)
			rf.etags = append(rf.etags, o.ETag)
			return nil
		}
		got, err := f.listFlat(ctx, labels, add, cfg.labels, names, cfg.classes)
		if err != nil {
			return fail(err)
		}
		classes = got
	}
	rf.files, rf.sizes = f.files, f.sizes
	rf.ctx, rf.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if len(f.files) > 0 {
		rf.prefetch(cfg.remote.progress())
	}
	return f, classes, nil
}

// listRemoteClasses takes the samples of a class layout from a listing
// of the tree under f.root: objects directly in a prefix one level down,
// with an image extension (others counted as NonImages), without dot
// files or dot directories.
func (f *Folder) listRemoteClasses(objs []remote.Object) ([]string, error) {
	byClass := map[string][]remote.Object{}
	for _, o := range objs {
		rel := strings.TrimPrefix(o.URL, f.root+"/")
		class, name, ok := strings.Cut(rel, "/")
		if !ok || class == "" || strings.HasPrefix(class, ".") {
			continue // an object beside the class folders, or a dot folder
		}
		if _, ok := byClass[class]; !ok {
			byClass[class] = nil // a class, as its directory is on disk
		}
		if strings.Contains(name, "/") || strings.HasPrefix(name, ".") || name == "" {
			continue // deeper, or a dot file: passed over, as on disk
		}
		if !isFolderImage(name) {
			f.nonImages++
			continue
		}
		byClass[class] = append(byClass[class], o)
	}
	if len(byClass) == 0 {
		return nil, fmt.Errorf("image_folder: %s: %w: no class sub-directories (for a flat folder, give labels=)", f.root, ErrFormat)
	}
	classes := make([]string, 0, len(byClass))
	for c := range byClass {
		classes = append(classes, c)
	}
	sort.Strings(classes) // as os.ReadDir sorts: by bytes
	for label, class := range classes {
		objs := byClass[class]
		sort.Slice(objs, func(i, j int) bool { return objs[i].URL < objs[j].URL })
		for _, o := range objs {
			f.add(strings.TrimPrefix(o.URL, f.root+"/"), label, o.Size, 0)
			f.remote.etags = append(f.remote.etags, o.ETag)
		}
	}
	return classes, nil
}

// flatObjects finds the objects a labels CSV names under root, by their
// names there: from a listing of the tree (s3://), or a HEAD each
// (http(s)://), the store's concurrency at once.
func flatObjects(ctx context.Context, store *remote.Store, root string, rows []csvRow, listable bool) (map[string]remote.Object, error) {
	out := map[string]remote.Object{}
	if listable {
		objs, err := store.ListTree(ctx, root)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			out[strings.TrimPrefix(o.URL, root+"/")] = o
		}
		return out, nil
	}
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		if _, err := strconv.Atoi(r.fields[1]); err != nil && r.line == 1 {
			continue // a header
		}
		names = append(names, r.fields[0])
	}
	objs := make([]remote.Object, len(names))
	errs := make([]error, len(names))
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(store.Options().Concurrency, len(names)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				objs[i], errs[i] = store.Stat(ctx, root+"/"+names[i])
				if errs[i] != nil && !errors.Is(errs[i], remote.ErrNotFound) {
					cancel() // the store is failing; a missing file is the CSV's error, reported in order
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, remote.ErrNotFound) {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, n := range names {
		if errs[i] == nil {
			out[n] = objs[i]
		}
	}
	return out, nil
}
