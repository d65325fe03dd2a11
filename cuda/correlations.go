package cuda

// correlations names launches by their CUPTI correlation id with the id
// pushed around them (an op, or a replay's marker) until their records
// claim them. CUPTI numbers driver calls in order, so the ids one flush
// brings lie close together: they go in a window indexed by id, reused
// from flush to flush, where a map would cost most of the host's time of
// reading a traced eager run's records. Ids a flush leaves unclaimed (their
// records come in a later flush) move to a map, as do all of a flush whose
// ids are too far apart for a window.
type correlations struct {
	base uint32
	// win holds id+1 for correlation base+i, negated once a record has
	// claimed it; 0 for none.
	win []int64
	far map[uint32]int64
	// used are the far ids claimed in this flush, deleted at its end.
	used []uint32
}

func newCorrelations() *correlations { return &correlations{far: map[uint32]int64{}} }

// open starts a flush whose ids lie in [lo, hi], n of them; with n == 0
// there is no window.
func (c *correlations) open(lo, hi uint32, n int) {
	c.win, c.used = c.win[:0], c.used[:0]
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

// slot is id's place in the window, or -1.
func (c *correlations) slot(id uint32) int {
	if id < c.base || int64(id-c.base) >= int64(len(c.win)) {
		return -1
	}
	return int(id - c.base)
}

// set names correlation id by v (at least 0).
func (c *correlations) set(id uint32, v int64) {
	if i := c.slot(id); i >= 0 {
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
	if i := c.slot(id); i >= 0 {
		switch v := c.win[i]; {
		case v > 0:
			c.win[i] = -v
			return v - 1, true
		case v < 0:
			return -v - 1, true
		}
	}
	v, ok := c.far[id]
	if ok {
		c.used = append(c.used, id)
	}
	return v, ok
}

// close ends the flush: claimed ids are done (a graph launch's records all
// arrive once the replay is synchronised), unclaimed ones wait in the map.
func (c *correlations) close() {
	for _, id := range c.used {
		delete(c.far, id)
	}
	for i, v := range c.win {
		if v > 0 {
			c.far[c.base+uint32(i)] = v - 1
		}
	}
	c.win, c.used = c.win[:0], c.used[:0]
}

// pending is how many ids wait for their records.
func (c *correlations) pending() int { return len(c.far) }
