//go:build jpegturbo

package jpegturbo

import "testing"

// TestSplit3 checks the PSHUFB split of packed RGB into planes against a
// plain loop, for every length up to 100 (whole blocks of 16 and tails).
func TestSplit3(t *testing.T) {
	for n := range 100 {
		s := make([]byte, 3*n)
		for i := range s {
			s[i] = byte(i*7 + i/3)
		}
		r, g, b := make([]byte, n), make([]byte, n), make([]byte, n)
		split3(s, r, g, b)
		for x := range n {
			if r[x] != s[3*x] || g[x] != s[3*x+1] || b[x] != s[3*x+2] {
				t.Fatalf("n=%d pixel %d: %d %d %d, want %d %d %d", n, x, r[x], g[x], b[x], s[3*x], s[3*x+1], s[3*x+2])
			}
		}
	}
}
