package spec

import (
	"fmt"
	"testing"

	"github.com/goccy/go-yaml/parser"
)

// BenchmarkParseGoccy is the parser spec used before, on the same specs,
// for the comparison in BENCHMARKS.md.
func BenchmarkParseGoccy(b *testing.B) {
	for _, n := range benchSizes {
		src := genSpec(n)
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			loop(b, func() {
				if _, err := parser.ParseBytes(src, 0); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
