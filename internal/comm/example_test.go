package comm_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/comm"
)

// Two ranks in one process average a gradient: NCCL's avg of floats
// multiplies each rank's value by 1/2, then sums.
func ExampleNewLocal() {
	ranks, err := comm.NewLocal(2, comm.Options{})
	if err != nil {
		panic(err)
	}
	grads := make([][]byte, 2)
	var wg sync.WaitGroup
	for r, c := range ranks {
		grads[r] = binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(r+1)))
		wg.Go(func() {
			if err := c.AllReduce(context.Background(), grads[r], dag.F32, dag.Avg); err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	for r := range ranks {
		fmt.Printf("rank %d: %g\n", r, math.Float32frombits(binary.LittleEndian.Uint32(grads[r])))
	}
	// Output:
	// rank 0: 1.5
	// rank 1: 1.5
}

// A process finds its rank from what torchrun set.
func ExampleDiscover() {
	env := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29500"}
	p, ok, err := comm.Discover(func(k string) string { return env[k] })
	fmt.Println(p.Rank, p.World, p.LocalRank, p.Launcher, p.Addr, ok, err)
	// Output: 1 2 1 torchrun 10.0.0.7:29511 true <nil>
}
