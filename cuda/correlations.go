//go:build cgo

package cuda

// correlations names launches by their CUPTI correlation id with the id
// pushed around them (an op, or a replay's marker) until their records
// claim them. CUPTI numbers driver calls in order, so the ids one flush
// brings lie close together: they go in a window indexed by id, reused
// from flush to flush, where a map would cost most of the host's time of
// reading a traced eager run's records. Ids a flush leaves unclaimed (their
// records come in a later flush) move to a map, as do all of a flush whose
// ids are too far apart for a window. A claimed id stays claimable for one
// more flush: a forced flush right after a default one may bring the rest
// of a launch's records (cuptiTiming.collect).
type correlations struct {
	base uint32
	// win holds id+1 for correlation base+i, negated once a record has
	// claimed it; 0 for none.
	win []int64
	// prev is the last flush's window, its claimed ids only.
	prevBase uint32
	prev     []int64
	far      map[uint32]int64
	// used are the far ids claimed in this flush and in the last, deleted
	// at the end of the next.
	used, usedPrev []uint32
}

func newCorrelations() *correlations { return &correlations{far: map[uint32]int64{}} }

// open starts a flush whose ids lie in [lo, hi], n of them; with n == 0
// there is no window.
func (c *correlations) open(lo, hi uint32, n int) {
	c.win = c.win[:0]
	if n == 0 || hi < lo || uint64(hi-lo) >= 4*uint64(n)+1024 {
		return
	}
	size := int(hi-lo) + 1
	if cap(c.win) < size {
		c.win = make([]int64, size)
	}
	c.win = c.win[:size]
	clear(c.win)
	c.base = lo
}

// slot is id's place in window w from base, or -1.
func slot(w []int64, base, id uint32) int {
	if id < base || int64(id-base) >= int64(len(w)) {
		return -1
	}
	return int(id - base)
}

// set names correlation id by v (at least 0).
func (c *correlations) set(id uint32, v int64) {
	if i := slot(c.win, c.base, id); i >= 0 {
		if c.win[i] < 0 { // claimed already: stays claimed
			c.win[i] = -(v + 1)
		} else {
			c.win[i] = v + 1
		}
		return
	}
	c.far[id] = v
}

// claim returns what names correlation id, marking it claimed.
func (c *correlations) claim(id uint32) (int64, bool) {
	if i := slot(c.win, c.base, id); i >= 0 {
		switch v := c.win[i]; {
		case v > 0:
			c.win[i] = -v
			return v - 1, true
		case v < 0:
			return -v - 1, true
		}
	}
	if i := slot(c.prev, c.prevBase, id); i >= 0 && c.prev[i] < 0 {
		return -c.prev[i] - 1, true
	}
	v, ok := c.far[id]
	if ok {
		c.used = append(c.used, id)
	}
	return v, ok
}

// close ends the flush: ids claimed in the flush before are done (a
// graph launch's records all arrive once the replay is synchronised),
// unclaimed ones wait in the map, and this flush's window becomes the last.
func (c *correlations) close() {
	for _, id := range c.usedPrev {
		delete(c.far, id)
	}
	c.usedPrev, c.used = c.used, c.usedPrev[:0]
	for i, v := range c.win {
		if v > 0 {
			c.far[c.base+uint32(i)] = v - 1
			c.win[i] = 0
		}
	}
	c.prev, c.win = c.win, c.prev[:0]
	c.prevBase = c.base
}

// pending is how many ids wait for their records.
func (c *correlations) pending() int {
	n := len(c.far)
	done := map[uint32]bool{}
	for _, id := range c.usedPrev {
		if _, ok := c.far[id]; ok && !done[id] {
			done[id] = true
			n--
		}
	}
	return n
}

// resolveRecords names each timed record by the op of its correlation id,
// from the external correlation records among in (whose Op holds the pushed
// id) or kept in external from earlier flushes, drops the correlation
// records themselves, names a replayed node's record by the op its captured
// node was made under (nodeOps, ahead of the op pushed around the launch),
// and names graph nodes by the captured node that the
// replayed one was cloned from (clones: clone to original). A pushed id at
// or above replayMarker names the replay (Replay), not an op. It works in
// place: the records returned share in's memory.
//
// The driver callback's pairs, made at each launch's entry, name the same
// launches by the same correlation ids (resolveRecordsCached's links), so
// the two agree where both arrive.
func resolveRecords(in []activityRecord, external *correlations, clones map[uint64]uint64, nodeOps map[uint64]int64) []activityRecord {
	places := map[uint64]uint64{}
	for c := range clones {
		places[c>>32] = max(places[c>>32], c&0xffffffff+1)
	}
	return resolveRecordsCached(in, nil, external, clones, places, nodeOps, nil)
}

// link is a launch the driver callback named: its correlation id and the
// id pushed around it.
type link struct {
	corr uint32
	id   int64
}

// resolveRecordsCached is resolveRecords with the launches the driver
// callback named in links, and the replayed nodes that named an op cached
// in resolved (nil: no cache). The records of one launch come mostly
// together, so the last correlation looked up is kept: a replay of 800
// kernels costs one lookup of its marker, not 800.
func resolveRecordsCached(in []activityRecord, links []link, external *correlations, clones, places map[uint64]uint64, nodeOps map[uint64]int64,
	resolved map[uint64]resolvedNode) []activityRecord {
	lo, hi, n := ^uint32(0), uint32(0), 0
	bound := func(id uint32) {
		lo, hi, n = min(lo, id), max(hi, id), n+1
	}
	for _, l := range links {
		bound(l.corr)
	}
	for _, r := range in {
		if r.Kind == activityExternal {
			bound(r.Correlation)
		}
	}
	external.open(lo, hi, n)
	defer external.close()
	for _, l := range links {
		external.set(l.corr, l.id)
	}
	for _, r := range in {
		if r.Kind == activityExternal {
			external.set(r.Correlation, r.Op)
		}
	}
	var lastCorr uint32
	var lastID int64
	lastOK, haveLast := false, false
	recs := in[:0]
	for _, r := range in {
		if r.Kind == activityExternal {
			continue
		}
		r.Op, r.Replay = -1, -1
		if !haveLast || r.Correlation != lastCorr {
			lastCorr, haveLast = r.Correlation, true
			lastID, lastOK = external.claim(r.Correlation)
		}
		if lastOK {
			if lastID >= replayMarker {
				r.Replay = lastID - replayMarker
			} else {
				r.Op = lastID
			}
		}
		if r.GraphNodeID != 0 {
			if c, ok := resolved[r.GraphNodeID]; ok {
				r.GraphNodeID, r.Op = c.node, c.op
			} else {
				replayed := r.GraphNodeID
				// A clone of a clone (a graph cloned, then instantiated) is
				// followed to the first; the bound only guards against a cycle.
				for range 8 {
					orig, ok := clones[r.GraphNodeID]
					if !ok {
						break
					}
					r.GraphNodeID = orig
				}
				op, ok := nodeOps[r.GraphNodeID]
				if !ok {
					var body uint64
					if body, op, ok = bodyNode(replayed, clones, places, nodeOps); ok {
						r.GraphNodeID = body
					}
				}
				if ok {
					r.Op = op
					if resolved != nil {
						resolved[replayed] = resolvedNode{node: r.GraphNodeID, op: op}
					}
				}
			}
		}
		recs = append(recs, r)
	}
	return recs
}
