//go:build cgo

package cuda

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCopyParallel(t *testing.T) {
	for _, n := range []int{0, 1, 2<<20 - 1, 4<<20 + 3, 17<<20 + 5} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + i>>12)
		}
		dst := make([]byte, n)
		copyParallel(dst, src)
		assert.Equal(t, src, dst, fmt.Sprintf("%d bytes", n))
	}
}
