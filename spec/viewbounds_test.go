package spec

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestViewBoundsToTheByte: a view may end at its buffer's last byte and
// not one past it, and may not be empty, in both forms of a view; the
// loader says so at the view, before the graph is built.
func TestViewBoundsToTheByte(t *testing.T) {
	head := "buffers:\n  x: {dtype: u8, count: 13, placement: pinned}\nops:\n  - fill: {buffer: "
	for _, c := range []struct {
		name, view string
		want       []string
	}{
		{"text, whole", `"x[0:13]", value: 1}`, nil},
		{"text, last byte", `"x[12:13]", value: 1}`, nil},
		{"text, a byte past", `"x[0:14]", value: 1}`, []string{`4:20: ops[0] fill buffer range [0:14) is out of range (x holds bytes [0:13))`}},
		{"text, a byte past the last", `"x[13:14]", value: 1}`, []string{`4:20: ops[0] fill buffer range [13:14) is out of range (x holds bytes [0:13))`}},
		{"text, empty", `"x[4:4]", value: 1}`, []string{`4:20: ops[0] fill buffer range [4:4) is empty (x holds bytes [0:13))`}},
		{"mapping, last byte", `{buffer: x, offset: 12, size: 1}, value: 1}`, nil},
		{"mapping, a byte past", `{buffer: x, offset: 12, size: 2}, value: 1}`, []string{`4:20: ops[0] fill buffer range [12:14) is out of range (x holds bytes [0:13))`}},
		{"mapping, empty", `{buffer: x, offset: 12, size: 0}, value: 1}`, []string{`4:20: ops[0] fill buffer range [12:12) is empty (x holds bytes [0:13))`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, errLines(t, head+c.view+"\n"))
		})
	}
}
