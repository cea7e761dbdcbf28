package feed

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The loader's half of the protocol, for the tests' loader (client, in
// serve_test.go): pipe reads these messages and writes the others.

func (m startMsg) append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, msgStart)
	dst = binary.LittleEndian.AppendUint32(dst, m.token)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(m.epoch))
	return binary.LittleEndian.AppendUint64(dst, uint64(m.first))
}

func (m releaseMsg) append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, msgRelease)
	dst = binary.LittleEndian.AppendUint32(dst, m.slab)
	return binary.LittleEndian.AppendUint64(dst, m.seq)
}

func appendStop(dst []byte) []byte {
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(dst, msgStop), 0)
}

// atLeast checks that a message pipe sent has its fixed part, n bytes
// (exactly n unless more follows).
func atLeast(b []byte, name string, n int, more bool) error {
	if len(b) == n || more && len(b) > n {
		return nil
	}
	return fmt.Errorf("a %s message of %d bytes (it has %d)", name, len(b), n)
}

func parseBatch(b []byte) (batchMsg, error) {
	if err := atLeast(b, "batch", 56, false); err != nil {
		return batchMsg{}, err
	}
	u := func(at int) uint64 { return binary.LittleEndian.Uint64(b[at:]) }
	return batchMsg{slab: binary.LittleEndian.Uint32(b[4:]), token: binary.LittleEndian.Uint32(b[8:]), seq: u(16),
		epoch: int64(u(24)), index: int64(u(32)), n: int64(u(40)), slabWait: math.Float64frombits(u(48))}, nil
}

// parseEnd returns an end message and its JSON.
func parseEnd(b []byte) (endMsg, []byte, error) {
	if err := atLeast(b, "end", 16, true); err != nil {
		return endMsg{}, nil, err
	}
	return endMsg{token: binary.LittleEndian.Uint32(b[4:]), epoch: int64(binary.LittleEndian.Uint64(b[8:]))}, b[16:], nil
}

// parseHello returns a hello message's version and JSON.
func parseHello(b []byte) (uint32, []byte, error) {
	if err := atLeast(b, "hello", 8, true); err != nil {
		return 0, nil, err
	}
	return binary.LittleEndian.Uint32(b[4:]), b[8:], nil
}

// parseError returns an error message's text.
func parseError(b []byte) (string, error) {
	if err := atLeast(b, "error", 8, true); err != nil {
		return "", err
	}
	return string(b[8:]), nil
}

// parseHeader reads the ring's header: its version and layout (all but
// Size, which the header does not say).
func parseHeader(b []byte) (version uint32, l Layout, err error) {
	if len(b) < 56 || string(b[:8]) != Magic {
		return 0, Layout{}, fmt.Errorf("not a ring header: % x", b[:min(len(b), 16)])
	}
	u := func(at int) int64 { return int64(binary.LittleEndian.Uint64(b[at:])) }
	l = Layout{Slabs: int(binary.LittleEndian.Uint32(b[12:])), Stride: u(16), Offset: u(24), Rows: int(u(32)),
		SampleBytes: int(u(40)), Labels: u(48)}
	return binary.LittleEndian.Uint32(b[8:]), l, nil
}

// golden is a block of testdata/messages.txt.
type golden struct {
	kind, name string            // "message" or "header", and its name
	fields     []string          // field names in order
	kinds      map[string]string // field → kind
	vals       map[string]string // field → example
	hex        []byte
	keys       map[string][]string // object → JSON keys
}

func (g *golden) u(t *testing.T, f string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(g.vals[f], 10, 64)
	if err != nil {
		t.Fatalf("%s %s: field %s: %v", g.kind, g.name, f, err)
	}
	return v
}

func (g *golden) i(t *testing.T, f string) int64 { return int64(g.u(t, f)) }

func (g *golden) f(t *testing.T, f string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(g.vals[f], 64)
	if err != nil {
		t.Fatalf("%s %s: field %s: %v", g.kind, g.name, f, err)
	}
	return v
}

// readGolden parses testdata/messages.txt: the protocol version and the
// blocks in order.
func readGolden(t *testing.T) (int, []*golden) {
	t.Helper()
	f, err := os.Open("testdata/messages.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	version := -1
	var blocks []*golden
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		var g *golden
		if len(blocks) > 0 {
			g = blocks[len(blocks)-1]
		}
		switch w := strings.Fields(rest); {
		case word == "protocol" && len(w) == 1:
			version, err = strconv.Atoi(w[0])
		case (word == "message" && len(w) == 2) || (word == "header" && len(w) == 1):
			blocks = append(blocks, &golden{kind: word, name: w[0], kinds: map[string]string{}, vals: map[string]string{},
				keys: map[string][]string{}})
		case g != nil && word == "field" && len(w) >= 3:
			name, after, _ := strings.Cut(rest, " ")
			kind, val, _ := strings.Cut(strings.TrimSpace(after), " ")
			val = strings.TrimSpace(val)
			g.fields = append(g.fields, name)
			g.kinds[name], g.vals[name] = kind, val
		case g != nil && word == "hex":
			g.hex, err = hex.DecodeString(strings.Join(w, ""))
		case g != nil && word == "keys" && len(w) >= 2:
			g.keys[w[0]] = w[1:]
		default:
			t.Fatalf("testdata/messages.txt:%d: cannot read %q", n, line)
		}
		if err != nil {
			t.Fatalf("testdata/messages.txt:%d: %v", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return version, blocks
}

// jsonKeys is the keys of the JSON object v marshals to, in order.
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(m))
}

// TestGoldenMessages: every message and the ring's header, as
// testdata/messages.txt gives them, is what this side writes and reads,
// field for field and byte for byte; the Python tests check their side
// against the same file.
func TestGoldenMessages(t *testing.T) {
	version, blocks := readGolden(t)
	if version != Version {
		t.Errorf("testdata/messages.txt is of protocol %d, this package speaks %d", version, Version)
	}
	types := map[string]uint32{"hello": msgHello, "start": msgStart, "batch": msgBatch, "release": msgRelease,
		"end": msgEnd, "stop": msgStop, "error": msgError}
	seen := map[string]bool{}
	for _, g := range blocks {
		seen[g.name] = true
		if want, ok := types[g.name]; g.kind == "message" && (!ok || g.u(t, "type") != uint64(want) || g.fields[0] != "type") {
			t.Errorf("message %s: type %s first, this package's is %d", g.name, g.vals["type"], want)
			continue
		}
		// enc is this side's bytes for the example; dec checks this side's
		// reading of the golden bytes.
		var enc []byte
		var dec error
		switch g.name {
		case "hello":
			enc = appendHello(nil, []byte(g.vals["json"]))
			v, js, err := parseHello(g.hex)
			dec = errorIf(err, v != uint32(g.u(t, "version")) || string(js) != g.vals["json"], "version %d, JSON %s", v, js)
			for _, c := range []struct {
				name string
				v    any
			}{{"hello", Hello{Fields: &Fields{}}}, {"ring", Layout{}}, {"fields", Fields{}}, {"region", Region{}}} {
				if got := jsonKeys(t, c.v); !slices.Equal(got, slices.Sorted(slices.Values(g.keys[c.name]))) {
					t.Errorf("%s's JSON keys %v, testdata says %v", c.name, got, g.keys[c.name])
				}
			}
			if got := jsonKeys(t, Hello{}); slices.Contains(got, "fields") {
				t.Errorf("the hello of a pipeline without fields has the key fields")
			}
		case "start":
			m := startMsg{token: uint32(g.u(t, "token")), epoch: g.i(t, "epoch"), first: g.i(t, "first")}
			enc = m.append(nil)
			got, err := parseStart(g.hex)
			dec = errorIf(err, got != m, "%+v", got)
		case "batch":
			m := batchMsg{slab: uint32(g.u(t, "slab")), token: uint32(g.u(t, "token")), seq: g.u(t, "seq"),
				epoch: g.i(t, "epoch"), index: g.i(t, "index"), n: g.i(t, "n"), slabWait: g.f(t, "slab_wait")}
			enc = m.append(nil)
			got, err := parseBatch(g.hex)
			dec = errorIf(err, got != m, "%+v", got)
		case "release":
			m := releaseMsg{slab: uint32(g.u(t, "slab")), seq: g.u(t, "seq")}
			enc = m.append(nil)
			got, err := parseRelease(g.hex)
			dec = errorIf(err, got != m, "%+v", got)
		case "end":
			m := endMsg{token: uint32(g.u(t, "token")), epoch: g.i(t, "epoch")}
			enc = append(m.append(nil), g.vals["json"]...)
			got, js, err := parseEnd(g.hex)
			dec = errorIf(err, got != m || string(js) != g.vals["json"], "%+v %s", got, js)
		case "stop":
			enc = appendStop(nil)
			dec = parseStop(g.hex)
		case "error":
			enc = appendError(nil, g.vals["text"])
			text, err := parseError(g.hex)
			dec = errorIf(err, text != g.vals["text"], "%q", text)
		case "ring":
			rows, sb := int(g.u(t, "rows")), int(g.u(t, "sample_bytes"))
			l := layout(int(g.u(t, "slabs")), rows, sb, rows*sb)
			enc = appendHeader(nil, l)
			v, got, err := parseHeader(g.hex)
			l.Size = 0
			dec = errorIf(err, v != uint32(g.u(t, "version")) || got != l, "version %d, %+v; layout() gives %+v", v, got, l)
		default:
			t.Errorf("%s %s: not a message of this package", g.kind, g.name)
			continue
		}
		if !bytes.Equal(enc, g.hex) {
			t.Errorf("%s %s: this side writes\n% x\ntestdata says\n% x", g.kind, g.name, enc, g.hex)
		}
		if dec != nil {
			t.Errorf("%s %s: reading testdata's bytes: %v", g.kind, g.name, dec)
		}
	}
	for name := range types {
		if !seen[name] {
			t.Errorf("message %s is missing from testdata/messages.txt", name)
		}
	}
}

// errorIf is err, or where bad an error of format and args.
func errorIf(err error, bad bool, format string, args ...any) error {
	if err == nil && bad {
		return fmt.Errorf("read as "+format, args...)
	}
	return err
}

// TestMessageSizes: pipe refuses a message it reads whose size is not its
// type's.
func TestMessageSizes(t *testing.T) {
	good := map[string][]byte{"start": startMsg{token: 1}.append(nil), "release": releaseMsg{slab: 1, seq: 1}.append(nil),
		"stop": appendStop(nil)}
	parse := map[string]func([]byte) error{
		"start":   func(b []byte) error { _, err := parseStart(b); return err },
		"release": func(b []byte) error { _, err := parseRelease(b); return err },
		"stop":    parseStop,
	}
	for name, b := range good {
		if err := parse[name](b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clone(b), 0)} {
			if err := parse[name](bad); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s of %d bytes: %v", name, len(bad), err)
			}
		}
	}
}
