package main

// The two places where the CLI's ranks meet the spec loader's: what makes a
// spec one rank's program, and the world a spec asks for itself.

import "github.com/dagrun/dagrun/spec"

// rankOptions make the spec loader read a spec as rank's program in a
// world of world ranks: {rank} in paths, per_rank random inits.
func rankOptions(rank, world int) []spec.Option { return []spec.Option{spec.WithRank(rank, world)} }

// specWorld is the world the spec asks for itself (run.world).
func specWorld(s *spec.Spec) int { return s.Run.World }
