package memdev_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/executor/device/memdev"
)

// Calls on a closed backend or session match device.ErrClosed.
func TestClosedIsErrClosed(t *testing.T) {
	ctx := context.Background()
	bld := dag.New()
	bld.Buffer("x", 16, dag.Zeros())
	g, err := bld.Build()
	require.NoError(t, err)

	b := memdev.New()
	s, err := b.Open(ctx, g)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Sync(ctx), device.ErrClosed)
	require.NoError(t, b.Close())
	_, err = b.Open(ctx, g)
	require.ErrorIs(t, err, device.ErrClosed)
}
