package remote

import (
	"errors"
	"fmt"
	"net/url"
	"testing"
)

// TestHTTP2ErrorsTransient: the HTTP/2 errors net/http gives for a server
// that went away, a lost connection or a stream the server reset for its
// own trouble are retried; a reset that says the sides disagree is not.
// The texts are net/http's (its http2 types are not exported).
func TestHTTP2ErrorsTransient(t *testing.T) {
	for _, c := range []struct {
		msg  string
		pass bool
	}{
		{`http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=""`, true},
		{"http2: client connection lost", true},
		{"http2: client conn is closed", true},
		{"stream error: stream ID 3; INTERNAL_ERROR; received from peer", true},
		{"stream error: stream ID 5; REFUSED_STREAM", true},
		{"stream error: stream ID 7; ENHANCE_YOUR_CALM; received from peer", true},
		{"stream error: stream ID 3; PROTOCOL_ERROR; received from peer", false},
		{"stream error: stream ID 3; HTTP_1_1_REQUIRED", false},
		{"http2: invalid header field value", false},
	} {
		err := &url.Error{Op: "Get", URL: "https://host/a.tar", Err: errors.New(c.msg)}
		if got := transient(fmt.Errorf("read: %w", err)); got != c.pass {
			t.Errorf("%q: transient %v, want %v", c.msg, got, c.pass)
		}
	}
}
