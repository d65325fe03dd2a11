package dag

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
)

// InitialBytes returns b's contents before a run, made from b.Init. Every
// backend starts from exactly these bytes.
func (b *Buffer) InitialBytes() []byte {
	out := make([]byte, b.Size)
	b.WriteInitial(out)
	return out
}

// WriteInitial writes b's contents before a run into out (b.Size bytes),
// so a backend can make them in place, in pinned memory for example.
func (b *Buffer) WriteInitial(out []byte) {
	switch b.Init.Kind {
	case InitBytes:
		copy(out, b.Init.Data)
	case InitValue:
		FillElems(out, b.DType, b.Init.Value)
	case InitRandom:
		writeRandom(out, b.DType, b.Init.Seed)
	default:
		clear(out)
	}
}

// randomChunkMin is the least a goroutine of writeRandom makes: about
// 0.1 ms of u8 draws, so that starting it costs little beside its work.
const randomChunkMin = 256 << 10

// writeRandom fills out with dt elements drawn from SplitMix64 seeded with
// seed. Large buffers are made in parts side by side: a part that starts
// at element k starts from the generator's state after k draws (its
// counter form), so the bytes are those of one sequential pass.
func writeRandom(out []byte, dt DType, seed uint64) {
	e := int(dt.Size())
	elems := len(out) / e
	workers := min(runtime.GOMAXPROCS(0), len(out)/randomChunkMin)
	if workers <= 1 {
		writeRandomFrom(out, dt, seed)
		return
	}
	per := (elems + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < elems; lo += per {
		hi := min(lo+per, elems)
		end := hi * e
		if hi == elems {
			end = len(out) // the tail past the last whole element, which stays as it is
		}
		part, state := out[lo*e:end], seed+uint64(lo)*splitmixGamma
		wg.Go(func() { writeRandomFrom(part, dt, state) })
	}
	wg.Wait()
}

// writeRandomFrom fills out with dt elements drawn from SplitMix64 in
// state state; one loop per dtype keeps the switch out of the element loop.
func writeRandomFrom(out []byte, dt DType, state uint64) {
	r := splitmix{state: state}
	le := binary.LittleEndian
	switch dt {
	case U8:
		for i := range out {
			out[i] = byte(r.next())
		}
	case I32:
		for i := 0; i+4 <= len(out); i += 4 {
			le.PutUint32(out[i:], uint32(r.next()&0xff))
		}
	case I64:
		for i := 0; i+8 <= len(out); i += 8 {
			le.PutUint64(out[i:], r.next()&0xff)
		}
	case F32:
		for i := 0; i+4 <= len(out); i += 4 {
			le.PutUint32(out[i:], math.Float32bits(float32(r.next()>>40)/(1<<24)))
		}
	case F64:
		for i := 0; i+8 <= len(out); i += 8 {
			le.PutUint64(out[i:], math.Float64bits(float64(r.next()>>11)/(1<<53)))
		}
	case F16: // multiples of 2^-11: exact in binary16
		for i := 0; i+2 <= len(out); i += 2 {
			le.PutUint16(out[i:], F16FromFloat32(float32(r.next()>>53)/(1<<11)))
		}
	case BF16: // multiples of 2^-8: exact in bfloat16
		for i := 0; i+2 <= len(out); i += 2 {
			le.PutUint16(out[i:], BF16FromFloat32(float32(r.next()>>56)/(1<<8)))
		}
	}
}

// FillElems sets every whole element of mem, read as dt, to v. It writes
// one element and then doubles the written part, so large fills run at
// memmove speed.
func FillElems(mem []byte, dt DType, v float64) {
	pat := ElemBytes(dt, v)
	n := len(mem) - len(mem)%len(pat)
	if n == 0 {
		return
	}
	done := copy(mem[:n], pat)
	for done < n {
		done += copy(mem[done:n], mem[:done])
	}
}

// ElemBytes is the little-endian encoding of v as one element of dt.
func ElemBytes(dt DType, v float64) []byte {
	out := make([]byte, dt.Size())
	switch dt {
	case U8:
		out[0] = byte(int64(v))
	case I32:
		binary.LittleEndian.PutUint32(out, uint32(int32(v)))
	case I64:
		binary.LittleEndian.PutUint64(out, uint64(int64(v)))
	case F32:
		binary.LittleEndian.PutUint32(out, math.Float32bits(float32(v)))
	case F64:
		binary.LittleEndian.PutUint64(out, math.Float64bits(v))
	case F16:
		binary.LittleEndian.PutUint16(out, F16FromFloat64(v))
	case BF16:
		binary.LittleEndian.PutUint16(out, BF16FromFloat64(v))
	}
	return out
}

// splitmix is SplitMix64: tiny, fast and identical everywhere.
type splitmix struct{ state uint64 }

// splitmixGamma is SplitMix64's increment: after k draws the state is
// seed + k*splitmixGamma.
const splitmixGamma = 0x9e3779b97f4a7c15

func (s *splitmix) next() uint64 {
	s.state += splitmixGamma
	return splitmixMix(s.state)
}

// splitmixMix is SplitMix64's finaliser.
func splitmixMix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// splitmixAt is the i-th draw (from 0) of SplitMix64 seeded with seed,
// without the i before it: the counter form that lets a device make
// element i of a random buffer on its own (cuda's dagrun_init_random).
func splitmixAt(seed, i uint64) uint64 {
	return splitmixMix(seed + (i+1)*splitmixGamma)
}
