package spec

import (
	"fmt"
	"testing"

	"github.com/goccy/go-yaml/parser"
)

func BenchmarkParseGoccy(b *testing.B) {
	for _, n := range benchSizes {
		src := genSpec(n)
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parser.ParseBytes(src, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
