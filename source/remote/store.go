package remote

import (
	"context"
	"crypto/sha256"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	// ErrChanged means an object changed (its ETag, or without one its
	// Last-Modified) while it was read, so the bytes already read and the
	// rest belong to different versions.
	ErrChanged = errors.New("object changed while it was read")
	// ErrRetries means a request kept failing with errors worth retrying
	// (5xx, 429, refused or dropped connections, no answer, a stalled
	// transfer, an answer that is not the one asked for) for
	// Options.RetryFor.
	ErrRetries = errors.New("retries exhausted")
	// ErrLimit means a listing went past one of the store's bounds: its
	// keys (Options.MaxListKeys), its pages, a page's size, its time
	// (Options.ListTimeout), or a continuation token that repeats.
	ErrLimit = errors.New("listing out of bounds")
)

// maxListPage bounds the body of one listing page: S3 sends at most 1,000
// keys a page, about 0.5 MB of XML, so a larger page is a server that does
// not stop.
const maxListPage = 32 << 20

// Options configure a [Store]. The zero value reads AWS S3 with the
// credentials of the environment; [Options.withDefaults] documents each
// default.
type Options struct {
	// Endpoint is the S3 endpoint, as a URL (http://127.0.0.1:9000) or a
	// host (https is then assumed, and errors about the endpoint say so).
	// Default: $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else
	// s3.amazonaws.com.
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
	// buckets), and a 403 says so.
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
	// RetryFor is how long a request that fails with errors worth
	// retrying (5xx, 429, refused or reset connections, no answer, a body
	// cut short or stalled) is retried, with exponential back-off from
	// Backoff (doubling up to 5 s, with jitter), before the error names
	// the URL and the time spent. A transfer that makes progress between
	// failures starts the clock again. Errors retrying cannot mend (404,
	// 403, a redirect, a TLS certificate error, a bad URL) fail at once.
	// Default $PIPE_RETRY_FOR (a duration: 5m), else 60 s: long enough for
	// a restarting server to come back.
	RetryFor time.Duration
	// Backoff is the wait before the first retry. Default 200 ms.
	Backoff time.Duration
	// ConnectTimeout bounds connecting to the server (TCP and TLS) and
	// then the wait for its answer's headers; a request over it is
	// retried (RetryFor). Default 10 s, or RetryFor where that is less: a
	// server that is up answers in well under a second.
	ConnectTimeout time.Duration
	// IdleTimeout is how long a transfer may go without receiving a byte
	// once the answer began before it is dropped and retried from where
	// it stopped. Default 60 s.
	IdleTimeout time.Duration
	// MaxListKeys bounds the keys one listing (a glob, a tree) may return
	// before it fails with [ErrLimit]; its pages are bounded by a
	// hundredth of it (at least 100), each page's body by 32 MiB.
	// Default 10,000,000 (about 1.5 GB of listing in memory).
	MaxListKeys int
	// ListTimeout bounds the time one listing may take, retries included.
	// Default 30 min: 10 million keys at 1,000 a page and 100 ms a page
	// take 17.
	ListTimeout time.Duration
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
	if o.RetryFor <= 0 {
		if d, err := time.ParseDuration(os.Getenv("PIPE_RETRY_FOR")); err == nil && d > 0 {
			o.RetryFor = d
		} else {
			o.RetryFor = 60 * time.Second
		}
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.ConnectTimeout <= 0 {
		// One attempt's wait fits in the budget: retry_for=5s gives up
		// at 5 s.
		o.ConnectTimeout = min(10*time.Second, o.RetryFor)
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.MaxListKeys <= 0 {
		o.MaxListKeys = 10_000_000
	}
	if o.ListTimeout <= 0 {
		o.ListTimeout = 30 * time.Minute
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
	// CacheDamaged counts cached shards whose bytes were not those
	// checksummed when they were fetched, and which were fetched again.
	CacheDamaged int64 `json:"cache_damaged"`
}

var totals struct{ bytes, requests, retries, hits, misses atomic.Int64 }

// Totals returns the process's fetch figures so far.
func Totals() Stats {
	return Stats{Bytes: totals.bytes.Load(), Requests: totals.requests.Load(), Retries: totals.retries.Load(),
		CacheHits: totals.hits.Load(), CacheMisses: totals.misses.Load(), CacheDamaged: damaged.Load()}
}

// Store reads objects named by s3:// and http(s):// URLs. It is safe for
// concurrent use; its requests in flight are bounded by
// Options.Concurrency.
type Store struct {
	opts Options
	sem  chan struct{}
	base *http.Transport
	http *http.Client
	// endpoint is the S3 endpoint as errors name it: a URL, with a note
	// when https was assumed.
	endpoint string

	once  sync.Once
	s3    minio.Core
	creds *credentials.Credentials
	s3err error
}

// New returns a Store with o's settings. It sends nothing: the S3 client
// is made on the first s3:// request.
func New(o Options) *Store {
	o = o.withDefaults()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = o.ConnectTimeout
	tr.ResponseHeaderTimeout = o.ConnectTimeout
	tr.MaxIdleConnsPerHost = 2 * o.Concurrency
	// Bytes as stored: a transparently gunzipped body has another size,
	// and ranges would not line up.
	tr.DisableCompression = true
	return &Store{opts: o, sem: make(chan struct{}, o.Concurrency), base: tr, endpoint: endpointName(o.Endpoint),
		http: &http.Client{Transport: &watch{base: tr}, CheckRedirect: checkRedirect}}
}

// endpointName is how errors name the S3 endpoint ep: its URL, or for a
// bare host the https:// URL that was assumed, saying so.
func endpointName(ep string) string {
	if u, err := url.Parse(ep); err == nil && u.Scheme != "" && u.Host != "" {
		return Redact(ep)
	}
	return "https://" + ep + " (https assumed: the endpoint names no scheme)"
}

// checkRedirect follows at most 10 redirects of a plain HTTP request, each
// to an http(s) URL.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirected to %s, which is not an http(s) URL", Redact(req.URL.String()))
	}
	if len(via) >= 10 {
		return fmt.Errorf("redirected more than 10 times (a loop?), the last time to %s", Redact(req.URL.String()))
	}
	return nil
}

// Close closes the store's idle connections. The store stays usable.
func (s *Store) Close() {
	s.base.CloseIdleConnections()
}

// Options returns the store's settings, defaults filled in.
func (s *Store) Options() Options { return s.opts }

func (s *Store) client() (minio.Core, error) {
	s.once.Do(func() {
		ep := s.opts.Endpoint
		secure := true
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			if u.Scheme != "http" && u.Scheme != "https" {
				s.s3err = fmt.Errorf("S3 endpoint %s: %w: its scheme is neither http nor https", s.endpoint, ErrBadURL)
				return
			}
			secure, ep = u.Scheme == "https", u.Host
		}
		s.creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{Client: &http.Client{Timeout: 5 * time.Second}},
		})
		if s.opts.AccessKey != "" && s.opts.SecretKey != "" {
			s.creds = credentials.NewStaticV4(s.opts.AccessKey, s.opts.SecretKey, "")
		}
		lookup := minio.BucketLookupAuto
		if s.opts.PathStyle {
			lookup = minio.BucketLookupPath
		}
		c, err := minio.New(ep, &minio.Options{Creds: s.creds, Secure: secure, Region: s.opts.Region,
			BucketLookup: lookup, Transport: &watch{base: s.base, s3: true}, MaxRetries: 1})
		if err != nil {
			s.s3err = fmt.Errorf("S3 endpoint %s: %w: %v", s.endpoint, ErrBadURL, err)
			return
		}
		s.s3 = minio.Core{Client: c}
	})
	return s.s3, s.s3err
}

// unsigned says, for a 403 from S3, that no credentials were found, so
// the request went unsigned; "" when credentials were found.
func (s *Store) unsigned() string {
	if s.creds == nil {
		return ""
	}
	if v, err := s.creds.GetWithContext(nil); err != nil || !v.SignerType.IsAnonymous() {
		return ""
	}
	profile, file := os.Getenv("AWS_PROFILE"), os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if profile == "" {
		profile = "default"
	}
	if file == "" {
		file = "~/.aws/credentials"
	}
	return fmt.Sprintf("no credentials were found ($AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY, the profile %q of %s, "+
		"an EC2 or ECS instance role); the request was sent unsigned", profile, file)
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

// watch is the store's RoundTripper. It records when each request waits
// for its answer ([Waits]); for S3 it turns a redirect, which minio-go
// does not follow (the signature names the host), into an error that
// says where it points, and bounds a listing's pages and their bodies.
type watch struct {
	base http.RoundTripper
	s3   bool
}

func (t *watch) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	l, _ := ctx.Value(listKey{}).(*listing)
	if l != nil && (!t.s3 || !req.URL.Query().Has("list-type")) {
		l = nil
	}
	if l != nil {
		if err := l.page(req.URL.Query().Get("continuation-token")); err != nil {
			return nil, err
		}
	}
	var cut *time.Timer
	var cancel context.CancelFunc
	if w, _ := ctx.Value(waitKey{}).(*waiter); w != nil {
		// A retry waits for its answer no longer than the budget's end.
		if end := w.sent(); !end.IsZero() {
			ctx, cancel = context.WithCancel(ctx)
			cut = time.AfterFunc(time.Until(end), cancel)
			req = req.WithContext(ctx)
		}
		defer w.answered()
	}
	resp, err := t.base.RoundTrip(req)
	if cut != nil {
		if !cut.Stop() && req.Context().Err() != nil {
			if err == nil {
				resp.Body.Close()
			}
			err = errBudget
		}
		if err != nil {
			cancel()
		} else {
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		}
	}
	if err != nil {
		return nil, err
	}
	if t.s3 && resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.StatusCode != http.StatusNotModified {
		defer resp.Body.Close()
		return nil, redirected(resp)
	}
	if l != nil {
		resp.Body = &capped{ReadCloser: resp.Body, left: maxListPage}
	}
	return resp, nil
}

// errBudget is a retry that had no answer before the retry budget
// (Options.RetryFor) ran out.
var errBudget error = budgetError{}

type budgetError struct{}

func (budgetError) Error() string   { return "no answer before the retry budget ran out" }
func (budgetError) Timeout() bool   { return true }
func (budgetError) Temporary() bool { return true }

// cancelOnClose is an answer's body whose request context ends with it.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// redirectError is a redirect from an S3 endpoint.
type redirectError struct {
	status, to string
}

func (e *redirectError) Error() string {
	if e.to == "" {
		return e.status + ": the S3 endpoint redirects, without saying where; the store does not follow redirects for S3"
	}
	return e.status + ": the S3 endpoint redirects to " + e.to + ", which the store does not follow for S3 " +
		"(is the endpoint right, and an S3 API rather than a web page?)"
}

// redirected describes a 3xx answer: where its Location points, else the
// endpoint an S3 error body names (a PermanentRedirect to a bucket's
// region).
func redirected(resp *http.Response) error {
	to := resp.Header.Get("Location")
	if to == "" {
		var body struct{ Endpoint string }
		if xml.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body) == nil {
			to = body.Endpoint
		}
	}
	return &redirectError{status: resp.Status, to: Redact(to)}
}

// capped fails a listing page's body past maxListPage bytes.
type capped struct {
	io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("%w: a page of more than %d MiB", ErrLimit, maxListPage>>20)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	return n, err
}

type listKey struct{}

// listing counts one listing's pages and remembers its continuation
// tokens (as hashes), which must not repeat.
type listing struct {
	maxPages int
	mu       sync.Mutex
	pages    int
	tokens   map[[sha256.Size]byte]bool
}

func (l *listing) page(token string) error {
	totals.requests.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pages++; l.pages > l.maxPages {
		return fmt.Errorf("%w: more than %d pages", ErrLimit, l.maxPages)
	}
	if token != "" {
		h := sha256.Sum256([]byte(token))
		if l.tokens[h] {
			return fmt.Errorf("%w: page %d repeats a continuation token of an earlier page (the listing would not end)", ErrLimit, l.pages)
		}
		l.tokens[h] = true
	}
	return nil
}

// Wait is a request of a store that has gone unanswered for a while, or a
// request or transfer being retried: what [Waits] gives, so that a command
// can say what its stores are waiting for.
type Wait struct {
	// URL is the object or listing waited for (redacted).
	URL string
	// Endpoint is where its requests go.
	Endpoint string
	// For is how long its request has gone without an answer, or, once it
	// failed, how long it has been retried.
	For time.Duration
	// Failures counts its failed attempts so far: 0 while its first
	// request waits for an answer.
	Failures int
	// Err is its last failure.
	Err string
	// RetryFor is how long it is retried (Options.RetryFor).
	RetryFor time.Duration
}

func (w Wait) String() string {
	if w.Failures == 0 {
		return fmt.Sprintf("waiting for %s at %s: no answer for %s (retrying until %s)", w.URL, w.Endpoint, secs(w.For), secs(w.RetryFor))
	}
	return fmt.Sprintf("retrying %s at %s for %s (attempts failed: %d; retrying until %s): %s",
		w.URL, w.Endpoint, secs(w.For), w.Failures, secs(w.RetryFor), w.Err)
}

// secs writes d in seconds, to 3 figures: "60 s", "0.25 s".
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'g', 3, 64) + " s" }

type waitKey struct{}

// waiter is what Waits knows of one request or transfer.
type waiter struct {
	url, endpoint string
	retryFor      time.Duration
	mu            sync.Mutex
	sentAt        time.Time // when its unanswered request was sent; zero when none
	first         time.Time // when its first failed attempt since progress began; zero when none
	end           time.Time // first + retryFor, when first is set
	failures      int
	err           string
}

var waiting = struct {
	sync.Mutex
	m map[*waiter]struct{}
}{m: map[*waiter]struct{}{}}

// Waits returns what the process's stores are waiting for: each request
// that has not been answered yet and each one being retried, the longest
// first. A command polls it to tell its user, as a request that goes
// unanswered is otherwise silent until it fails.
func Waits() []Wait {
	now := time.Now()
	var out []Wait
	waiting.Lock()
	for w := range waiting.m {
		w.mu.Lock()
		switch {
		case w.failures > 0:
			out = append(out, Wait{URL: w.url, Endpoint: w.endpoint, For: now.Sub(w.first), Failures: w.failures, Err: w.err, RetryFor: w.retryFor})
		case !w.sentAt.IsZero():
			out = append(out, Wait{URL: w.url, Endpoint: w.endpoint, For: now.Sub(w.sentAt), RetryFor: w.retryFor})
		}
		w.mu.Unlock()
	}
	waiting.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].For > out[j].For })
	return out
}

// sent notes a request sent, and returns when its retry budget ends (zero
// for a first attempt, which has none).
func (w *waiter) sent() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sentAt = time.Now()
	return w.end
}

func (w *waiter) answered() {
	w.mu.Lock()
	w.sentAt = time.Time{}
	w.mu.Unlock()
}

func (w *waiter) set(first time.Time, failures int, err error) {
	w.mu.Lock()
	w.first, w.failures, w.err, w.end = first, failures, "", time.Time{}
	if !first.IsZero() {
		w.end = first.Add(w.retryFor)
	}
	if err != nil {
		w.err = err.Error()
	}
	w.mu.Unlock()
}

// retrier retries one request or transfer on the store's time budget
// (Options.RetryFor), and tells Waits about it.
type retrier struct {
	s     *Store
	url   string
	w     *waiter
	start time.Time // when the attempt under way began
	first time.Time // when the first failed attempt since progress began; zero when none
	n     int       // failed attempts since progress
}

// retrier returns a retrier for u, known to Waits until close, and ctx
// carrying it to the store's RoundTripper.
func (s *Store) retrier(ctx context.Context, u string) (*retrier, context.Context) {
	ep := s.endpoint
	if !isS3(u) {
		if p, err := url.Parse(u); err == nil {
			ep = p.Scheme + "://" + p.Host
		}
	}
	w := &waiter{url: Redact(u), endpoint: ep, retryFor: s.opts.RetryFor}
	waiting.Lock()
	waiting.m[w] = struct{}{}
	waiting.Unlock()
	return &retrier{s: s, url: u, w: w, start: time.Now()}, context.WithValue(ctx, waitKey{}, w)
}

func (r *retrier) close() {
	waiting.Lock()
	delete(waiting.m, r.w)
	waiting.Unlock()
}

// progress restarts the clock: the transfer moved on.
func (r *retrier) progress() {
	r.first, r.n = time.Time{}, 0
	r.w.set(time.Time{}, 0, nil)
}

// failed takes the error of the attempt begun at r.start. It returns nil,
// after the back-off, when the error is worth another attempt and the
// budget allows one; else the error to give up with, naming the URL.
func (r *retrier) failed(ctx context.Context, err error) error {
	u := Redact(r.url)
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", u, context.Cause(ctx))
	}
	err, again := r.s.classify(r.url, err)
	if !again {
		return fmt.Errorf("%s: %w", u, err)
	}
	if r.first.IsZero() {
		r.first = r.start
	}
	r.n++
	r.w.set(r.first, r.n, err)
	spent := time.Since(r.first)
	if spent < r.s.opts.RetryFor {
		if err := r.s.wait(ctx, r.n-1, r.s.opts.RetryFor-spent); err != nil {
			return fmt.Errorf("%s: %w", u, context.Cause(ctx))
		}
		if spent = time.Since(r.first); spent < r.s.opts.RetryFor {
			totals.retries.Add(1)
			r.start = time.Now()
			return nil
		}
	}
	attempts := fmt.Sprintf("%d attempts", r.n)
	if r.n == 1 {
		attempts = "1 attempt"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s: %w: no answer from %s in %s (%s): %w", u, ErrRetries, r.w.endpoint, secs(spent), attempts, err)
	}
	return fmt.Errorf("%s: %w after %s (%s) at %s: %w", u, ErrRetries, secs(spent), attempts, r.w.endpoint, err)
}

// retry runs op until it succeeds, fails with an error not worth
// retrying, or has failed for s.opts.RetryFor; the error names u. op gets
// a ctx that carries what Waits knows of it.
func (s *Store) retry(ctx context.Context, u string, op func(ctx context.Context) error) error {
	r, ctx := s.retrier(ctx, u)
	defer r.close()
	for {
		err := op(ctx)
		if err == nil {
			return nil
		}
		if err := r.failed(ctx, err); err != nil {
			return err
		}
	}
}

// wait sleeps before retry attempt+1: Backoff·2^attempt, at most 5 s,
// between half and all of it (jitter, so ranks that failed together do
// not retry together), and at most left.
func (s *Store) wait(ctx context.Context, attempt int, left time.Duration) error {
	d := s.opts.Backoff << min(attempt, 16)
	d = min(d, 5*time.Second)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(min(d, left))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// statusError is an HTTP error response.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// retryable marks an error worth another attempt that is neither an HTTP
// status nor the transport's: a body cut short or stalled, an answer that
// is not the one asked for (a proxy's or cache's fault may pass).
type retryable struct{ error }

func (e retryable) Unwrap() error { return e.error }

// throttled are the S3 error codes of a store asking for less, which are
// retried whatever their status.
var throttled = map[string]bool{"SlowDown": true, "Throttling": true, "ThrottlingException": true, "RequestLimitExceeded": true,
	"TooManyRequestsException": true, "RequestThrottled": true, "RequestTimeout": true}

// classify turns the error of a request for u into one that says what it
// means (wrapping ErrNotFound, ErrDenied, ErrChanged) and whether retrying
// may help: as the AWS SDK's retryer does, only what is known to pass is
// retried (throttling, 5xx, timeouts, refused or reset connections, a body
// cut short), and everything else fails at once.
func (s *Store) classify(u string, err error) (error, bool) {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its URL is unredacted, and named by the caller
	}
	code, msg, s3code := 0, "", ""
	var se *statusError
	var me minio.ErrorResponse
	switch {
	case errors.As(err, &se):
		code, msg = se.code, se.msg
	case errors.As(err, &me) && me.StatusCode != 0:
		code, msg, s3code = me.StatusCode, fmt.Sprintf("%d %s: %s", me.StatusCode, me.Code, me.Message), me.Code
		if me.BucketName != "" && me.Code == "NoSuchBucket" {
			msg += " (bucket " + me.BucketName + ")"
		}
	default:
		// The endpoint of what will not pass is named here (a TLS error,
		// an https endpoint assumed); what is retried names it when the
		// retries run out.
		var re *redirectError
		if transient(err) {
			return err, true
		}
		if isS3(u) && !errors.Is(err, ErrBadURL) && !errors.Is(err, ErrLimit) && !errors.As(err, &re) && !errors.Is(err, ErrChanged) {
			err = fmt.Errorf("at %s: %w", s.endpoint, err)
		}
		return err, false
	}
	switch {
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, msg), false
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		if isS3(u) {
			if why := s.unsigned(); why != "" {
				msg += ": " + why
			}
		}
		return fmt.Errorf("%w: %s", ErrDenied, msg), false
	case code == http.StatusPreconditionFailed:
		return fmt.Errorf("the object changed (%s): %w", msg, ErrChanged), false
	case throttled[s3code], code == http.StatusRequestTimeout, code == http.StatusTooManyRequests,
		code >= 500 && code != http.StatusNotImplemented && code != http.StatusHTTPVersionNotSupported:
		return errors.New(msg), true
	}
	return errors.New(msg), false
}

// transientErrs are the errors of a connection that may work again: the
// syscall package's, the system's own beside them (osTransient), and a
// body cut short.
var transientErrs = append([]error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.ENETUNREACH, syscall.EHOSTUNREACH, io.ErrUnexpectedEOF, io.EOF}, osTransient...)

// transient reports whether err, neither an HTTP status nor an S3 error,
// is known to pass: a timeout, a refused, reset or unreachable
// connection, a body cut short, an HTTP/2 connection that went away or a
// stream the server reset for its own trouble, or an error marked
// retryable. A TLS
// certificate error, a redirect the store will not follow, a bad URL are
// not.
func transient(err error) bool {
	var rt retryable
	if errors.As(err, &rt) {
		return true
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.IsTemporary || de.IsTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range transientErrs {
		if errors.Is(err, e) {
			return true
		}
	}
	msg := err.Error()
	for _, w := range http2Passing {
		if strings.Contains(msg, w) {
			return true
		}
	}
	if strings.Contains(msg, "stream error: stream ID ") {
		for _, code := range http2PassingCodes {
			if strings.Contains(msg, code) {
				return true
			}
		}
	}
	// minio-go words a connection closed before the answer (io.EOF) so.
	return strings.Contains(msg, "Connection closed by foreign host")
}

// http2Passing are the words of the HTTP/2 errors (net/http's bundled
// http2, whose types it does not export) of a connection that may work
// again: the server going away (GOAWAY, as one restarting or draining
// does), a connection lost or closed under a request.
var http2Passing = []string{
	"http2: server sent GOAWAY",
	"http2: client connection lost",
	"http2: client conn is closed",
	"http2: client conn not usable",
	"http2: client conn could not be established",
}

// http2PassingCodes are the codes of a stream reset that may pass: the
// server's own trouble (INTERNAL_ERROR), a stream it refused before
// processing it (REFUSED_STREAM), or one it wants slower
// (ENHANCE_YOUR_CALM). The others (PROTOCOL_ERROR, FLOW_CONTROL_ERROR,
// HTTP_1_1_REQUIRED, …) say the two sides disagree, which a retry does not
// mend.
var http2PassingCodes = []string{"INTERNAL_ERROR", "REFUSED_STREAM", "ENHANCE_YOUR_CALM"}

// Stat returns the object u names: its size, ETag and Last-Modified.
func (s *Store) Stat(ctx context.Context, u string) (Object, error) {
	if err := checkURL(u, true); err != nil {
		return Object{}, err
	}
	if err := s.acquire(ctx); err != nil {
		return Object{}, fmt.Errorf("%s: %w", Redact(u), err)
	}
	defer s.release()
	obj := Object{URL: u}
	err := s.retry(ctx, u, func(ctx context.Context) error {
		totals.requests.Add(1)
		if isS3(u) {
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
			return fmt.Errorf("%w: %v", ErrBadURL, err)
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
		obj.Size, obj.ETag = resp.ContentLength, etag(resp.Header)
		if lm, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
			obj.LastModified = lm
		}
		return nil
	})
	return obj, err
}

// etag is the ETag h gives, without its quotes; a weak one keeps its W/.
func etag(h http.Header) string {
	v := h.Get("ETag")
	if w, ok := strings.CutPrefix(v, "W/"); ok {
		return "W/" + strings.Trim(w, `"`)
	}
	return strings.Trim(v, `"`)
}

// List returns the objects pattern names, in its order: its brace groups
// expanded ([ExpandBraces]), then each name with a glob (*, ?, [...],
// matched as path.Match does, within one path segment) matched against a
// listing of its bucket from the prefix before the glob (s3:// only: an
// HTTP server cannot be listed), sorted. A name without a glob must
// exist, and a glob must match something ([ErrNotFound]). A malformed URL
// is [ErrBadURL] before any request.
func (s *Store) List(ctx context.Context, pattern string) ([]Object, error) {
	names, err := ExpandBraces(pattern)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := checkURL(n, !HasGlob(n)); err != nil {
			return nil, err
		}
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
	if !isS3(pattern) {
		return nil, fmt.Errorf("%s: %w: an HTTP server cannot be listed: name the objects, with braces for many (shard-{000..099}.tar)", Redact(pattern), ErrBadURL)
	}
	bucket, key, err := s3Path(pattern)
	if err != nil {
		return nil, err
	}
	if _, err := path.Match(key, ""); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", Redact(pattern), ErrBadURL, err)
	}
	objs, err := s.list(ctx, pattern, bucket, key[:strings.IndexAny(key, "*?[")], func(k string) bool {
		ok, _ := path.Match(key, k)
		return ok
	})
	if err == nil && len(objs) == 0 {
		err = fmt.Errorf("%s: %w: no objects match", Redact(pattern), ErrNotFound)
	}
	return objs, err
}

// ListTree returns every object under the directory u names (s3:// only:
// an HTTP server cannot be listed), at any depth, sorted by URL; none is
// [ErrNotFound].
func (s *Store) ListTree(ctx context.Context, u string) ([]Object, error) {
	if !isS3(u) {
		return nil, fmt.Errorf("%s: %w: an HTTP server cannot be listed", Redact(u), ErrBadURL)
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
		err = fmt.Errorf("%s: %w: no objects under it", Redact(u), ErrNotFound)
	}
	return objs, err
}

// list lists bucket's objects under prefix whose keys keep takes, sorted
// by URL; what names the listing in errors. The listing is bounded
// (Options.MaxListKeys, ListTimeout, its pages and their size), and each
// bound it passes is [ErrLimit].
func (s *Store) list(ctx context.Context, what, bucket, prefix string, keep func(key string) bool) ([]Object, error) {
	c, err := s.client()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Redact(what), err)
	}
	if err := s.acquire(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", Redact(what), err)
	}
	defer s.release()
	ctx, cancel := context.WithTimeoutCause(ctx, s.opts.ListTimeout,
		fmt.Errorf("%w: the listing took longer than %s (ListTimeout)", ErrLimit, secs(s.opts.ListTimeout)))
	defer cancel()
	var objs []Object
	err = s.retry(ctx, what, func(ctx context.Context) error {
		objs = objs[:0]
		l := &listing{maxPages: max(s.opts.MaxListKeys/100, 100), tokens: map[[sha256.Size]byte]bool{}}
		keys := 0
		for info := range c.Client.ListObjectsIter(context.WithValue(ctx, listKey{}, l), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if info.Err != nil {
				return info.Err
			}
			if keys++; keys > s.opts.MaxListKeys {
				return fmt.Errorf("%w: more than %d keys (MaxListKeys)", ErrLimit, s.opts.MaxListKeys)
			}
			if keep(info.Key) {
				objs = append(objs, Object{URL: "s3://" + bucket + "/" + info.Key, Size: info.Size, ETag: strings.Trim(info.ETag, `"`), LastModified: info.LastModified})
			}
		}
		// A listing cut off by ctx ends without an error.
		return context.Cause(ctx)
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].URL < objs[j].URL })
	return objs, nil
}

// Open returns a reader of obj's bytes from the start. Every answer is
// checked against what was asked for (status, Content-Range, length,
// ETag or else Last-Modified) before a byte of it is read, so the reader
// never returns bytes of another range or version: another version is
// [ErrChanged]. A transfer that breaks (a dropped connection, a 5xx, no
// byte for IdleTimeout, a wrong answer) is taken up again at the offset it
// reached with a ranged GET that must match obj's version, after back-off,
// for up to RetryFor without progress; then Read fails with an error that
// names the URL and the time spent. Read fails at once with ctx's error
// when ctx ends. The reader holds one of the store's request slots until
// Close.
func (s *Store) Open(ctx context.Context, obj Object) (io.ReadCloser, error) {
	if err := checkURL(obj.URL, true); err != nil {
		return nil, err
	}
	if err := s.acquire(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", Redact(obj.URL), err)
	}
	rt, ctx := s.retrier(ctx, obj.URL)
	return &reader{s: s, ctx: ctx, obj: obj, end: obj.Size, rt: rt}, nil
}

// ReadAt reads len(p) bytes of obj from off with a ranged GET, retried and
// resumed as Open's reads are: for a few records of an object that is not
// worth fetching whole.
func (s *Store) ReadAt(ctx context.Context, obj Object, p []byte, off int64) error {
	if off < 0 || off > obj.Size-int64(len(p)) {
		return fmt.Errorf("%s: bytes %d to %d of an object of %d", Redact(obj.URL), off, off+int64(len(p)), obj.Size)
	}
	if err := checkURL(obj.URL, true); err != nil {
		return err
	}
	if err := s.acquire(ctx); err != nil {
		return fmt.Errorf("%s: %w", Redact(obj.URL), err)
	}
	rt, ctx := s.retrier(ctx, obj.URL)
	r := &reader{s: s, ctx: ctx, obj: obj, off: off, end: off + int64(len(p)), rt: rt}
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
	rt     *retrier
	err    error
	closed bool
}

// get starts a transfer at r.off, retrying as r.rt allows.
func (r *reader) get() error {
	for {
		totals.requests.Add(1)
		actx, cancel := context.WithCancel(r.ctx)
		body, err := r.s.getRange(actx, r.obj, r.off, r.end)
		if err == nil {
			r.body, r.cancel = body, cancel
			r.idle = time.AfterFunc(r.s.opts.IdleTimeout, cancel)
			return nil
		}
		cancel()
		if err := r.rt.failed(r.ctx, err); err != nil {
			return err
		}
	}
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
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if r.off >= r.end {
			r.drop()
			return 0, io.EOF
		}
		if r.body == nil {
			r.rt.start = time.Now()
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
			if r.rt.n > 0 {
				r.rt.progress()
			}
			totals.bytes.Add(int64(n))
			return n, nil
		}
		if err == nil {
			continue
		}
		stalled := !r.idle.Stop()
		r.drop()
		switch {
		case r.ctx.Err() != nil:
		case stalled:
			err = fmt.Errorf("no byte for %v at offset %d", r.s.opts.IdleTimeout, r.off)
		case err == io.EOF:
			err = fmt.Errorf("body ended at offset %d of %d: %w", r.off, r.end, io.ErrUnexpectedEOF)
		default:
			err = fmt.Errorf("at offset %d: %w", r.off, err)
		}
		// Whatever cut the body, a new ranged GET may get the rest.
		r.rt.start = time.Now()
		if err := r.rt.failed(r.ctx, retryable{err}); err != nil {
			r.err = err
			return 0, err
		}
	}
}

// Close ends the transfer and gives back the request slot.
func (r *reader) Close() error {
	if !r.closed {
		r.closed = true
		r.drop()
		r.rt.close()
		r.s.release()
	}
	return nil
}

// getRange sends one GET of obj's bytes from off to end, conditional on
// obj's version, and returns the body of an answer that checkAnswer
// found to be what was asked for.
func (s *Store) getRange(ctx context.Context, obj Object, off, end int64) (io.ReadCloser, error) {
	ranged := off > 0 || end < obj.Size
	if isS3(obj.URL) {
		bucket, key, err := s3Path(obj.URL)
		if err != nil {
			return nil, err
		}
		c, err := s.client()
		if err != nil {
			return nil, err
		}
		var opts minio.GetObjectOptions
		if ranged {
			opts.SetRange(off, end-1)
		}
		if obj.ETag != "" {
			opts.SetMatchETag(obj.ETag)
		}
		body, _, h, err := c.GetObject(ctx, bucket, key, opts)
		if err != nil {
			return nil, err
		}
		// minio-go takes a 200 or a 206 to any GET, whatever its range.
		status, length := http.StatusOK, int64(-1)
		if h.Get("Content-Range") != "" {
			status = http.StatusPartialContent
		}
		if v, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil {
			length = v
		}
		if err := checkAnswer(obj, off, end, status, length, h); err != nil {
			body.Close()
			return nil, err
		}
		return body, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, obj.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if ranged {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(end-1, 10))
	}
	if obj.ETag != "" && !strings.HasPrefix(obj.ETag, "W/") {
		req.Header.Set("If-Match", `"`+obj.ETag+`"`)
	} else if !obj.LastModified.IsZero() {
		req.Header.Set("If-Unmodified-Since", obj.LastModified.UTC().Format(http.TimeFormat))
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		resp.Body.Close()
		return nil, &statusError{code: resp.StatusCode, msg: "GET: " + resp.Status}
	}
	if err := checkAnswer(obj, off, end, resp.StatusCode, resp.ContentLength, resp.Header); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp.Body, nil
}

// checkAnswer refuses an answer (its status, Content-Length, and headers h)
// to a GET of obj's bytes from off to end that is not what was asked for:
// another version of the object ([ErrChanged]; by its ETag, or without
// one its Last-Modified), a 200 to a request from an offset (a server
// that ignores ranges), or another range or length than asked for, which
// is worth retrying (a proxy's or cache's fault may pass). A 200 to a
// request from offset 0 is the whole object, of which the reader takes
// the start.
func checkAnswer(obj Object, off, end int64, status int, length int64, h http.Header) error {
	if tag := etag(h); obj.ETag != "" && tag != "" && tag != obj.ETag {
		return fmt.Errorf("the object changed (ETag %s, was %s): %w", tag, obj.ETag, ErrChanged)
	}
	if obj.ETag == "" && !obj.LastModified.IsZero() {
		if lm, err := http.ParseTime(h.Get("Last-Modified")); err == nil && lm.Unix() != obj.LastModified.Unix() {
			return fmt.Errorf("the object changed (Last-Modified %s, was %s): %w",
				lm.UTC().Format(http.TimeFormat), obj.LastModified.UTC().Format(http.TimeFormat), ErrChanged)
		}
	}
	asked := fmt.Sprintf("bytes %d-%d of %d", off, end-1, obj.Size)
	if status == http.StatusOK {
		if off > 0 {
			return errors.New("GET: the server ignores Range requests, so a broken transfer cannot be taken up again")
		}
		if length < 0 {
			return fmt.Errorf("asked for %s, the answer (200) gives no Content-Length, so a body cut short cannot be told from the whole", asked)
		}
		if length != obj.Size {
			if unversioned(obj) {
				return fmt.Errorf("the object changed (its size is %d, was %d): %w", length, obj.Size, ErrChanged)
			}
			return retryable{fmt.Errorf("asked for %s, the answer (200, the whole object) has Content-Length %d", asked, length)}
		}
		return nil
	}
	cr := h.Get("Content-Range")
	a, b, total, ok := contentRange(cr)
	if ok && a == off && b == end-1 && total != obj.Size && unversioned(obj) {
		return fmt.Errorf("the object changed (its size is %d, was %d): %w", total, obj.Size, ErrChanged)
	}
	if !ok || a != off || b != end-1 || total != obj.Size {
		return retryable{fmt.Errorf("asked for %s, the answer (206) holds Content-Range %q", asked, cr)}
	}
	if length >= 0 && length != end-off {
		return retryable{fmt.Errorf("asked for %s, the answer (206) has Content-Length %d", asked, length)}
	}
	return nil
}

// unversioned reports whether obj has nothing but its size to tell its
// versions apart (an HTTP server with neither ETag nor Last-Modified): then
// an answer of another size is another version, not a fault to retry.
func unversioned(obj Object) bool { return obj.ETag == "" && obj.LastModified.IsZero() }

// contentRange parses a Content-Range of bytes: "bytes first-last/total".
func contentRange(v string) (first, last, total int64, ok bool) {
	r, found := strings.CutPrefix(v, "bytes ")
	span, size, found2 := strings.Cut(r, "/")
	a, b, found3 := strings.Cut(span, "-")
	if !found || !found2 || !found3 {
		return 0, 0, 0, false
	}
	var err [3]error
	first, err[0] = strconv.ParseInt(a, 10, 64)
	last, err[1] = strconv.ParseInt(b, 10, 64)
	total, err[2] = strconv.ParseInt(size, 10, 64)
	return first, last, total, err[0] == nil && err[1] == nil && err[2] == nil
}
