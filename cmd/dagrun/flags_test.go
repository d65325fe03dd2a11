package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHelpSpelling(t *testing.T) {
	tests := map[string]string{
		`invalid value "0" for flag -streams: use 1 to 32`: `invalid value "0" for flag --streams: use 1 to 32`,
		`flag provided but not defined: -colour`:           `flag provided but not defined: --colour`,
		`flag needs an argument: -allow-path`:              `flag needs an argument: --allow-path`,
		`flag needs an argument: -o`:                       `flag needs an argument: -o`,
		`bad flag syntax: ---x`:                            `bad flag syntax: ---x`,
	}
	for in, want := range tests {
		assert.Equal(t, want, helpSpelling(in), in)
	}
}

func TestSuggestName(t *testing.T) {
	ops := []string{"init", "scale0", "sum0", "download_total"}
	assert.Equal(t, `did you mean "scale0"?`, suggestName("scale9", ops))
	assert.Equal(t, `did you mean "download_total"?`, suggestName("downlaod_total", ops))
	assert.Equal(t, "its ops are init, scale0, sum0, download_total", suggestName("zzzzzzzz", ops))
	// A huge name is compared with nothing: the work stays bounded.
	assert.Equal(t, "its ops are init, scale0, sum0, download_total", suggestName(strings.Repeat("s", 1<<20), ops))
	many := make([]string, 20)
	for i := range many {
		many[i] = strings.Repeat("x", i+10)
	}
	assert.Contains(t, suggestName("q", many), ", ...")
}
