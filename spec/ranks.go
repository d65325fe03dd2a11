package spec

import (
	"fmt"
	"strings"
)

// checkRank settles the world (WithRank's, else run.world's) and checks
// the rank against it, before anything that depends on them is read.
func (l *loader) checkRank(top *node) {
	run := &l.spec.Run
	if l.worldOpt != 0 {
		if l.worldOpt < 1 || l.worldOpt > MaxWorld {
			l.errorf(top, fmt.Sprintf("a world has 1 to %d ranks", MaxWorld), "a world of %d ranks was asked for", l.worldOpt)
			return
		}
		run.World = l.worldOpt
	}
	if r := l.spec.Rank; r < 0 || r >= run.World {
		n := l.worldNode
		if n == nil {
			n = top
		}
		l.errorf(n, fmt.Sprintf("ranks are numbered 0 to %d", run.World-1), "rank %d is not in a world of %d", r, run.World)
		l.spec.Rank = 0
	}
}

// placedInWorld refuses an explicit device (of a buffer or an op) when the
// spec runs as several ranks: each rank's buffers live on its own device.
func (l *loader) placedInWorld(n *node, what subject) bool {
	if l.spec.Run.World <= 1 {
		return true
	}
	l.errorf(n, "leave device: out (each rank runs on its own device), or drop run.world to place work on several devices of one process",
		"%s has an explicit device, but the spec runs as a world of %d ranks", what, l.spec.Run.World)
	return false
}

// writePath is the path a rank writes for path p as written at n: {rank}
// expanded. With more than one rank a path without {rank} is refused, as
// every rank would write it; then, as for every write, checkWrite.
func (ps *paths) writePath(n *node, what subject, p string) (string, bool) {
	if w := ps.spec.Run.World; w > 1 && !strings.Contains(p, rankPattern) {
		ps.errorf(n, "put {rank} in the path, as in out_{rank}.bin", "%s %s: all %d ranks would write this one file", what, p, w)
		return "", false
	}
	p = ExpandRank(p, ps.spec.Rank)
	return p, ps.checkWrite(n, what, p)
}
