package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docRun finds the dagrun run commands of the documentation, up to the
// end of their line or code span.
var docRun = regexp.MustCompile("dagrun run (\\S+\\.yaml)[^`\\n]*")

// The commands the documentation gives for examples that save outputs
// pass --save-dir to a directory outside the examples, so that trying them
// leaves the source tree as it was.
func TestDocsSaveOutsideTheExamples(t *testing.T) {
	checked := 0
	for _, doc := range []string{"../README.md", "../docs/ranks.md"} {
		text, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range docRun.FindAllStringSubmatch(string(text), -1) {
			src, err := os.ReadFile(filepath.Join("..", m[1]))
			if err != nil || !strings.Contains(string(src), "save:") {
				continue
			}
			checked++
			f := strings.Fields(m[0])
			i := strings.Index(m[0], "--save-dir")
			if !assert.GreaterOrEqual(t, i, 0, "%s: %q writes its outputs beside the example: add --save-dir", doc, m[0]) {
				continue
			}
			for j, w := range f {
				if w == "--save-dir" && j+1 < len(f) {
					assert.NotContains(t, filepath.Clean(f[j+1]), "examples", "%s: %q", doc, m[0])
				}
			}
		}
	}
	assert.NotZero(t, checked, "no command of the documentation runs an example that saves")
}
