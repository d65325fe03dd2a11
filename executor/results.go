package executor

import (
	"encoding/binary"
	"math"

	"github.com/dagrun/dagrun/dag"
)

// Results are the contents of a plan's persistent buffers after a run
// (Execute), by buffer: bytes as the device holds them, little-endian.
type Results map[*dag.Buffer][]byte

// Float32s reads b's bytes as f32 values; nil when b is not in r. A
// trailing part of an element is left out.
func (r Results) Float32s(b *dag.Buffer) []float32 {
	data, ok := r[b]
	if !ok {
		return nil
	}
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}
