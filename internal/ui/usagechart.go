package ui

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The Usage page's charts are SVG drawn on the server (UI.md "Charts"): a
// line per series, at most usageMaxSeries with the rest folded into
// "other" (foldSeries), a y axis with its unit, time on the x axis, and a
// <title> on every point for the hover. The geometry is computed here and
// written by the "usage-chart" template, so every name is escaped; colours
// come from classes in app.css (the CSP allows no style attribute).

// Chart geometry, in the viewBox's units: the plot box is [chartLeft,
// chartRight] by [chartTop, chartBottom].
const (
	chartW      = 560
	chartH      = 230
	chartLeft   = 58
	chartRight  = 546
	chartTop    = 24
	chartBottom = 196
)

// svgChart is one chart as the "usage-chart" template draws it.
type svgChart struct {
	ID, Title, Unit string
	// Desc labels the image for screen readers.
	Desc string
	// Note is shown instead of the chart when it cannot be drawn.
	Note                   string
	W, H                   float64
	Left, Right, Top, Bot  float64
	YTicks, XTicks         []svgTick
	Lines                  []svgLine
	AxisUnit, AxisTimeNote string
}

// svgTick is a tick's line (from X1,Y1 to X2,Y2) and its label at TX,TY.
type svgTick struct {
	X1, Y1, X2, Y2, TX, TY float64
	Label                  string
}

// svgLine is one series: its path (pen up over buckets without a value)
// and its points.
type svgLine struct {
	Class, Name, D string
	Points         []svgPoint
}

type svgPoint struct {
	X, Y  float64
	Title string
}

// usageMetric is what one chart plots of a cell.
type usageMetric struct {
	id, title, unit string
	// detail: computed from the records, drawn only with usageData.Detail.
	detail bool
	// ms: a latency, whose axis turns to seconds past 10 s.
	ms    bool
	value func(c *usageCell) (float64, bool)
	hover func(c *usageCell) string
}

var usageMetrics = []usageMetric{
	{id: "requests", title: "Requests", unit: "requests",
		value: func(c *usageCell) (float64, bool) { return float64(c.Requests), true },
		hover: func(c *usageCell) string { return count(c.Requests) + " requests" }},
	{id: "tokens", title: "Tokens", unit: "tokens",
		value: func(c *usageCell) (float64, bool) { return float64(c.Tokens()), true },
		hover: func(c *usageCell) string {
			return count(c.Tokens()) + " tokens (" + count(c.Prompt) + " prompt, " + count(c.Completion) + " completion)"
		}},
	{id: "errors", title: "Errors", unit: "errors", detail: true,
		value: func(c *usageCell) (float64, bool) { return float64(c.Errors), true },
		hover: func(c *usageCell) string {
			return count(c.Errors) + " errors of " + count(int64(len(c.lat))) + " requests"
		}},
	{id: "latency", title: "Latency, p95", unit: "ms", detail: true, ms: true,
		value: func(c *usageCell) (float64, bool) {
			ms, ok := c.latency(0.95)
			return float64(ms), ok
		},
		hover: func(c *usageCell) string {
			p95, _ := c.latency(0.95)
			p50, _ := c.latency(0.5)
			return "p95 " + millis(p95) + ", p50 " + millis(p50) + " over " + count(int64(len(c.lat))) + " requests"
		}},
}

// usageCharts draws the four charts of d.
func usageCharts(d *usageData) []svgChart {
	out := make([]svgChart, 0, len(usageMetrics))
	for _, m := range usageMetrics {
		out = append(out, drawChart(m, d))
	}
	return out
}

func drawChart(m usageMetric, d *usageData) svgChart {
	w := d.Window
	per := " per " + w.Interval
	c := svgChart{ID: m.id, Title: m.title, Unit: m.unit + per, W: chartW, H: chartH,
		Left: chartLeft, Right: chartRight, Top: chartTop, Bot: chartBottom, AxisUnit: m.unit, AxisTimeNote: "time (UTC)"}
	if m.ms {
		c.Unit = "ms, the 95th percentile of each " + w.Interval + "'s requests"
	}
	c.Desc = m.title + " by " + d.GroupBy + ", " + usageTime(w.Since) + " to " + usageTime(w.Until)
	if m.detail && !d.Detail {
		c.Note = "Computed from the requests themselves, which are shown only for ranges of at most " +
			count(usageDetailCap) + " requests: narrow since/until or the filters."
		return c
	}
	if len(d.Plotted) == 0 {
		c.Note = "No requests in this range."
		return c
	}
	var top float64
	for _, s := range d.Plotted {
		for i := range s.Cells {
			if v, ok := m.value(&s.Cells[i]); ok {
				top = max(top, v)
			}
		}
	}
	top, step := niceScale(top)
	div := 1.0
	if m.ms && top >= 10_000 {
		div, c.AxisUnit = 1000, "s"
	}
	y := func(v float64) float64 { return round1(chartBottom - v/top*(chartBottom-chartTop)) }
	for v := 0.0; v <= top*(1+1e-9); v += step {
		py := y(v)
		c.YTicks = append(c.YTicks, svgTick{X1: chartLeft, Y1: py, X2: chartRight, Y2: py, TX: chartLeft - 6, TY: py + 4,
			Label: compact(v / div)})
	}
	n := len(w.Buckets)
	x := func(i int) float64 {
		if n == 1 {
			return (chartLeft + chartRight) / 2
		}
		return round1(chartLeft + float64(i)*(chartRight-chartLeft)/float64(n-1))
	}
	stride := max(1, (n+5)/6)
	for i := 0; i < n; i += stride {
		px := x(i)
		c.XTicks = append(c.XTicks, svgTick{X1: px, Y1: chartBottom, X2: px, Y2: chartBottom + 4, TX: px, TY: chartBottom + 16,
			Label: tickTime(w.Buckets[i], w.Interval, i == 0)})
	}
	for _, s := range d.Plotted {
		ln := svgLine{Class: s.Class, Name: s.Label}
		var path strings.Builder
		pen := false
		for i := range s.Cells {
			v, ok := m.value(&s.Cells[i])
			if !ok {
				pen = false
				continue
			}
			px, py := x(i), y(v)
			if pen {
				path.WriteByte('L')
			} else {
				path.WriteByte('M')
			}
			pen = true
			path.WriteString(strconv.FormatFloat(px, 'f', -1, 64) + " " + strconv.FormatFloat(py, 'f', -1, 64))
			ln.Points = append(ln.Points, svgPoint{X: px, Y: py,
				Title: s.Label + " · " + bucketTime(w.Buckets[i], w.Interval) + " · " + m.hover(&s.Cells[i])})
		}
		ln.D = path.String()
		c.Lines = append(c.Lines, ln)
	}
	return c
}

// niceScale rounds a maximum up to a whole number of steps of 1, 2 or 5
// times a power of ten, about four of them; the step is at least 1 (every
// metric is a count or whole milliseconds).
func niceScale(top float64) (float64, float64) {
	if top <= 0 {
		return 1, 1
	}
	raw := top / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, f := range []float64{1, 2, 5} {
		if f*mag >= raw {
			step = f * mag
			break
		}
	}
	step = max(step, 1)
	return math.Ceil(top/step) * step, step
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// compact writes an axis value: 950, 1.5k, 12M.
func compact(v float64) string {
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= u.div {
			return strconv.FormatFloat(math.Round(v/u.div*10)/10, 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// tickTime labels an x tick: the hour, with the date on the first tick and
// at midnight; the date alone for days.
func tickTime(t time.Time, interval string, first bool) string {
	t = t.UTC()
	if interval == "day" {
		return t.Format("Jan 2")
	}
	if first || t.Hour() == 0 {
		return t.Format("Jan 2 15:04")
	}
	return t.Format("15:04")
}

// bucketTime names a bucket in a hover title.
func bucketTime(t time.Time, interval string) string {
	if interval == "day" {
		return t.UTC().Format("2006-01-02") + " (UTC)"
	}
	return t.UTC().Format("2006-01-02 15:04") + "–" + t.UTC().Add(time.Hour).Format("15:04") + " UTC"
}
