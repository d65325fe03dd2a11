package cpu

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/dagrun/dagrun/dag"
)

// A product in row tiles of one row each is the product whole, with A
// transposed or not.
func TestGemmRowTilesMatchWholeProduct(t *testing.T) {
	const m, n, k = 7, 5, 3
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = r.Float32() - 0.5
		}
		return x
	}
	for _, trans := range []bool{false, true} {
		la := dag.GemmMatrix{Rows: m, Cols: k, LD: k}
		tA := blas.NoTrans
		if trans {
			la, tA = dag.GemmMatrix{Rows: k, Cols: m, LD: m + 2}, blas.Trans // a gap after each row
		}
		lb, lc := dag.GemmMatrix{Rows: k, Cols: n, LD: n}, dag.GemmMatrix{Rows: m, Cols: n, LD: n}
		a, b := fill(int(la.Rows*la.LD)), fill(k*n)
		want, got := make([]float32, m*n), make([]float32, m*n)
		gonum.Implementation{}.Sgemm(tA, blas.NoTrans, m, n, k, 1, a, int(la.LD), b, n, 0, want, n)
		var stop atomic.Bool
		assert.True(t, sgemmTiles(&stop, gonum.Implementation{}, tA, blas.NoTrans, m, n, k, 1, 0, a, b, got, la, lb, lc, trans, 1))
		assert.InDeltaSlice(t, want, got, 1e-6, "trans %v", trans)
	}
}

// A set stop ends a product at the next tile.
func TestGemmRowTilesStop(t *testing.T) {
	var stop atomic.Bool
	tiles := 0
	done := rowTiles(&stop, 10, 4, 4, 1, func(r0, r1 int) {
		tiles++
		if tiles == 3 {
			stop.Store(true)
		}
	})
	assert.False(t, done)
	assert.Equal(t, 3, tiles)
}
