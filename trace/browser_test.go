package trace_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/trace"
)

// chromium is the browser the picture tests open pages in: Debian's
// chromium package, which scripts/install-chromium.sh installs.
const chromium = "/usr/bin/chromium"

// needChromium skips the test with -short (make test) or when Chromium is
// not installed, or fails it when DAGRUN_REQUIRE_BROWSER=1 (as in CI).
func needChromium(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("the browser tests run in make check, not with -short")
	}
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("DAGRUN_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s is missing and DAGRUN_REQUIRE_BROWSER=1: run scripts/install-chromium.sh", chromium)
		}
		t.Skipf("%s is missing (run scripts/install-chromium.sh): %v", chromium, err)
	}
}

// browse opens the file at path in headless Chromium and returns the DOM
// after its scripts ran, the console messages it logged, and a screenshot
// of a 1200x800 window.
func browse(t *testing.T, path string) (dom string, console []string, shot image.Image) {
	t.Helper()
	dir := t.TempDir()
	pngPath := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--enable-logging=stderr", "--v=0",
		"--window-size=1200,800", "--screenshot="+pngPath, "--dump-dom", "file://"+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "chromium on %s:\n%s", path, stderr.String())
	// Chromium logs every console message, errors and uncaught exceptions
	// included, as an INFO:CONSOLE line; the pages log nothing on purpose.
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "Uncaught") {
			console = append(console, line)
		}
	}
	f, err := os.Open(pngPath)
	require.NoError(t, err, "chromium wrote a screenshot")
	defer f.Close()
	shot, err = png.Decode(f)
	require.NoError(t, err)
	return stdout.String(), console, shot
}

// pixels counts the pixels of shot that are exactly c.
func pixels(shot image.Image, c color.RGBA) int {
	n := 0
	// Screenshots decode as opaque NRGBA or RGBA, where both store c as is.
	var pix []byte
	switch img := shot.(type) {
	case *image.NRGBA:
		pix = img.Pix
	case *image.RGBA:
		pix = img.Pix
	default:
		b := shot.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if color.RGBAModel.Convert(shot.At(x, y)) == c {
					n++
				}
			}
		}
		return n
	}
	for i := 0; i+3 < len(pix); i += 4 {
		if pix[i] == c.R && pix[i+1] == c.G && pix[i+2] == c.B && pix[i+3] == c.A {
			n++
		}
	}
	return n
}

var (
	computeLane = color.RGBA{0xee, 0xf2, 0xf8, 0xff}
	copyLane    = color.RGBA{0xfc, 0xef, 0xdf, 0xff}
)

func TestBrowserOpensPictures(t *testing.T) {
	needChromium(t)
	p := pipeline(t)
	run := trace.FromRun(p, simulatedSpans(p, 0))
	est := trace.FromPlan(p, nil)
	dir := t.TempDir()
	pages := []struct {
		file   string
		tr     *trace.Trace
		write  func(io.Writer) error
		script bool
	}{
		{"plan.svg", est, func(w io.Writer) error { return trace.PlanSVG(w, p) }, false},
		{"plan.html", est, func(w io.Writer) error { return trace.PlanHTML(w, p) }, true},
		{"timeline.html", run, run.WriteHTML, true},
	}
	for _, pg := range pages {
		t.Run(pg.file, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, pg.file)
			var buf bytes.Buffer
			require.NoError(t, pg.write(&buf))
			require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))

			dom, console, shot := browse(t, path)
			assert.Empty(t, console, "no console messages")
			assert.Equal(t, len(pg.tr.Lanes), strings.Count(dom, `class="lane"`), "lanes in the DOM")
			assert.Equal(t, len(pg.tr.Slices), strings.Count(dom, `class="op"`), "op boxes in the DOM")
			assert.Equal(t, len(pg.tr.Flows), strings.Count(dom, `class="wait"`), "wait arrows in the DOM")
			if pg.script {
				// The page's script marks the body once it has wired every box and arrow.
				assert.Contains(t, dom, fmt.Sprintf(`data-ready="%d"`, len(pg.tr.Slices)+len(pg.tr.Flows)), "the script ran")
			}
			// Two compute and two copy lanes, each about 1100 x 34 pixels
			// less the boxes and grid lines on them.
			compute, copies := pixels(shot, computeLane), pixels(shot, copyLane)
			t.Logf("%s: %d compute-lane and %d copy-lane pixels in the screenshot", pg.file, compute, copies)
			assert.Greater(t, compute, 2*1100*34/2, "compute lanes are drawn")
			assert.Greater(t, copies, 2*1100*34/2, "copy lanes are drawn")
		})
	}
	t.Run("console check", func(t *testing.T) {
		t.Parallel()
		// A control: the console check sees a script error.
		path := filepath.Join(dir, "broken.html")
		require.NoError(t, os.WriteFile(path, []byte(`<!DOCTYPE html><html><body><script>missing();</script></body></html>`), 0o644))
		_, console, _ := browse(t, path)
		require.Len(t, console, 1)
		assert.Regexp(t, regexp.MustCompile(`Uncaught ReferenceError: missing is not defined`), console[0])
	})
}
