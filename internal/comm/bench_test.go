package comm

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// BenchmarkAllReduce measures the CPU collectives, in one process and over
// loopback TCP, against a floor of the copies every rank's data needs (one
// copy of each rank's buffer, as rank 0 gathers it).
func BenchmarkAllReduce(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		for _, n := range []int{2, 4} {
			bufs := make([][]byte, n)
			for r := range bufs {
				bufs[r] = make([]byte, size)
			}
			b.Run(fmt.Sprintf("%dB/world%d/copy-floor", size, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(size * n))
				dst := make([]byte, size)
				for range b.N {
					for r := range n {
						copy(dst, bufs[r])
					}
				}
			})
			run := func(b *testing.B, comms []*Comm) {
				b.ReportAllocs()
				b.SetBytes(int64(size * n))
				b.ResetTimer()
				var wg sync.WaitGroup
				for r, c := range comms {
					wg.Go(func() {
						for range b.N {
							if err := c.AllReduce(b.Context(), bufs[r], dag.F32, dag.Sum); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			}
			b.Run(fmt.Sprintf("%dB/world%d/local", size, n), func(b *testing.B) {
				comms, err := NewLocal(n, Options{Timeout: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				run(b, comms)
			})
			b.Run(fmt.Sprintf("%dB/world%d/tcp", size, n), func(b *testing.B) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				comms := make([]*Comm, n)
				errs := onRanks(n, func(r int) error {
					cfg := Config{Place: Place{Rank: r, World: n, Addr: ln.Addr().String()}, Options: Options{Timeout: time.Minute}}
					if r == 0 {
						cfg.Listener = ln
					}
					comms[r], err = Rendezvous(b.Context(), cfg)
					return err
				})
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				run(b, comms)
				onRanks(n, func(r int) error { return comms[r].Close() })
			})
		}
	}
}
