package main

import (
	"fmt"
	"testing"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// BenchmarkVerifyCost measures what verifying every plan costs dagrun run
// and dagrun plan: planning a graph (the floor) and verifying its plan,
// in the same run.
func BenchmarkVerifyCost(b *testing.B) {
	for _, ops := range []int{100_000, 1_000_000} {
		g := dagtest.Shape(ops, 8, 1)
		p, err := planner.New(g, planner.Streams(8))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("ops=%d/plan", ops), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := planner.New(g, planner.Streams(8)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("ops=%d/verify", ops), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := verify.Verify(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
