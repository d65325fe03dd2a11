package executor

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// Results are the contents of a plan's persistent buffers after a run
// (Execute), by buffer: bytes as the device holds them, little-endian.
// Values reads them as the Go type of each buffer's elements.
type Results map[*dag.Buffer][]byte

// Float32s reads b's elements as float32 (f16 and bf16 converted); nil
// when b is not in r or its elements are not f32, f16 or bf16 (use Values
// for those, which says why).
func (r Results) Float32s(b *dag.Buffer) []float32 {
	v, err := Values[float32](r, b)
	if err != nil {
		return nil
	}
	return v
}

// Values returns b's elements after the run as T, the Go type of b's
// element type (float32 for f32, f16 and bf16; see dag.Element). Asking
// for another type is an error wrapping a *dag.DTypeError, as is a buffer
// that is not in r.
func Values[T dag.Element](r Results, b *dag.Buffer) ([]T, error) {
	if b == nil {
		return nil, fmt.Errorf("executor: Values: no buffer")
	}
	data, ok := r[b]
	if !ok {
		return nil, fmt.Errorf("executor: Values: buffer %q is not in the results (temporary, or of another graph)", b.Name)
	}
	v, err := dag.DecodeValues[T](b.DType, data)
	if err != nil {
		return nil, fmt.Errorf("executor: Values of %q: %w", b.Name, err)
	}
	return v, nil
}

// ReadValues is Session.Read with the bytes decoded as T, the Go type of
// b's element type; another type is an error wrapping a *dag.DTypeError.
func ReadValues[T dag.Element](s *Session, b *dag.Buffer) ([]T, error) {
	if b == nil {
		return nil, fmt.Errorf("executor: ReadValues: no buffer")
	}
	var z T
	if _, err := dag.EncodeValues(b.DType, []T{z}); err != nil {
		return nil, fmt.Errorf("executor: ReadValues of %q: %w", b.Name, err)
	}
	data, err := s.Read(b)
	if err != nil {
		return nil, err
	}
	return dag.DecodeValues[T](b.DType, data)
}

// WriteValues is Session.Write of vals, encoded in b's element type: T
// must be its Go type (an error wrapping a *dag.DTypeError otherwise), and
// vals must fill b.
func WriteValues[T dag.Element](s *Session, b *dag.Buffer, vals []T) error {
	if b == nil {
		return fmt.Errorf("executor: WriteValues: no buffer")
	}
	data, err := dag.EncodeValues(b.DType, vals)
	if err != nil {
		return fmt.Errorf("executor: WriteValues to %q: %w", b.Name, err)
	}
	if int64(len(data)) != b.Size {
		return fmt.Errorf("executor: WriteValues to %q: %d values of %s are %d bytes, the buffer %d (give %d values)",
			b.Name, len(vals), b.DType, len(data), b.Size, b.Size/b.DType.Size())
	}
	return s.Write(b, data)
}
