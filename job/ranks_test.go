package job

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/spec"
)

// Lines written in pieces come out whole, each after its rank.
func TestRankWriter(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	w0, w1 := RankWriter(&out, 0, &mu), RankWriter(&out, 1, &mu)
	for _, s := range []struct {
		w   interface{ Write([]byte) (int, error) }
		txt string
	}{{w0, "checksum a"}, {w1, "checksum b\nnext"}, {w0, ": 1\n"}, {w1, " line\n"}} {
		n, err := s.w.Write([]byte(s.txt))
		require.NoError(t, err)
		assert.Equal(t, len(s.txt), n)
	}
	assert.Equal(t, "rank 1 checksum b\nrank 0 checksum a: 1\nrank 1 next line\n", out.String())
}

// A rank's program moves to its device: its rank's, or under a launcher
// its local rank's among the visible devices.
func TestNewRank(t *testing.T) {
	load := func() *spec.Spec {
		s, err := spec.Parse("r.yaml", []byte("buffers:\n  d: {dtype: f32, count: 4}\n  h: {dtype: f32, count: 4, placement: pinned}\nops:\n  - {launch: iota, args: {x: d, start: 1}}\n  - copy: {from: d, to: h}\n"))
		require.NoError(t, err)
		return s
	}
	env := func(v string) func(string) string { return func(string) string { return v } }
	p := NewRank(load(), 2, nil, env(""))
	assert.Equal(t, 2, p.Device)
	assert.Equal(t, 2, p.Rank)
	for _, b := range p.Spec.Graph.Buffers {
		if b.Placement == dag.Device {
			assert.Equal(t, 2, b.Device)
		}
	}
	for _, op := range p.Spec.Graph.Ops {
		assert.Equal(t, 2, op.Device)
	}
	place := &executor.Place{Rank: 5, LocalRank: 3}
	assert.Equal(t, 3, NewRank(load(), 5, place, env("")).Device)
	assert.Equal(t, 1, NewRank(load(), 5, place, env("4, 6")).Device)
	assert.True(t, strings.HasPrefix(p.Spec.File, "r"))
}

// A world comes from the caller, a launcher or the spec; a spec of one
// rank outside a launcher is an ordinary run.
func TestWorldOf(t *testing.T) {
	load := func(src string) *spec.Spec {
		s, err := spec.Parse("w.yaml", []byte(src+"buffers:\n  d: {size: 64}\nops:\n  - {fill: {buffer: d, value: 0}}\n"))
		require.NoError(t, err)
		return s
	}
	none := func(string) string { return "" }
	torchrun := func(k string) string {
		return map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}[k]
	}
	one, three := load(""), load("run: {world: 3}\n")

	w, err := WorldOf(one, 0, none)
	require.NoError(t, err)
	assert.Nil(t, w)
	w, err = WorldOf(three, 0, none)
	require.NoError(t, err)
	assert.Equal(t, &World{Size: 3}, w)
	w, err = WorldOf(one, 4, none)
	require.NoError(t, err)
	assert.Equal(t, &World{Size: 4}, w)
	assert.Equal(t, []int{0, 1, 2, 3}, w.Ranks())
	w, err = WorldOf(one, 0, torchrun)
	require.NoError(t, err)
	require.NotNil(t, w.Place)
	assert.Equal(t, []int{1}, w.Ranks())
	assert.Equal(t, 2, w.Size)
	assert.Equal(t, 1, w.Place.Rank)
	_, err = WorldOf(three, 0, torchrun)
	assert.ErrorContains(t, err, "w.yaml sets run.world: 3, but torchrun started a world of 2 processes")
	w, err = WorldOf(three, 1, torchrun)
	require.NoError(t, err)
	assert.Equal(t, &World{Size: 1}, w, "a world given overrides the launcher's and the spec's")
}
