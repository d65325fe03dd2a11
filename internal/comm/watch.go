package comm

import "context"

// Watch waits until this rank's end of the world fails (another rank
// aborted or its process went away, or this rank failed) and returns why,
// or until ctx ends and returns nil. A rank whose collectives run in a
// library of their own (NCCL) keeps its rendezvous connection only to
// learn of failures: it watches it, to abandon a run that waits for a rank
// that is gone.
func (c *Comm) Watch(ctx context.Context) error {
	for {
		c.box.mu.Lock()
		err, wake := c.box.err, c.box.wake
		c.box.mu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil
		}
	}
}
