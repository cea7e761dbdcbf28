package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

var (
	// ErrNotFound means a bucket or object does not exist (404), or a
	// pattern matched no object.
	ErrNotFound = errors.New("not found")
	// ErrDenied means the store refused the credentials or the request
	// (401, 403).
	ErrDenied = errors.New("access denied")
	// ErrChanged means an object changed (its ETag) while it was read, so
	// the bytes already read and the rest belong to different versions.
	ErrChanged = errors.New("object changed while it was read")
	// ErrRetries means a request kept failing with errors worth retrying
	// (5xx, 429, dropped connections, a stalled transfer) until the
	// retries ran out.
	ErrRetries = errors.New("retries exhausted")
)

// Options configure a [Store]. The zero value reads AWS S3 with the
// credentials of the environment; [Options.withDefaults] documents each
// default.
type Options struct {
	// Endpoint is the S3 endpoint, as a URL (http://127.0.0.1:9000) or a
	// host (https is then used). Default: $AWS_ENDPOINT_URL_S3, else
	// $AWS_ENDPOINT_URL, else s3.amazonaws.com.
	Endpoint string
	// Region is the S3 region. Default: $AWS_REGION, else
	// $AWS_DEFAULT_REGION, else us-east-1 for an endpoint other than AWS
	// (for AWS, the bucket's region is asked for).
	Region string
	// AccessKey and SecretKey, when both are set, are the credentials.
	// Default: the AWS chain — $AWS_ACCESS_KEY_ID and
	// $AWS_SECRET_ACCESS_KEY (and $AWS_SESSION_TOKEN), else the profile
	// $AWS_PROFILE (default "default") of ~/.aws/credentials, else an EC2
	// or ECS instance role; with none, requests go unsigned (public
	// buckets).
	AccessKey, SecretKey string
	// PathStyle addresses buckets as endpoint/bucket/key rather than
	// bucket.endpoint/key, as most S3-compatible servers want. Default
	// false: the client chooses (path style for IP addresses and
	// localhost).
	PathStyle bool
	// Concurrency bounds the requests in flight at once, each an open
	// transfer of at most one copy buffer (1 MiB) in memory. Default 8:
	// enough to fill a 10 Gbit/s link from S3, whose single streams
	// run near 100 MB/s.
	Concurrency int
	// Retries is how many times a failed request is retried (with
	// exponential back-off from Backoff, doubling up to 10 s, with
	// jitter) before the error names the URL. A transfer that makes
	// progress between failures starts counting again. Default 6.
	Retries int
	// Backoff is the wait before the first retry. Default 200 ms.
	Backoff time.Duration
	// IdleTimeout is how long a transfer may go without receiving a byte
	// before it is dropped and retried from where it stopped. Default
	// 60 s.
	IdleTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Endpoint == "" {
		o.Endpoint = firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	}
	if o.Endpoint == "" {
		o.Endpoint = "s3.amazonaws.com"
	}
	if o.Region == "" {
		o.Region = firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	if o.Region == "" && !strings.Contains(o.Endpoint, "amazonaws.com") {
		o.Region = "us-east-1"
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Retries <= 0 {
		o.Retries = 6
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	return o
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// Object is one object of a store, as a listing or a HEAD gives it.
type Object struct {
	URL  string
	Size int64
	// ETag is the store's version tag of the content, without quotes;
	// empty where an HTTP server gives none.
	ETag string
	// LastModified is when the store says the object was last written;
	// zero where it does not say (an HTTP server without Last-Modified).
	// With no ETag, it and Size are all that tell two versions apart.
	LastModified time.Time
}

// Stats counts the work of fetching, process-wide since it started.
type Stats struct {
	// Bytes is the bytes received in object bodies.
	Bytes int64 `json:"bytes"`
	// Requests counts requests sent: GET, HEAD and list pages.
	Requests int64 `json:"requests"`
	// Retries counts requests repeated after an error worth retrying.
	Retries int64 `json:"retries"`
	// CacheHits and CacheMisses count shards found in and fetched into
	// the shard cache.
	CacheHits   int64 `json:"cache_hits"`
	CacheMisses int64 `json:"cache_misses"`
}

var totals struct{ bytes, requests, retries, hits, misses atomic.Int64 }

// Totals returns the process's fetch figures so far.
func Totals() Stats {
	return Stats{Bytes: totals.bytes.Load(), Requests: totals.requests.Load(), Retries: totals.retries.Load(),
		CacheHits: totals.hits.Load(), CacheMisses: totals.misses.Load()}
}

// Store reads objects named by s3:// and http(s):// URLs. It is safe for
// concurrent use; its requests in flight are bounded by
// Options.Concurrency.
type Store struct {
	opts Options
	sem  chan struct{}
	http *http.Client

	once  sync.Once
	s3    minio.Core
	s3err error
}

// New returns a Store with o's settings. It sends nothing: the S3 client
// is made on the first s3:// request.
func New(o Options) *Store {
	o = o.withDefaults()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * o.Concurrency
	tr.ResponseHeaderTimeout = o.IdleTimeout
	// Bytes as stored: a transparently gunzipped body has another size,
	// and ranges would not line up.
	tr.DisableCompression = true
	return &Store{opts: o, sem: make(chan struct{}, o.Concurrency), http: &http.Client{Transport: tr}}
}

// Close closes the store's idle connections. The store stays usable.
func (s *Store) Close() {
	s.http.Transport.(*http.Transport).CloseIdleConnections()
}

// Options returns the store's settings, defaults filled in.
func (s *Store) Options() Options { return s.opts }

func (s *Store) client() (minio.Core, error) {
	s.once.Do(func() {
		ep := s.opts.Endpoint
		secure := true
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			secure, ep = u.Scheme == "https", u.Host
		}
		creds := credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{Client: &http.Client{Timeout: 5 * time.Second}},
		})
		if s.opts.AccessKey != "" && s.opts.SecretKey != "" {
			creds = credentials.NewStaticV4(s.opts.AccessKey, s.opts.SecretKey, "")
		}
		lookup := minio.BucketLookupAuto
		if s.opts.PathStyle {
			lookup = minio.BucketLookupPath
		}
		c, err := minio.New(ep, &minio.Options{Creds: creds, Secure: secure, Region: s.opts.Region,
			BucketLookup: lookup, Transport: s.http.Transport, MaxRetries: 1})
		if err != nil {
			s.s3err = fmt.Errorf("s3 endpoint %s: %w", s.opts.Endpoint, err)
			return
		}
		s.s3 = minio.Core{Client: c}
	})
	return s.s3, s.s3err
}

// acquire takes one of the store's request slots, or fails when ctx ends.
func (s *Store) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) release() { <-s.sem }

// statusError is an HTTP error response.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// classify turns a request's error into one that says what it means
// (wrapping ErrNotFound, ErrDenied, ErrChanged) and whether retrying may
// help.
func classify(err error) (error, bool) {
	code, msg := 0, ""
	var se *statusError
	var me minio.ErrorResponse
	switch {
	case errors.As(err, &se):
		code, msg = se.code, se.msg
	case errors.As(err, &me) && me.StatusCode != 0:
		code, msg = me.StatusCode, fmt.Sprintf("%d %s: %s", me.StatusCode, me.Code, me.Message)
		if me.BucketName != "" && me.Code == "NoSuchBucket" {
			msg += " (bucket " + me.BucketName + ")"
		}
	default:
		// Connection refused or reset, a body cut short, a stall: the
		// transport's, worth another try.
		return err, true
	}
	switch {
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, msg), false
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%w: %s", ErrDenied, msg), false
	case code == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %s", ErrChanged, msg), false
	case code == http.StatusTooManyRequests || code >= 500:
		return errors.New(msg), true
	}
	return errors.New(msg), false
}

// retry runs op until it succeeds, fails with an error not worth
// retrying, or has failed s.opts.Retries+1 times; the error names u.
func (s *Store) retry(ctx context.Context, u string, op func() error) error {
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%s: %w", u, cerr)
		}
		err, again := classify(err)
		if !again {
			return fmt.Errorf("%s: %w", u, err)
		}
		if attempt >= s.opts.Retries {
			return fmt.Errorf("%s: %w (%d attempts): %w", u, ErrRetries, attempt+1, err)
		}
		if err := s.wait(ctx, attempt); err != nil {
			return fmt.Errorf("%s: %w", u, err)
		}
	}
}

// wait sleeps before retry attempt+1: Backoff·2^attempt, at most 10 s,
// between half and all of it (jitter, so ranks that failed together do
// not retry together).
func (s *Store) wait(ctx context.Context, attempt int) error {
	totals.retries.Add(1)
	d := s.opts.Backoff << min(attempt, 16)
	d = min(d, 10*time.Second)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stat returns the object u names: its size and ETag.
func (s *Store) Stat(ctx context.Context, u string) (Object, error) {
	if err := s.acquire(ctx); err != nil {
		return Object{}, fmt.Errorf("%s: %w", u, err)
	}
	defer s.release()
	obj := Object{URL: u}
	err := s.retry(ctx, u, func() error {
		totals.requests.Add(1)
		if strings.HasPrefix(u, "s3://") {
			bucket, key, err := s3Path(u)
			if err != nil {
				return err
			}
			c, err := s.client()
			if err != nil {
				return err
			}
			info, err := c.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
			if me := minio.ToErrorResponse(err); me.StatusCode == http.StatusNotFound {
				// A HEAD's 404 has no body to say which is missing.
				if ok, berr := c.BucketExists(ctx, bucket); berr == nil && !ok {
					return &statusError{code: http.StatusNotFound, msg: "404 NoSuchBucket: bucket " + bucket + " does not exist"}
				}
				return &statusError{code: http.StatusNotFound, msg: "404 NoSuchKey: no object " + key + " in bucket " + bucket}
			}
			if err != nil {
				return err
			}
			obj.Size, obj.ETag, obj.LastModified = info.Size, strings.Trim(info.ETag, `"`), info.LastModified
			return nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
		if err != nil {
			return &statusError{code: 400, msg: err.Error()}
		}
		resp, err := s.http.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return &statusError{code: resp.StatusCode, msg: "HEAD: " + resp.Status}
		}
		if resp.ContentLength < 0 {
			return &statusError{code: 400, msg: "HEAD gives no Content-Length"}
		}
		obj.Size, obj.ETag = resp.ContentLength, strings.Trim(resp.Header.Get("ETag"), `"`)
		if lm, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
			obj.LastModified = lm
		}
		return nil
	})
	return obj, err
}

// List returns the objects pattern names, in its order: its brace groups
// expanded ([ExpandBraces]), then each name with a glob (*, ?, [...],
// matched as path.Match does, within one path segment) matched against a
// listing of its bucket from the prefix before the glob (s3:// only: an
// HTTP server cannot be listed), sorted. A name without a glob must
// exist, and a glob must match something ([ErrNotFound]).
func (s *Store) List(ctx context.Context, pattern string) ([]Object, error) {
	names, err := ExpandBraces(pattern)
	if err != nil {
		return nil, err
	}
	out := make([][]Object, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			if HasGlob(n) {
				out[i], errs[i] = s.glob(ctx, n)
				return
			}
			o, err := s.Stat(ctx, n)
			out[i], errs[i] = []Object{o}, err
		})
	}
	wg.Wait()
	var all []Object
	for i := range out {
		if errs[i] != nil {
			return nil, errs[i]
		}
		all = append(all, out[i]...)
	}
	return all, nil
}

func (s *Store) glob(ctx context.Context, pattern string) ([]Object, error) {
	if !strings.HasPrefix(pattern, "s3://") {
		return nil, fmt.Errorf("%s: %w: an HTTP server cannot be listed: name the objects, with braces for many (shard-{000..099}.tar)", pattern, ErrBadURL)
	}
	bucket, key, err := s3Path(pattern)
	if err != nil {
		return nil, err
	}
	if _, err := path.Match(key, ""); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", pattern, ErrBadURL, err)
	}
	objs, err := s.list(ctx, pattern, bucket, key[:strings.IndexAny(key, "*?[")], func(k string) bool {
		ok, _ := path.Match(key, k)
		return ok
	})
	if err == nil && len(objs) == 0 {
		err = fmt.Errorf("%s: %w: no objects match", pattern, ErrNotFound)
	}
	return objs, err
}

// ListTree returns every object under the directory u names (s3:// only:
// an HTTP server cannot be listed), at any depth, sorted by URL; none is
// [ErrNotFound].
func (s *Store) ListTree(ctx context.Context, u string) ([]Object, error) {
	if !strings.HasPrefix(u, "s3://") {
		return nil, fmt.Errorf("%s: %w: an HTTP server cannot be listed", u, ErrBadURL)
	}
	bucket, key, err := s3Path(u)
	if err != nil {
		return nil, err
	}
	if key != "" && !strings.HasSuffix(key, "/") {
		key += "/"
	}
	objs, err := s.list(ctx, u, bucket, key, func(string) bool { return true })
	if err == nil && len(objs) == 0 {
		err = fmt.Errorf("%s: %w: no objects under it", u, ErrNotFound)
	}
	return objs, err
}

// list lists bucket's objects under prefix whose keys keep takes, sorted
// by URL; what names the listing in errors.
func (s *Store) list(ctx context.Context, what, bucket, prefix string, keep func(key string) bool) ([]Object, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	if err := s.acquire(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer s.release()
	var objs []Object
	err = s.retry(ctx, what, func() error {
		objs = objs[:0]
		totals.requests.Add(1)
		for info := range c.Client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if info.Err != nil {
				return info.Err
			}
			if keep(info.Key) {
				objs = append(objs, Object{URL: "s3://" + bucket + "/" + info.Key, Size: info.Size, ETag: strings.Trim(info.ETag, `"`), LastModified: info.LastModified})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].URL < objs[j].URL })
	return objs, nil
}

// Open returns a reader of obj's bytes from the start. A transfer that
// breaks (a dropped connection, a 5xx, no byte for IdleTimeout) is taken
// up again at the offset it reached with a ranged GET that must match
// obj.ETag, after back-off, up to Retries times without progress; then
// Read fails with an error that names the URL. Read fails at once with
// ctx's error when ctx ends. The reader holds one of the store's request
// slots until Close.
func (s *Store) Open(ctx context.Context, obj Object) (io.ReadCloser, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", obj.URL, err)
	}
	return &reader{s: s, ctx: ctx, obj: obj, end: obj.Size}, nil
}

// ReadAt reads len(p) bytes of obj from off with a ranged GET, retried and
// resumed as Open's reads are: for a few records of an object that is not
// worth fetching whole.
func (s *Store) ReadAt(ctx context.Context, obj Object, p []byte, off int64) error {
	if off < 0 || off > obj.Size-int64(len(p)) {
		return fmt.Errorf("%s: bytes %d to %d of an object of %d", obj.URL, off, off+int64(len(p)), obj.Size)
	}
	if err := s.acquire(ctx); err != nil {
		return fmt.Errorf("%s: %w", obj.URL, err)
	}
	r := &reader{s: s, ctx: ctx, obj: obj, off: off, end: off + int64(len(p))}
	defer r.Close()
	_, err := io.ReadFull(r, p)
	return err
}

type reader struct {
	s      *Store
	ctx    context.Context
	obj    Object
	off    int64
	end    int64 // where the read stops: the object's size, or ReadAt's end
	body   io.ReadCloser
	cancel context.CancelFunc
	idle   *time.Timer
	failed int // attempts without progress
	err    error
	closed bool
}

// get starts a transfer at r.off.
func (r *reader) get() error {
	return r.s.retry(r.ctx, r.obj.URL, func() error {
		totals.requests.Add(1)
		actx, cancel := context.WithCancel(r.ctx)
		body, etag, err := r.s.getRange(actx, r.obj, r.off, r.end)
		if err != nil {
			cancel()
			return err
		}
		if r.obj.ETag != "" && etag != "" && etag != r.obj.ETag {
			body.Close()
			cancel()
			return &statusError{code: http.StatusPreconditionFailed, msg: fmt.Sprintf("ETag %s, was %s", etag, r.obj.ETag)}
		}
		r.body, r.cancel = body, cancel
		r.idle = time.AfterFunc(r.s.opts.IdleTimeout, cancel)
		return nil
	})
}

func (r *reader) drop() {
	if r.body != nil {
		r.idle.Stop()
		r.cancel()
		r.body.Close()
		r.body = nil
	}
}

func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for {
		if r.off >= r.end {
			r.drop()
			return 0, io.EOF
		}
		if r.body == nil {
			if err := r.get(); err != nil {
				r.err = err
				return 0, err
			}
		}
		if int64(len(p)) > r.end-r.off {
			p = p[:r.end-r.off]
		}
		n, err := r.body.Read(p)
		if n > 0 {
			r.idle.Reset(r.s.opts.IdleTimeout)
			r.off += int64(n)
			r.failed = 0
			totals.bytes.Add(int64(n))
			return n, nil
		}
		if err == nil {
			continue
		}
		stalled := !r.idle.Stop()
		r.drop()
		if cerr := r.ctx.Err(); cerr != nil {
			r.err = fmt.Errorf("%s: %w", r.obj.URL, cerr)
			return 0, r.err
		}
		if err == io.EOF {
			err = fmt.Errorf("body ended at offset %d of %d: %w", r.off, r.end, io.ErrUnexpectedEOF)
		}
		if stalled {
			err = fmt.Errorf("no byte for %v at offset %d", r.s.opts.IdleTimeout, r.off)
		}
		if r.failed >= r.s.opts.Retries {
			r.err = fmt.Errorf("%s: %w (%d attempts at offset %d): %v", r.obj.URL, ErrRetries, r.failed+1, r.off, err)
			return 0, r.err
		}
		if werr := r.s.wait(r.ctx, r.failed); werr != nil {
			r.err = fmt.Errorf("%s: %w", r.obj.URL, werr)
			return 0, r.err
		}
		r.failed++
	}
}

// Close ends the transfer and gives back the request slot.
func (r *reader) Close() error {
	if !r.closed {
		r.closed = true
		r.drop()
		r.s.release()
	}
	return nil
}

// getRange sends one GET of obj's bytes from off to end and returns the
// body and the ETag the response gives.
func (s *Store) getRange(ctx context.Context, obj Object, off, end int64) (io.ReadCloser, string, error) {
	ranged := off > 0 || end < obj.Size
	if strings.HasPrefix(obj.URL, "s3://") {
		bucket, key, err := s3Path(obj.URL)
		if err != nil {
			return nil, "", err
		}
		c, err := s.client()
		if err != nil {
			return nil, "", err
		}
		var opts minio.GetObjectOptions
		if ranged {
			opts.SetRange(off, end-1)
		}
		if obj.ETag != "" {
			opts.SetMatchETag(obj.ETag)
		}
		body, info, _, err := c.GetObject(ctx, bucket, key, opts)
		if err != nil {
			return nil, "", err
		}
		return body, strings.Trim(info.ETag, `"`), nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, obj.URL, nil)
	if err != nil {
		return nil, "", &statusError{code: 400, msg: err.Error()}
	}
	if ranged {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(end-1, 10))
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, "", err
	}
	want := http.StatusOK
	if ranged {
		want = http.StatusPartialContent
	}
	if resp.StatusCode == http.StatusOK && off == 0 {
		want = http.StatusOK // the whole object, of which the reader takes the start
	}
	if resp.StatusCode != want {
		resp.Body.Close()
		if off > 0 && resp.StatusCode == http.StatusOK {
			return nil, "", &statusError{code: 400, msg: "GET: the server ignores Range requests, so a broken transfer cannot be taken up again"}
		}
		return nil, "", &statusError{code: resp.StatusCode, msg: "GET: " + resp.Status}
	}
	return resp.Body, strings.Trim(resp.Header.Get("ETag"), `"`), nil
}
