package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNameLengthToTheCharacter: a name of MaxNameLen characters is read,
// one of MaxNameLen+1 refused at the name.
func TestNameLengthToTheCharacter(t *testing.T) {
	spec := func(name string) string {
		return "buffers:\n  " + name + ": {size: 16}\nops:\n  - fill: {buffer: " + name + ", value: 1}\n"
	}
	assert.Empty(t, errLines(t, spec(strings.Repeat("x", MaxNameLen))))
	got := errLines(t, spec(strings.Repeat("x", MaxNameLen+1)))
	require.NotEmpty(t, got)
	assert.True(t, strings.HasPrefix(got[0], "2:3: "), got[0])
	assert.Contains(t, got[0], fmt.Sprintf("is %d characters long", MaxNameLen+1))
}
