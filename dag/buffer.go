package dag

import (
	"fmt"
	"strconv"
)

// Placement says where a buffer's memory lives.
type Placement uint8

const (
	Device   Placement = iota // memory of a GPU (the CPU backend stands in for it)
	Pinned                    // page-locked host memory: copies to and from it are asynchronous
	Pageable                  // ordinary host memory: CUDA copies it synchronously
)

func (p Placement) String() string {
	switch p {
	case Device:
		return "device"
	case Pinned:
		return "pinned"
	case Pageable:
		return "pageable"
	}
	return fmt.Sprintf("Placement(%d)", uint8(p))
}

// Host reports whether memory of this placement is addressable by the host.
func (p Placement) Host() bool { return p != Device }

// DType is the element type of a buffer; it fixes how initial contents,
// fills and checksums interpret its bytes.
type DType uint8

const (
	U8   DType = iota // unsigned bytes
	I32               // 32-bit signed integers
	I64               // 64-bit signed integers
	F32               // IEEE 754 binary32
	F64               // IEEE 754 binary64
	F16               // IEEE 754 binary16
	BF16              // bfloat16: the top half of an f32

	numDTypes // keep last
)

var dtypeNames = [numDTypes]string{U8: "u8", I32: "i32", I64: "i64", F32: "f32", F64: "f64", F16: "f16", BF16: "bf16"}

// DTypes lists every element type, in order.
func DTypes() []DType {
	ds := make([]DType, numDTypes)
	for i := range ds {
		ds[i] = DType(i)
	}
	return ds
}

// Valid reports whether d is an element type this package defines.
func (d DType) Valid() bool { return d < numDTypes }

// Float reports whether d is a floating-point type.
func (d DType) Float() bool { return d == F32 || d == F64 || d == F16 || d == BF16 }

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the size in bytes of one element.
func (d DType) Size() int64 {
	switch d {
	case U8:
		return 1
	case F16, BF16:
		return 2
	case I32, F32:
		return 4
	default:
		return 8
	}
}

// ParseDType returns the DType named s (u8, i32, i64, f32, f64, f16, bf16).
func ParseDType(s string) (DType, bool) {
	for i, n := range dtypeNames {
		if n == s {
			return DType(i), true
		}
	}
	return 0, false
}

// InitKind says how a buffer's initial contents are made.
type InitKind uint8

const (
	InitNone   InitKind = iota // no initial contents: see Buffer.Uninitialized
	InitZeros                  // all bytes zero
	InitValue                  // every element equals Init.Value
	InitRandom                 // seeded uniform values in [0, 1) (integers: [0, 256)), exact in the dtype
	InitBytes                  // exactly Init.Data
)

// Init describes a buffer's contents before the run starts.
type Init struct {
	Kind  InitKind
	Value float64
	Seed  uint64
	Data  []byte
}

// Buffer is a range of memory that operations read and write.
//
// A persistent buffer (the default) is allocated and initialised before a
// run and stays readable after it. A temporary buffer lives inside the run:
// it is allocated on a stream before its first use and freed on a stream
// after its last, either by explicit Alloc and Free operations or, when the
// graph has none for it, automatically.
type Buffer struct {
	ID        int
	Name      string
	Size      int64 // bytes
	Placement Placement
	Device    int // the device of Device memory; for host memory, the device it is pinned for
	DType     DType
	Temporary bool
	Init      Init
	// Uninitialized declares that the buffer's contents before the run
	// (or, for a temporary, after its alloc) are deliberately undefined:
	// the program writes them from outside (Session.Write, Rebind) or
	// never reads them. Without it, and without an Init, Build refuses an
	// op that reads bytes no earlier op wrote.
	Uninitialized bool

	decl int32
	// count is the element count an Array declared (0 for a Buffer of
	// bytes), and of the element type it declared, so that Build refuses
	// an option that changes either.
	array   bool
	initErr string // why a Data option could not encode its values
	dataOf  *DType // the element type a Data option encoded for
	count   int64
	of      DType // declaration position, for ErrorList's order
}

// All is a view of every byte of b (of nothing for a nil b, which Build
// refuses).
func (b *Buffer) All() View {
	if b == nil {
		return View{}
	}
	return View{Buf: b, Size: b.Size}
}

// Slice is the view of size bytes of b starting at offset.
func (b *Buffer) Slice(offset, size int64) View { return View{Buf: b, Offset: offset, Size: size} }

// Elements is the view of count elements of b's DType starting at element
// first: Elements(256, 256) of an f32 buffer is Slice(1024, 1024). A range
// whose bytes do not fit an int64 is a view Build refuses.
func (b *Buffer) Elements(first, count int64) View {
	if b == nil {
		return View{}
	}
	off, okOff := mulInt64(first, b.DType.Size())
	size, okSize := mulInt64(count, b.DType.Size())
	if !okOff || !okSize {
		return View{Buf: b, Offset: -1}
	}
	return View{Buf: b, Offset: off, Size: size}
}

// Elems is the number of whole elements of b's DType it holds.
func (b *Buffer) Elems() int64 { return b.Size / b.DType.Size() }

func (b *Buffer) String() string { return b.Name }

// View is a byte range of a buffer.
type View struct {
	Buf    *Buffer
	Offset int64
	Size   int64
}

// End is the offset one past the view's last byte (saturated, never
// wrapped, for views Build would refuse).
func (v View) End() int64 { return AddSat(v.Offset, v.Size) }

// Overlaps reports whether v and w share a byte.
func (v View) Overlaps(w View) bool {
	return v.Buf == w.Buf && v.Offset < w.End() && w.Offset < v.End()
}

func (v View) String() string {
	if v.Buf != nil && v.Offset == 0 && v.Size == v.Buf.Size {
		return v.Buf.Name
	}
	return string(v.Append(nil))
}

// Append appends v.String() to b.
func (v View) Append(b []byte) []byte {
	if v.Buf == nil {
		return append(b, "<nil view>"...)
	}
	b = append(b, v.Buf.Name...)
	if v.Offset == 0 && v.Size == v.Buf.Size {
		return b
	}
	b = append(b, '[')
	b = strconv.AppendInt(b, v.Offset, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, v.End(), 10)
	return append(b, ']')
}

// Mode says how an operation uses a view.
type Mode uint8

const (
	Read      Mode = 1            // the op reads the view
	Write     Mode = 2            // the op writes the view
	ReadWrite      = Read | Write // the op reads and writes the view
)

func (m Mode) String() string {
	switch m {
	case Read:
		return "in"
	case Write:
		return "out"
	case ReadWrite:
		return "inout"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Reads reports whether m includes reading.
func (m Mode) Reads() bool { return m&Read != 0 }

// Writes reports whether m includes writing.
func (m Mode) Writes() bool { return m&Write != 0 }

// Access is one use of a view by an operation. Among the options of a
// Host or Task op, an Access adds a view to the op.
type Access struct {
	View
	Mode Mode
}

// In, Out and InOut make accesses to a view.
func In(v View) Access { return Access{v, Read} }

// Out is an access that writes v.
func Out(v View) Access { return Access{v, Write} }

// InOut is an access that reads and writes v.
func InOut(v View) Access { return Access{v, ReadWrite} }
