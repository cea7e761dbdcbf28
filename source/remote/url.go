package remote

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// ErrBadURL means a string that names an object store is not a usable URL:
// an s3:// URL without a bucket or with an invalid one, s3:/x or s3:///key,
// an http(s) URL without a host, an unbalanced brace, a glob in an http(s)
// URL (which cannot be listed).
var ErrBadURL = errors.New("bad URL")

// IsURL reports whether s names objects in a store rather than local files:
// its scheme is s3:, http: or https: (in any case). Whether it is a usable
// URL (s3://bucket/key, http://host/path) is the store's to check, which
// refuses a malformed one (s3:/x, s3:///key) as [ErrBadURL] before any
// request.
func IsURL(s string) bool {
	for _, p := range []string{"s3:", "http:", "https:"} {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return true
		}
	}
	return false
}

// isS3 reports whether u's scheme is s3:.
func isS3(u string) bool { return len(u) >= 3 && strings.EqualFold(u[:3], "s3:") }

// s3Path splits s3://bucket/key into its bucket and key; the bucket must
// be a valid name.
func s3Path(u string) (bucket, key string, err error) {
	if !isS3(u) {
		return "", "", fmt.Errorf("%s: %w: not an s3:// URL", Redact(u), ErrBadURL)
	}
	rest, ok := strings.CutPrefix(u[3:], "//")
	if !ok {
		return "", "", fmt.Errorf("%s: %w: an s3 URL is s3://bucket/key", Redact(u), ErrBadURL)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%s: %w: no bucket (an s3 URL is s3://bucket/key)", Redact(u), ErrBadURL)
	}
	if err := s3utils.CheckValidBucketName(bucket); err != nil {
		return "", "", fmt.Errorf("%s: %w: bucket name %q: %v", Redact(u), ErrBadURL, bucket, err)
	}
	return bucket, key, nil
}

// checkURL refuses, as [ErrBadURL], a URL that no request could serve: an
// s3:// URL that s3Path refuses, or without a key where object says one
// is needed, or an http(s) URL without a host.
func checkURL(u string, object bool) error {
	if isS3(u) {
		_, key, err := s3Path(u)
		if err == nil && object && key == "" {
			err = fmt.Errorf("%s: %w: no key (an s3 URL is s3://bucket/key)", Redact(u), ErrBadURL)
		}
		return err
	}
	p, err := url.Parse(u)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its URL is unredacted
		}
		return fmt.Errorf("%s: %w: %v", Redact(u), ErrBadURL, err)
	}
	if p.Host == "" || !strings.HasPrefix(u[len(p.Scheme)+1:], "//") {
		return fmt.Errorf("%s: %w: no host (an http URL is http://host/path)", Redact(u), ErrBadURL)
	}
	return nil
}

// HasGlob reports whether s holds a glob metacharacter (*, ? or [), which
// is matched by listing. In an http(s):// URL, '?' starts the query (a
// presigned URL's signature, a token) and nothing from it on is a glob.
func HasGlob(s string) bool {
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		s, _, _ = strings.Cut(s, "?")
	}
	return strings.ContainsAny(s, "*?[")
}

// maxExpansion bounds the names one pattern's braces expand to, so a typing
// mistake ({0..999999999}) is an error rather than an allocation.
const maxExpansion = 1 << 20

// ExpandBraces expands the brace groups of pattern the way a shell (and
// WebDataset) does, left to right: {a,b,c} is each alternative in turn and
// {000..099} each number of the range, zero-padded to the width of the
// wider bound when either bound has a leading zero; a range may run down
// ({9..0}). A pattern without braces is itself. Unbalanced braces are
// [ErrBadURL].
func ExpandBraces(pattern string) ([]string, error) {
	open := strings.IndexByte(pattern, '{')
	if open < 0 {
		if strings.IndexByte(pattern, '}') >= 0 {
			return nil, fmt.Errorf("%s: %w: '}' without '{'", Redact(pattern), ErrBadURL)
		}
		return []string{pattern}, nil
	}
	depth, end := 0, -1
	for i := open; i < len(pattern) && end < 0; i++ {
		switch pattern[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				end = i
			}
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("%s: %w: '{' without '}'", Redact(pattern), ErrBadURL)
	}
	alts, err := alternatives(pattern[open+1 : end])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Redact(pattern), err)
	}
	prefix := pattern[:open]
	var out []string
	for _, a := range alts {
		// An alternative may hold braces of its own ({a{1,2},b}).
		head, err := ExpandBraces(prefix + a)
		if err != nil {
			return nil, err
		}
		tail, err := ExpandBraces(pattern[end+1:])
		if err != nil {
			return nil, err
		}
		if len(out)+len(head)*len(tail) > maxExpansion {
			return nil, fmt.Errorf("%s: %w: expands to more than %d names", Redact(pattern), ErrBadURL, maxExpansion)
		}
		for _, h := range head {
			for _, t := range tail {
				out = append(out, h+t)
			}
		}
	}
	return out, nil
}

// alternatives splits the inside of one brace group: a numeric range
// lo..hi, or comma-separated alternatives at depth 0.
func alternatives(in string) ([]string, error) {
	if lo, hi, ok := strings.Cut(in, ".."); ok && !strings.ContainsAny(in, ",{}") {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < 0 {
			return nil, fmt.Errorf("%w: {%s}: a range is {lo..hi} of numbers ≥ 0", ErrBadURL, in)
		}
		n := b - a
		if n < 0 {
			n = -n
		}
		if n >= maxExpansion {
			return nil, fmt.Errorf("%w: {%s} expands to more than %d names", ErrBadURL, in, maxExpansion)
		}
		width := 0
		if (len(lo) > 1 && lo[0] == '0') || (len(hi) > 1 && hi[0] == '0') {
			width = max(len(lo), len(hi))
		}
		step := 1
		if b < a {
			step = -1
		}
		out := make([]string, 0, n+1)
		for v := a; ; v += step {
			out = append(out, fmt.Sprintf("%0*d", width, v))
			if v == b {
				return out, nil
			}
		}
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(in); i++ {
		switch in[i] {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, in[start:i])
				start = i + 1
			}
		}
	}
	out = append(out, in[start:])
	if len(out) == 1 {
		// {x} is literal in a shell; as a shard pattern it is a mistake
		// worth naming.
		return nil, fmt.Errorf("%w: {%s} has neither a comma nor a range", ErrBadURL, in)
	}
	return out, nil
}

// redacted stands in for a secret that Redact hides.
const redacted = "REDACTED"

// secretParams are the query parameters (lower case) that carry
// credentials in the URLs people paste: presigned S3 and GCS URLs, Azure
// SAS tokens, OAuth and API tokens.
var secretParams = map[string]bool{
	"x-amz-signature": true, "x-amz-credential": true, "x-amz-security-token": true,
	"x-goog-signature": true, "x-goog-credential": true,
	"signature": true, "sig": true, "token": true, "access_token": true, "id_token": true,
	"api_key": true, "apikey": true, "key": true, "password": true, "secret": true,
	"awsaccesskeyid": true,
}

// Redact returns u with the secrets it carries replaced by REDACTED, for
// every place a URL is shown or stored (messages, errors, checkpoints,
// fingerprints): the password of its userinfo (https://user:pw@host/…
// becomes https://user:REDACTED@host/…), a userinfo without one, which may
// be a token (https://REDACTED@host/…), and the values of query parameters
// that carry credentials (X-Amz-Signature, X-Amz-Credential,
// X-Amz-Security-Token, X-Goog-Signature, sig, signature, token, key, …).
// Everything else is kept byte for byte, braces and globs included, so a
// string that is not a URL, or a URL without secrets, comes back as it is.
func Redact(u string) string {
	scheme := strings.Index(u, "://")
	if scheme < 0 {
		return u
	}
	rest := u[scheme+3:]
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	if at := strings.LastIndexByte(rest[:authEnd], '@'); at >= 0 {
		user, _, hasPw := strings.Cut(rest[:at], ":")
		if !hasPw {
			// A name alone may be a token (https://TOKEN@host/…).
			user = redacted
		}
		userinfo := user
		if hasPw {
			userinfo += ":" + redacted
		}
		rest = userinfo + rest[at:]
		authEnd = len(userinfo) + (authEnd - at)
	}
	q := strings.IndexByte(rest[authEnd:], '?')
	if q < 0 {
		return u[:scheme+3] + rest
	}
	q += authEnd
	query, frag, hasFrag := strings.Cut(rest[q+1:], "#")
	params := strings.Split(query, "&")
	for i, p := range params {
		name, _, hasValue := strings.Cut(p, "=")
		if hasValue && secretParams[strings.ToLower(name)] {
			params[i] = name + "=" + redacted
		}
	}
	out := u[:scheme+3] + rest[:q+1] + strings.Join(params, "&")
	if hasFrag {
		out += "#" + frag
	}
	return out
}

// signingParams are the query parameters (lower case), besides any
// X-Amz-* or X-Goog-* one, that sign a URL rather than name an object:
// S3's and GCS's version 2 signatures and an Azure SAS token's fields.
var signingParams = map[string]bool{
	"signature": true, "expires": true, "awsaccesskeyid": true, "googleaccessid": true,
	"sv": true, "ss": true, "srt": true, "sp": true, "se": true, "st": true, "spr": true, "sig": true,
	"sr": true, "si": true, "sdd": true, "skoid": true, "sktid": true, "skt": true, "ske": true, "sks": true, "skv": true,
}

// ObjectKey returns http(s) URL u without the query parameters that sign
// it (X-Amz-*, X-Goog-*, Signature, Expires, an Azure SAS token's) and
// without its fragment: they change each time a URL is signed, not the
// object it names, so the shard cache and index keys take this, and a
// URL signed again is the same shard. The other parameters stay, secrets
// included (?key=a and ?key=b may be two objects): ObjectKey is for
// hashing, never for showing. Any other u comes back as it is.
func ObjectKey(u string) string {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return u
	}
	u, _, _ = strings.Cut(u, "#")
	base, query, ok := strings.Cut(u, "?")
	if !ok {
		return u
	}
	var keep []string
	for _, p := range strings.Split(query, "&") {
		name, _, _ := strings.Cut(p, "=")
		n := strings.ToLower(name)
		if !strings.HasPrefix(n, "x-amz-") && !strings.HasPrefix(n, "x-goog-") && !signingParams[n] {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return base
	}
	return base + "?" + strings.Join(keep, "&")
}
