package dag

import (
	"fmt"
	"math"
	"testing"
)

// TestAppendersMatchFmt: the appenders the plan's text uses write what the
// fmt-based formats they replaced wrote.
func TestAppendersMatchFmt(t *testing.T) {
	for _, n := range []int64{0, 1, 1023, 1024, 1536, 1 << 20, 5<<30 + 123, math.MaxInt64, -5} {
		want := fmt.Sprintf("%d B", n)
		if n >= 1024 {
			f, u := float64(n)/1024, 0
			for f >= 1024 && u < 5 {
				f /= 1024
				u++
			}
			want = fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[u])
		}
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for _, d := range []Dim3{{}, {1, 1, 1}, {4, 64, 1}, {-1, 0, math.MaxInt}} {
		if got, want := d.String(), fmt.Sprintf("%dx%dx%d", d.X, d.Y, d.Z); got != want {
			t.Errorf("Dim3 %v = %q, want %q", d, got, want)
		}
	}
	buf := &Buffer{Name: "h_in", Size: 4096}
	for _, v := range []View{{}, {Buf: buf, Size: 4096}, {Buf: buf, Offset: 1024, Size: 1024}, {Buf: buf, Size: 100}} {
		want := "<nil view>"
		switch {
		case v.Buf == nil:
		case v.Offset == 0 && v.Size == v.Buf.Size:
			want = v.Buf.Name
		default:
			want = fmt.Sprintf("%s[%d:%d]", v.Buf.Name, v.Offset, v.End())
		}
		if got := v.String(); got != want {
			t.Errorf("View %+v = %q, want %q", v, got, want)
		}
	}
}
