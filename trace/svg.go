package trace

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
)

// The geometry of a timeline picture, in pixels.
const (
	picWidth   = 1150
	labelWidth = 250 // the lane labels' column
	plotLeft   = labelWidth + 12
	plotRight  = picWidth - 24
	axisTop    = 64 // tick labels sit above the axis line
	axisHeight = 26
	groupRow   = 22 // the "GPU n" row above a device's lanes
	laneHeight = 36
	boxHeight  = 24
	legendRow  = 40
	charWidth  = 6.0 // a generous width of one character at the 10px label size
)

// picture is a trace drawn as an SVG timeline.
type picture struct {
	t       *Trace
	title   string
	caption string
	opWord  string // "ran" or "estimated" in hover texts

	// A plan picture's loops and branches (svgbodies.go): a box per
	// body, where layout puts each, and each lane's nesting depth; nil
	// without bodies.
	boxes             []bodyBox
	boxTop, boxBottom []float64
	laneDepth         []int
	// A timeline's loops: a bracket per loop over its iterations, nil
	// without loops (svgbodies.go).
	brackets []loopBracket
}

// WriteSVG writes the timeline of t as a self-contained SVG image: a lane
// per stream (grouped by device, copy streams tinted), a time axis, a box
// per op labelled with its name where it fits and with a <title> hover text,
// and the waits as arrows. Lanes have class "lane", op boxes class "op" and
// data-op (the op's name), wait arrows class "wait". An op of a loop's
// body is labelled with its iteration ("jx #3"), and a thin bracket
// (class "loop", data-iterations) spans each loop's iterations on its
// lane, ticked where each one starts.
func (t *Trace) WriteSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	t.picture().draw(bw)
	return bw.Flush()
}

// WriteHTML writes the timeline of t as a self-contained HTML page: the
// SVG of WriteSVG, zoom buttons, and a panel that shows the details of the
// op or wait under the pointer. It loads nothing from anywhere.
func (t *Trace) WriteHTML(w io.Writer) error {
	bw := bufio.NewWriter(w)
	t.picture().page(bw)
	return bw.Flush()
}

// PlanSVG writes p as an SVG picture: its streams as lanes, each op a box
// placed at the start time the planner's default cost model gives it (see
// FromPlan), and every wait an arrow from the op the event is recorded
// after to the op after the wait. The body of each loop or branch
// (Plan.Bodies) is a dashed box (class "body", data-op the control op's
// name, data-body "body", "then" or "else") under the control op's lane:
// its streams as lanes of their own, its ops placed as one pass of the
// body simulated on its own, from the control op's start; bodies within
// bodies nest.
func PlanSVG(w io.Writer, p *planner.Plan) error {
	if p == nil {
		return errors.New("trace: PlanSVG needs a plan")
	}
	bw := bufio.NewWriter(w)
	bw.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	planPicture(p).draw(bw)
	return bw.Flush()
}

// PlanHTML writes the picture of PlanSVG as a self-contained HTML page with
// zoom buttons and hover details.
func PlanHTML(w io.Writer, p *planner.Plan) error {
	if p == nil {
		return errors.New("trace: PlanHTML needs a plan")
	}
	bw := bufio.NewWriter(w)
	planPicture(p).page(bw)
	return bw.Flush()
}

func planPicture(p *planner.Plan) *picture {
	t := FromPlan(p, nil)
	boxes, depth := planBodies(t, p) // svgbodies.go
	return &picture{t: t, title: "dagrun plan (times estimated by the cost model)", caption: planCaption(p) + t.Summarize().commCaption(), opWord: "estimated",
		boxes: boxes, laneDepth: depth}
}

func (t *Trace) picture() *picture {
	if t.Figures.Estimated {
		return &picture{t: t, title: "dagrun plan (times estimated by the cost model)", caption: t.caption(), opWord: "estimated", brackets: t.loopBrackets()}
	}
	return &picture{t: t, title: "dagrun run timeline (measured)", caption: t.caption(), opWord: "ran", brackets: t.loopBrackets()}
}

// caption is the figures line under a timeline's title.
func (t *Trace) caption() string {
	s := t.Summarize()
	return fmt.Sprintf("makespan %s, critical path %s (ratio %.2f); %s on %s, %s; copy/compute overlap %s (%s of makespan)",
		fmtDur(s.Makespan), fmtDur(s.CriticalPath), s.Ratio, human.Count(len(t.Slices), "op", "ops"), human.Count(len(t.Lanes), "stream", "streams"),
		human.Count(len(t.Flows), "wait", "waits"), fmtDur(s.Overlap), pct(s.OverlapShare)) + s.commCaption()
}

// commCaption is the caption's collective/compute overlap, where
// collectives ran.
func (s Summary) commCaption() string {
	if s.CommBusy == 0 {
		return ""
	}
	return fmt.Sprintf("; collective/compute overlap %s (%s of collective time)", fmtDur(s.CommOverlap), pct(s.CommHidden))
}

// layout is where the lanes of a picture go.
type layout struct {
	laneY  []float64 // top of each lane
	groups []struct {
		y    float64
		name string // the lanes' process: "GPU 0", "rank 1 GPU 1"
	}
	bottom float64 // below the last lane
	span   time.Duration
}

func (pic *picture) layout() layout {
	var l layout
	l.span = max(pic.t.Makespan(), 1)
	if pic.boxes != nil {
		pic.layoutBodies(&l) // svgbodies.go
		return l
	}
	y := float64(axisTop + axisHeight)
	for i, lane := range pic.t.Lanes {
		if i == 0 || pic.t.Lanes[i-1].Process() != lane.Process() {
			l.groups = append(l.groups, struct {
				y    float64
				name string
			}{y, lane.Process()})
			y += groupRow
		}
		l.laneY = append(l.laneY, y)
		y += laneHeight
	}
	l.bottom = y
	return l
}

func (l *layout) x(d time.Duration) float64 {
	return plotLeft + float64(d)/float64(l.span)*(plotRight-plotLeft)
}

func (pic *picture) draw(w *bufio.Writer) {
	t := pic.t
	l := pic.layout()
	height := l.bottom + 12 + legendRow
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="sans-serif">`+"\n", picWidth, height, picWidth, height)
	fmt.Fprintf(w, `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker></defs>`+"\n", waitColour)
	fmt.Fprintf(w, `<rect x="0" y="0" width="%d" height="%.0f" fill="#ffffff"/>`+"\n", picWidth, height)
	fmt.Fprintf(w, `<text x="12" y="24" font-size="16" font-weight="bold" fill="#1d1d1d">%s</text>`+"\n", esc(pic.title))
	fmt.Fprintf(w, `<text x="12" y="44" font-size="12" fill="#444444">%s</text>`+"\n", esc(pic.caption))

	// Lanes and their labels.
	for _, g := range l.groups {
		fmt.Fprintf(w, `<text class="device" x="8" y="%.1f" font-size="12" font-weight="bold" fill="#1d1d1d">%s</text>`+"\n", g.y+15, g.name)
	}
	for i, lane := range t.Lanes {
		y := l.laneY[i]
		fmt.Fprintf(w, `<rect class="lane" data-stream="%s" x="0" y="%.1f" width="%d" height="%d" fill="%s"/>`+"\n", esc(lane.Name), y, picWidth, laneHeight-2, laneFill(lane))
		if i < len(pic.laneDepth) && pic.laneDepth[i] > 0 {
			// A body's lane, indented under its box's header.
			x := 8 + pic.laneDepth[i]*bodyIndent
			fmt.Fprintf(w, `<text x="%d" y="%.1f" font-size="12" font-weight="bold" fill="#1d1d1d">%s</text>`+"\n", x, y+15, esc(clip(lane.Name, (labelWidth-4-x)/7)))
			fmt.Fprintf(w, `<text x="%d" y="%.1f" font-size="10" fill="#555555">priority %s · %s</text>`+"\n", x, y+28, esc(lane.Priority.String()), lane.Kind)
			continue
		}
		fmt.Fprintf(w, `<text x="8" y="%.1f" font-size="12" font-weight="bold" fill="#1d1d1d">%s</text>`+"\n", y+15, esc(clip(lane.Name, (labelWidth-12)/7)))
		fmt.Fprintf(w, `<text x="8" y="%.1f" font-size="10" fill="#555555">priority %s · %s</text>`+"\n", y+28, esc(lane.Priority.String()), lane.Kind)
	}

	// The time axis, with grid lines through the lanes.
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1d1d1d" stroke-width="1"/>`+"\n", plotLeft, axisTop+axisHeight-4, plotRight, axisTop+axisHeight-4)
	step := tickStep(l.span)
	unit, unitName := tickUnit(l.span)
	decimals := max(0, int(math.Ceil(-math.Log10(float64(step)/float64(unit)-1e-9))))
	// Count the ticks rather than add steps: no span can make the loop wrap
	// around or run long.
	ticks := min(int64(l.span/step), maxTicks)
	for i := range ticks + 1 {
		tick := time.Duration(i) * step
		x := l.x(tick)
		fmt.Fprintf(w, `<line class="tick" x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#c5cad3" stroke-width="1"/>`+"\n", x, axisTop+axisHeight-8, x, l.bottom)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="10" fill="#333333" text-anchor="middle">%s %s</text>`+"\n",
			x, axisTop+axisHeight-11, tickLabel(tick, unit, decimals), unitName)
	}

	// Loops' and branches' bodies, and loops' iterations.
	pic.drawBodies(w, &l)
	pic.drawBrackets(w, &l)

	// Waits, from the end of the recording op to the start of the op after
	// the wait, beneath the boxes so that they never hide a label.
	w.WriteString(`<g class="waits" fill="none">` + "\n")
	for _, f := range t.Flows {
		if f.From < 0 || f.From >= len(t.Slices) || f.To < 0 || f.To >= len(t.Slices) {
			continue
		}
		from, to := t.Slices[f.From], t.Slices[f.To]
		x0, y0 := l.x(from.End()), l.laneY[from.Lane]+(laneHeight-2)/2
		x1, y1 := l.x(to.Start), l.laneY[to.Lane]+(laneHeight-2)/2
		bend := max(math.Abs(x1-x0)/2, 18)
		fmt.Fprintf(w, `<path class="wait" data-event="e%d" d="M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f" stroke="%s" stroke-width="1.2" stroke-opacity="0.7" marker-end="url(#arrow)"><title>%s</title></path>`+"\n",
			f.Event, x0, y0, x0+bend, y0, x1-bend, y1, x1, y1, waitColour,
			esc(fmt.Sprintf("e%d: %s on %s waits for %s on %s", f.Event, to.Name, t.Lanes[to.Lane].Name, from.Name, t.Lanes[from.Lane].Name)))
	}
	w.WriteString("</g>\n")

	// Op boxes.
	for _, s := range t.Slices {
		if s.Lane < 0 || s.Lane >= len(t.Lanes) {
			continue
		}
		lane := t.Lanes[s.Lane]
		x0, x1 := l.x(s.Start), l.x(s.End())
		width := max(x1-x0, 2)
		y := l.laneY[s.Lane] + (laneHeight-2-boxHeight)/2
		fmt.Fprintf(w, `<g class="op" data-op="%s" data-kind="%s"><title>%s</title>`, esc(s.Name), s.Kind, esc(pic.hover(s)))
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" rx="2" fill="%s" stroke="#ffffff" stroke-width="0.5"/>`, x0, y, width, boxHeight, kindFill(s.Kind, lane.Kind))
		if label := fitLabel(sliceLabel(s), width); label != "" {
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="10" fill="%s" pointer-events="none">%s</text>`, x0+3, y+boxHeight/2+3.5, kindText(s.Kind, lane.Kind), esc(label))
		}
		w.WriteString("</g>\n")
	}

	pic.legend(w, l.bottom+12)
	w.WriteString("</svg>\n")
}

// legend draws the colour key at y.
func (pic *picture) legend(w *bufio.Writer, y float64) {
	items := append(legendItems(), []struct{ label, fill string }{
		{"compute stream", computeLaneFill},
		{"copy stream", copyLaneFill},
	}...)
	fmt.Fprintf(w, `<g class="legend" font-size="11" fill="#1d1d1d">`)
	x := 12.0
	for _, it := range items {
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="14" height="14" rx="2" fill="%s" stroke="#8a93a3" stroke-width="0.5"/><text x="%.1f" y="%.1f">%s</text>`,
			x, y+4, it.fill, x+18, y+15, it.label)
		x += 18 + float64(utf8.RuneCountInString(it.label))*6.4 + 16
	}
	fmt.Fprintf(w, `<path d="M%.1f,%.1f L%.1f,%.1f" stroke="%s" stroke-width="1.3" marker-end="url(#arrow)"/><text x="%.1f" y="%.1f">wait (event record → wait)</text>`,
		x, y+11, x+26, y+11, waitColour, x+32, y+15)
	w.WriteString("</g>\n")
}

// hover is the <title> text of a slice.
func (pic *picture) hover(s Slice) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s) on %s\n%s: start %s, duration %s", s.Name, s.Kind, pic.t.Lanes[s.Lane].Name, pic.opWord, fmtDur(s.Start), fmtDur(s.Dur))
	if s.Loop {
		fmt.Fprintf(&b, "\niteration #%d of its loop (from #0)", s.Iter)
	}
	if len(s.Parts) > 0 {
		fmt.Fprintf(&b, "\nfused: runs %s as one op", strings.Join(s.Parts, ", "))
	}
	if s.Bytes > 0 {
		fmt.Fprintf(&b, "\nbytes %s", dag.FormatBytes(s.Bytes))
	}
	if s.Path != "" {
		fmt.Fprintf(&b, "\ncopy %s, %.1f GB/s", s.Path, s.GBps())
	}
	if s.Grid != (dag.Dim3{}) {
		fmt.Fprintf(&b, "\ngrid %s, block %s", s.Grid, s.Block)
	}
	if len(s.Reads) > 0 {
		fmt.Fprintf(&b, "\nreads %s", strings.Join(s.Reads, ", "))
	}
	if len(s.Writes) > 0 {
		fmt.Fprintf(&b, "\nwrites %s", strings.Join(s.Writes, ", "))
	}
	return b.String()
}

// page wraps the picture in an HTML page with zoom and hover details.
func (pic *picture) page(w *bufio.Writer) {
	fmt.Fprintf(w, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>%s</title>
<style>
body { font-family: sans-serif; margin: 12px; color: #1d1d1d; background: #ffffff; }
#bar { margin: 0 0 8px 0; font-size: 13px; }
#bar button { font: inherit; min-width: 2em; }
#view { overflow: auto; border: 1px solid #d5d9e0; }
#view svg { display: block; }
#details { font-family: monospace; font-size: 12px; white-space: pre; min-height: 6em; margin-top: 8px; padding: 6px; background: #f6f7f9; border: 1px solid #d5d9e0; }
g.op:hover rect { stroke: #000000; stroke-width: 1.5; }
path.wait:hover { stroke-width: 3; }
</style>
</head>
<body>
<div id="bar"><button id="zoom-out" type="button">&#8722;</button> <button id="zoom-in" type="button">+</button> <span id="zoom">100%%</span> &#183; point at a box or an arrow for its details</div>
<div id="view">
`, esc(pic.title))
	pic.draw(w)
	w.WriteString(`</div>
<div id="details">no op selected</div>
<script>
(function () {
  "use strict";
  var svg = document.querySelector("#view svg");
  var details = document.getElementById("details");
  var label = document.getElementById("zoom");
  var width = Number(svg.getAttribute("width")), height = Number(svg.getAttribute("height"));
  var zoom = 1;
  function setZoom(z) {
    zoom = Math.min(16, Math.max(0.25, z));
    svg.setAttribute("width", String(width * zoom));
    svg.setAttribute("height", String(height * zoom));
    label.textContent = Math.round(zoom * 100) + "%";
  }
  document.getElementById("zoom-in").addEventListener("click", function () { setZoom(zoom * 1.5); });
  document.getElementById("zoom-out").addEventListener("click", function () { setZoom(zoom / 1.5); });
  var items = svg.querySelectorAll("g.op, path.wait");
  for (var i = 0; i < items.length; i++) {
    items[i].addEventListener("mouseenter", function (ev) {
      var title = ev.currentTarget.querySelector("title");
      details.textContent = title ? title.textContent : "";
    });
  }
  document.body.setAttribute("data-ready", String(items.length));
})();
</script>
</body>
</html>
`)
}

// maxTicks bounds the ticks of an axis; tickStep makes about eight.
const maxTicks = 64

// tickStep is a round step (1, 2 or 5 times a power of ten nanoseconds)
// that cuts span into about eight parts.
func tickStep(span time.Duration) time.Duration {
	raw := float64(span) / 8
	pow := math.Pow(10, math.Floor(math.Log10(max(raw, 1))))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			return max(time.Duration(m*pow), 1)
		}
	}
	return max(time.Duration(10*pow), 1)
}

// tickUnit is the unit the axis of a span is labelled in.
func tickUnit(span time.Duration) (time.Duration, string) {
	switch {
	case span >= time.Second:
		return time.Second, "s"
	case span >= time.Millisecond:
		return time.Millisecond, "ms"
	case span >= time.Microsecond:
		return time.Microsecond, "µs"
	}
	return 1, "ns"
}

// tickLabel writes tick in unit with decimals places, and zero as "0".
func tickLabel(tick, unit time.Duration, decimals int) string {
	if tick == 0 {
		return "0"
	}
	return fmt.Sprintf("%.*f", decimals, float64(tick)/float64(unit))
}

// fitLabel is name, or name cut short with an ellipsis, if it fits a box
// width pixels wide; "" if not even three characters fit.
func fitLabel(name string, width float64) string {
	room := int((width - 6) / charWidth)
	n := utf8.RuneCountInString(name)
	if n <= room {
		return name
	}
	if room < 4 {
		return ""
	}
	return clip(name, room)
}

// clip cuts s to at most n runes, ending in an ellipsis when cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

// esc makes s safe as XML and HTML text or attribute value: invalid UTF-8
// and control characters XML forbids become U+FFFD, markup is escaped.
func esc(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return html.EscapeString(s)
}
