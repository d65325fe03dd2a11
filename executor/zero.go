package executor

// A Session or Graph not made by Open or Capture holds nothing: its
// methods refuse at once, and Close does nothing.

// unusable reports whether s cannot take calls: closed, or not opened.
func (s *Session) unusable() bool { return s.d == nil || s.closed.Load() }

// unusable reports whether g cannot take calls: closed, or not captured.
func (g *Graph) unusable() bool { return g.closed.Load() || g.s == nil || g.c == nil }
