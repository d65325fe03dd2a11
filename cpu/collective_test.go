package cpu_test

import (
	"encoding/binary"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/comm"
)

// TestRunCollective runs one rank's program (a graph of collectives) on 3
// ranks in one process and checks every rank's views.
func TestRunCollective(t *testing.T) {
	const world = 3
	b := dag.New()
	g := b.Buffer("g", 16, dag.Of(dag.F32), dag.Zeros())
	part := b.Buffer("part", 8, dag.Of(dag.I32), dag.Zeros())
	all := b.Buffer("all", 24, dag.Of(dag.I32), dag.Zeros())
	shard := b.Buffer("shard", 8, dag.Of(dag.F64), dag.Zeros())
	big := b.Buffer("big", 24, dag.Of(dag.F64), dag.Zeros())
	b.AllReduce(g.All(), dag.Avg, dag.Name("avg"))
	b.AllGather(part.All(), all.All(), dag.Name("gather"))
	b.ReduceScatter(big.All(), shard.All(), dag.Max, dag.Name("scatter"))
	b.Broadcast(part.All(), 2, dag.Name("bcast"))
	graph, err := b.Build()
	require.NoError(t, err)
	require.NoError(t, graph.CheckWorld(world))

	comms, err := comm.NewLocal(world, comm.Options{Timeout: 10 * time.Second})
	require.NoError(t, err)
	mems := make([]map[*dag.Buffer][]byte, world)
	for r := range world {
		m := map[*dag.Buffer][]byte{}
		for _, buf := range graph.Buffers {
			m[buf] = make([]byte, buf.Size)
		}
		for i := range 4 {
			binary.LittleEndian.PutUint32(m[g][4*i:], math.Float32bits(float32(r+1)))
		}
		for i := range 2 {
			binary.LittleEndian.PutUint32(m[part][4*i:], uint32(10*r+i))
		}
		for i := range 3 {
			binary.LittleEndian.PutUint64(m[big][8*i:], math.Float64bits(float64(r*i)))
		}
		mems[r] = m
	}
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r := range world {
		wg.Go(func() {
			for _, op := range graph.Ordered() {
				mem := make([][]byte, len(op.Access))
				for i, a := range op.Access {
					mem[i] = mems[r][a.Buf][a.Offset:a.End()]
				}
				if err := cpu.RunCollective(t.Context(), comms[r], op, mem); err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	wg.Wait()
	third := float32(1) / 3
	for r := range world {
		require.NoError(t, errs[r])
		m := mems[r]
		assert.Equal(t, 1*third+2*third+3*third, math.Float32frombits(binary.LittleEndian.Uint32(m[g])), "rank %d avg", r)
		for i := range 6 {
			assert.Equal(t, uint32(10*(i/2)+i%2), binary.LittleEndian.Uint32(m[all][4*i:]), "rank %d gather", r)
		}
		assert.Equal(t, float64(2*r), math.Float64frombits(binary.LittleEndian.Uint64(m[shard])), "rank %d scatter", r)
		assert.Equal(t, uint32(20), binary.LittleEndian.Uint32(m[part]), "rank %d bcast", r)
	}

	// A collective given the wrong views fails naming the op, and the other
	// ranks fail instead of waiting.
	comms, err = comm.NewLocal(2, comm.Options{Timeout: 10 * time.Second})
	require.NoError(t, err)
	op := graph.Ordered()[0]
	err = cpu.RunCollective(t.Context(), comms[0], op, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `op "avg": all_reduce takes 1 views, got 0`)
	err = comms[1].AllReduce(t.Context(), make([]byte, 16), dag.F32, dag.Sum)
	assert.ErrorIs(t, err, comm.ErrAborted)
}

func TestJoin(t *testing.T) {
	b := dag.New()
	x := b.Buffer("x", 16, dag.Of(dag.F32), dag.Zeros())
	b.AllReduce(x.All(), dag.Sum)
	g, err := b.Build()
	require.NoError(t, err)
	comms, err := comm.NewLocal(2, comm.Options{Timeout: time.Second})
	require.NoError(t, err)
	be := cpu.New()
	defer be.Close()
	cases := []struct {
		name  string
		world device.World
		setup func(s *cpu.Session)
		want  string
	}{
		{"rank outside", device.World{Rank: 2, Size: 2, Comm: comms[0]}, nil, "rank 2 is not in a world of 2"},
		{"no communicator", device.World{Rank: 0, Size: 2}, nil, "needs a communicator"},
		{"another rank's communicator", device.World{Rank: 0, Size: 2, Comm: comms[1]}, nil, "the communicator is rank 1 of 2, the world says rank 0 of 2"},
		{"after streams", device.World{Rank: 0, Size: 2, Comm: comms[0]}, func(s *cpu.Session) { require.NoError(t, s.NewStream(0, 0)) }, "join before making streams"},
		{"twice", device.World{Rank: 0, Size: 1}, func(s *cpu.Session) { require.NoError(t, s.Join(t.Context(), device.World{Rank: 0, Size: 1})) }, "joined a world already"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := be.OpenSession(t.Context(), g)
			require.NoError(t, err)
			defer s.Close()
			if c.setup != nil {
				c.setup(s)
			}
			assert.ErrorContains(t, s.Join(t.Context(), c.world), c.want)
		})
	}
}
