package cpu

// QueueCap is the number of instructions the session's stream queues have
// room for: what they hold on to between runs.
func (b *Session) QueueCap() int {
	b.sched.mu.Lock()
	defer b.sched.mu.Unlock()
	n := 0
	for _, s := range b.sched.streams {
		n += cap(s.q)
	}
	return n
}
