// Package spectest makes spec files for tests and benchmarks.
package spectest

import (
	"bytes"
	"fmt"
	"strconv"
)

// Gen writes a valid spec of about n ops in the style of the examples:
// a ring of device buffers, copies in and out of pinned host memory,
// kernel launches in flow style and block style, fills and host steps.
func Gen(n int) []byte {
	var b bytes.Buffer
	const nbuf = 64
	b.WriteString("run:\n  streams: 4\nbuffers:\n  h_in: {size: 64 KiB, placement: pinned, init: {random: 7}}\n  h_out: {size: 64 KiB, placement: pinned}\n")
	for i := range nbuf {
		fmt.Fprintf(&b, "  d%d: {dtype: f32, count: 256, init: zeros}\n", i)
	}
	b.WriteString("ops:\n")
	for i := range n {
		d := "d" + strconv.Itoa(i%nbuf)
		off := (i % 64) * 1024
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "  - copy: {from: \"h_in[%d:%d]\", to: %s}\n    name: up%d\n", off, off+1024, d, i)
		case 1:
			fmt.Fprintf(&b, "  - {launch: scale, grid: 4, block: 64, args: {x: %s, alpha: 2.0}, cost: 5us}\n", d)
		case 2:
			fmt.Fprintf(&b, "  - launch: axpy\n    args: {y: %s, x: d%d, alpha: 0.5}\n", d, (i+1)%nbuf)
		case 3:
			fmt.Fprintf(&b, "  - fill: {buffer: \"%s[0:512]\", value: 1}\n", d)
		case 4:
			fmt.Fprintf(&b, "  - copy: {from: %s, to: \"h_out[%d:%d]\"}\n", d, off, off+1024)
		}
	}
	b.WriteString("outputs: [h_out]\n")
	return b.Bytes()
}
