package spec

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// TestYAMLParsers pins the use of the two YAML parsers (see document.go):
// the messages of go.yaml.in/yaml/v3 that the loader reads with regexps
// still read that way, and goccy/go-yaml is asked in document.go alone.
func TestYAMLParsers(t *testing.T) {
	var n node
	err := yaml.Unmarshal([]byte("a: *nowhere\n"), &n)
	require.Error(t, err)
	name, ok := unknownAnchor(err)
	assert.True(t, ok, "the message of an unknown alias changed: %v", err)
	assert.Equal(t, "nowhere", name)

	err = yaml.Unmarshal([]byte("a: 1\nb: [1, 2\n"), &n)
	require.Error(t, err)
	assert.Regexp(t, yamlLineRE, err.Error(), "the message of a syntax error changed")

	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var users []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range af.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/goccy/go-yaml") {
				users = append(users, f)
				break
			}
		}
	}
	assert.Equal(t, []string{"document.go"}, users, "goccy/go-yaml is for syntax errors' columns only")
}
