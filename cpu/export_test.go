package cpu

// QueueCap is the number of instructions the session's stream queues have
// room for: what they hold on to between runs.
func (b *Session) QueueCap() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.streams {
		n += cap(s.q)
	}
	return n
}
