package perf

import "github.com/dagrun/dagrun/dag"

// Kernels that fill their device. A kernel launched with enough threads to
// occupy every multiprocessor, or a GEMM with an output tile for nearly
// every multiprocessor, keeps the whole device busy: a second such op on another
// stream does not run beside it but shares the multiprocessors with it, so
// both finish late. The planner therefore treats the device's
// multiprocessors as one resource that filling ops hold one at a time, in
// placement and in the simulation: a pipeline of large GEMMs then stays on
// one compute stream in chunk order (the first chunk's results leave
// early), while small kernels still spread over the streams. Only the
// multiprocessors are modelled; copies use the copy engines.

// DefaultSMs is the multiprocessor count the planner assumes when
// Options.SMs is 0: an H100's.
const DefaultSMs = 132

// threadsPerSM is half the threads a multiprocessor holds at once on the
// data-centre GPUs since Volta (2048): registers and shared memory keep
// most kernels at or below half occupancy, so a kernel with a block on
// every multiprocessor and SMs x 1024 threads leaves no room for another.
const threadsPerSM = 1024

// gemmTile is the edge of the output tile a large GEMM's kernel gives
// each block (128 x 128 on cuBLASLt's usual algorithms for large shapes).
const gemmTile = 128

// Fills reports whether op, run alone on a device of sms multiprocessors,
// keeps every one of them busy.
func Fills(op *dag.Op, sms int) bool {
	if f := costOf(op.Kind); f.fills != nil {
		return f.fills(op, sms)
	}
	return false
}

func launchFills(op *dag.Op, sms int) bool {
	l := op.Launch
	if l == nil {
		return false
	}
	blocks := l.Grid.Count()
	if blocks < sms {
		return false
	}
	perBlock := l.Block.Count()
	if perBlock < 1 {
		return false
	}
	// blocks * perBlock without overflow: both are below MaxInt.
	return blocks >= (sms*threadsPerSM+perBlock-1)/perBlock
}

func gemmFills(op *dag.Op, sms int) bool {
	g := op.Gemm
	if g == nil {
		return false
	}
	tiles := func(n int64) int64 { return (n + gemmTile - 1) / gemmTile }
	m, n := tiles(g.M), tiles(g.N)
	// A GEMM whose tiles leave at most an eighth of the multiprocessors
	// idle fills the device too: the MLP's down GEMM at T = 512 (4 x 32
	// tiles on 132 SMs) ran beside the next chunk's up GEMM on a second
	// stream on the H100, and the block's replay took 1.86-1.89 ms; on one
	// compute stream it takes 1.82.
	s := int64(sms) - int64(sms)/8
	if m <= 0 || n <= 0 || s <= 0 {
		return false
	}
	if m >= s || n >= s {
		return true
	}
	per := m * n // both below sms: no overflow
	return per >= s || max(g.Batch, 1) >= (s+per-1)/per
}
