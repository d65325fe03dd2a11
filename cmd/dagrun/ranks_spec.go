package main

// The two places where the CLI's ranks meet the spec loader's: what makes a
// spec one rank's program, and the world a spec asks for itself.

import "github.com/dagrun/dagrun/spec"

// rankOptions are the loader options that make a spec rank's program in a
// world of world ranks.
//
// MERGE (branch specx): this build's spec package has no ranks yet, so a
// rank's program is the spec as it is (no {rank} in paths, no per_rank
// random inits, no collective keys). With specx merged, replace the body
// with:
//
//	return []spec.Option{spec.WithRank(rank, world)}
func rankOptions(rank, world int) []spec.Option { return nil }

// specWorld is the world the spec asks for itself.
//
// MERGE (branch specx): with run.world in the loader, return s.Run.World.
func specWorld(s *spec.Spec) int { return 1 }
