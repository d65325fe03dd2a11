//go:build !cgo

package cuda

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewWithoutCgo(t *testing.T) {
	b, err := New()
	require.Error(t, err)
	assert.Nil(t, b)
	assert.True(t, errors.Is(err, ErrNoDriver), "auto falls back to the CPU backend on ErrNoDriver")
	assert.Contains(t, err.Error(), "built without cgo")
}
