package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

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

// remoteFolder is what a folder named by a URL holds beside its files
// (Folder.root is the folder's URL, without a trailing slash): their
// ETags and Last-Modified times, and the store and shard cache they come
// through. Every file is fetched into the cache, in the background in
// listing order from when the folder opens (the store's concurrency at
// once), and at once by a Read that finds it not there yet.
type remoteFolder struct {
	etags    []string
	modified []time.Time

	store *remote.Store
	cache *remote.Cache

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stop   func() // ends progress reports
}

// object is remote file i.
func (f *Folder) object(i int) remote.Object {
	return remote.Object{URL: f.path(i), Size: f.sizes[i], ETag: f.remote.etags[i], LastModified: f.remote.modified[i]}
}

// openRemote returns remote file i opened from the shard cache, fetching
// it first if the cache lacks it. Its errors are a sharded source's: the
// context's, or a download failure (ErrDownload) naming the URL.
func (f *Folder) openRemote(i int) (*os.File, error) {
	r := f.remote
	fh, _, err := r.cache.Open(r.ctx, r.store, f.object(i))
	switch {
	case errors.Is(err, context.Canceled):
		return nil, fmt.Errorf("image_folder: %s: %w", remote.Redact(f.path(i)), err)
	case err != nil:
		return nil, fmt.Errorf("image_folder: %w: %w", ErrDownload, err)
	}
	return fh, nil
}

// prefetch fetches every remote file, and its mask, into the cache in
// listing order, up to the store's concurrency at once. The first failure
// stops it: a Read of a file not yet there fetches it itself and reports
// its own error.
func (f *Folder) prefetch(progress func(done, total int64)) {
	r := f.remote
	r.stop = func() {}
	if progress != nil {
		objs := make([]remote.Object, len(f.files), 2*len(f.files))
		for i := range f.files {
			objs[i] = f.object(i)
			if f.masks != nil && f.masks[i].URL != "" {
				objs = append(objs, f.masks[i])
			}
		}
		r.stop = reportFetch(objs, progress)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.wg.Go(func() {
		eachIndex(len(f.files), r.store.Options().Concurrency, func(i int) {
			if ctx.Err() != nil {
				return
			}
			objs := []remote.Object{f.object(i)}
			if f.masks != nil && f.masks[i].URL != "" {
				objs = append(objs, f.masks[i])
			}
			for _, o := range objs {
				_, _, release, err := r.cache.Fetch(ctx, r.store, o)
				if err != nil {
					cancel()
					return
				}
				release()
			}
		})
		cancel()
		r.stop()
	})
}

func (r *remoteFolder) close() {
	r.cancel()
	r.wg.Wait()
	r.store.Close()
}

// listingErr is an error of the store met listing a folder: a download
// failure, or the listing's cancellation.
func listingErr(root string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("image_folder: %s: listing: %w", root, err)
	}
	return fmt.Errorf("image_folder: %w: %w", ErrDownload, err)
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
	f := &Folder{root: root, bad: map[int]*RecordError{}, remote: &remoteFolder{store: store, cache: cache}}
	read := func(name string) ([]byte, error) { return readAnywhere(ctx, cfg.remote, name) }
	listable := strings.HasPrefix(root, "s3://")
	var classes []string
	var err error
	if cfg.labels == "" {
		if !listable {
			return nil, nil, fmt.Errorf("image_folder: %s: %w: an HTTP server cannot be listed, so class folders cannot be found: give labels=FILE, a CSV of file,label lines naming the files under the URL", root, remote.ErrBadURL)
		}
		objs, err := store.ListTree(ctx, root)
		if err != nil {
			return nil, nil, listingErr(root, err)
		}
		if classes, err = f.listRemoteClasses(objs); err != nil {
			return nil, nil, err
		}
		if cfg.classes != "" {
			if classes, err = readClassCSV(read, cfg.classes, classes); err != nil {
				return nil, nil, err
			}
		}
	} else {
		// The objects the CSV names, asked for together before any is
		// added.
		addFor := func(rows []csvRow) (addFunc, error) {
			objs, err := flatObjects(ctx, store, root, rows, listable)
			if err != nil {
				return nil, listingErr(root, err)
			}
			return func(name string, label int) error {
				o, ok := objs[name]
				if !ok {
					return fmt.Errorf("image_folder: %w: %s/%s: %w: no such object", ErrDownload, root, name, remote.ErrNotFound)
				}
				f.add(name, label, o.Size, 0)
				f.remote.etags = append(f.remote.etags, o.ETag)
				f.remote.modified = append(f.remote.modified, o.LastModified)
				return nil
			}, nil
		}
		if classes, err = f.listFlat(ctx, read, cfg, addFor); err != nil {
			return nil, nil, err
		}
	}
	f.remote.ctx, f.remote.cancel = context.WithCancel(context.WithoutCancel(ctx))
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
			f.remote.modified = append(f.remote.modified, o.LastModified)
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
	var names, urls []string
	for _, r := range rows {
		if !r.head {
			names = append(names, r.fields[0])
			urls = append(urls, root+"/"+r.fields[0])
		}
	}
	objs, found, err := statAll(ctx, store, urls)
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		if found[i] {
			out[n] = objs[i]
		}
	}
	return out, nil
}

// statAll asks for the objects urls name, the store's concurrency at once:
// found[i] says whether urls[i] exists. A missing object is the caller's
// to report, in its order; any other failure is the error, and stops the
// asking.
func statAll(ctx context.Context, store *remote.Store, urls []string) (objs []remote.Object, found []bool, err error) {
	objs = make([]remote.Object, len(urls))
	errs := make([]error, len(urls))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	eachIndex(len(urls), store.Options().Concurrency, func(i int) {
		if ctx.Err() != nil {
			return
		}
		objs[i], errs[i] = store.Stat(ctx, urls[i])
		if errs[i] != nil && !errors.Is(errs[i], remote.ErrNotFound) {
			cancel() // the store is failing
		}
	})
	found = make([]bool, len(urls))
	for i, err := range errs {
		if err != nil && !errors.Is(err, remote.ErrNotFound) {
			return nil, nil, err
		}
		found[i] = err == nil
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return objs, found, nil
}
