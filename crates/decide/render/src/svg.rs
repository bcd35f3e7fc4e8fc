//! Hand-written inline SVG charts: axes with round ticks, line, step, scatter and bar series, a
//! legend. No external resource of any kind; the markup is well-formed XML (every element closed,
//! every attribute quoted, text escaped), so the same chart opens inline in HTML or on its own.
//!
//! Every chart is an `<svg class="chart" id="…">`, and every series a
//! `<g class="series" data-points="N">` (or a `<polyline>` with `data-points`), so tests can find
//! a chart and count what was drawn.

use std::fmt::Write;

/// Most points a series is drawn from (statistics are computed from every sample elsewhere).
pub const MAX_POINTS: usize = 2000;

const W: f64 = 640.0;
const H: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

/// A palette that stays apart in print and for common colour blindness (Okabe–Ito).
const COLORS: [&str; 8] = ["#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#000000", "#f0e442"];

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Points joined by straight lines.
    Line,
    /// A step function (a CDF: each point holds until the next).
    Step,
    /// Separate dots.
    Dots,
    /// Bars of equal width centred on each x (a histogram).
    Bars,
}

/// One series: a name for the legend and its points (already downsampled), with a name for each
/// point where the points are things (a request, a run, a deployment), and whether those names
/// are written on the chart beside their points.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub mark: Mark,
    pub points: Vec<(f64, f64)>,
    /// Empty, or one per point.
    pub labels: Vec<String>,
    pub annotate: bool,
}

/// Hover targets a line carries: at most this many of its vertices, evenly spaced, each with its
/// title (a dot or bar carries its own, every one).
pub const LINE_TARGETS: usize = 40;

impl Series {
    pub fn new(name: impl Into<String>, mark: Mark, points: Vec<(f64, f64)>) -> Self {
        let points = points.into_iter().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
        Series { name: name.into(), mark, points, labels: Vec::new(), annotate: false }
    }

    /// A series whose points are named things; `annotate` writes the names on the chart.
    pub fn labelled(name: impl Into<String>, mark: Mark, points: Vec<(f64, f64, String)>, annotate: bool) -> Self {
        let (points, labels) =
            points.into_iter().filter(|(x, y, _)| x.is_finite() && y.is_finite()).map(|(x, y, l)| ((x, y), l)).unzip();
        Series { name: name.into(), mark, points, labels, annotate }
    }
}

/// A chart: an id (unique in the page), a title, axis labels and its series.
#[derive(Clone, Debug)]
pub struct Chart {
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Start the y axis at zero (counts, rates, shares) rather than at the data's minimum.
    pub y_from_zero: bool,
}

impl Chart {
    pub fn new(id: impl Into<String>, title: impl Into<String>, x_label: &str, y_label: &str) -> Self {
        Chart {
            id: id.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            y_from_zero: true,
        }
    }

    pub fn with(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }

    /// Whether any series has a point.
    pub fn has_points(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }

    /// The chart as an `<svg>` element.
    pub fn svg(&self) -> String {
        let mut o = String::with_capacity(1024 + self.series.iter().map(|s| s.points.len() * 14).sum::<usize>());
        let _ = write!(
            o,
            r#"<svg class="chart" id="{}" viewBox="0 0 {W} {H}" role="img" aria-label="{}">"#,
            esc(&self.id),
            esc(&self.title)
        );
        let _ = write!(o, "<title>{}</title>", esc(&self.title));
        let _ = write!(o, r#"<text class="ct" x="{LEFT}" y="16">{}</text>"#, esc(&self.title));
        let Some(plot) = self.plot() else {
            let _ = write!(o, r#"<text class="empty" x="{}" y="{}">no data</text></svg>"#, W / 2.0 - 24.0, H / 2.0);
            return o;
        };
        self.write_axes(&mut o, &plot);
        self.write_series(&mut o, &plot);
        self.write_legend(&mut o);
        o.push_str("</svg>");
        o
    }

    /// The range the points span, widened for bars and rounded out to ticks; `None` without a point.
    fn plot(&self) -> Option<Plot> {
        let all = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
        for &(x, y) in all {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if !x0.is_finite() {
            return None;
        }
        let bars = self.series.iter().any(|s| s.mark == Mark::Bars);
        if bars {
            // room for the outer bars' halves
            let half = bar_width(&self.series) / 2.0;
            x0 -= half;
            x1 += half;
        }
        if self.y_from_zero {
            y0 = y0.min(0.0);
        }
        let (xt, x0, x1) = ticks(x0, x1);
        let (yt, y0, y1) = ticks(y0, y1);
        let bw = if bars { bar_width(&self.series) } else { 0.0 };
        Some(Plot { xt, yt, x0, x1, y0, y1, bw })
    }

    /// Writes the axes: grid lines and tick labels, the frame, and the axis labels.
    fn write_axes(&self, o: &mut String, plot: &Plot) {
        let (px, py) = (|x: f64| plot.px(x), |y: f64| plot.py(y));
        // axes and grid
        o.push_str(r#"<g class="axis">"#);
        for &t in &plot.yt {
            let y = py(t);
            let _ = write!(
                o,
                r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                W - RIGHT,
                LEFT - 4.0,
                y + 3.5,
                num(t)
            );
        }
        for &t in &plot.xt {
            let x = px(t);
            let _ = write!(
                o,
                r#"<line class="tick" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                H - BOTTOM,
                H - BOTTOM + 4.0,
                H - BOTTOM + 16.0,
                num(t)
            );
        }
        let _ = write!(
            o,
            r#"<line class="frame" x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/><line class="frame" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}"/>"#,
            H - BOTTOM,
            W - RIGHT,
            H - BOTTOM,
            H - BOTTOM
        );
        let _ = write!(
            o,
            r#"<text class="al" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="al" x="12" y="{:.1}" text-anchor="middle" transform="rotate(-90 12 {:.1})">{}</text></g>"#,
            (LEFT + W - RIGHT) / 2.0,
            H - 8.0,
            esc(&self.x_label),
            (TOP + H - BOTTOM) / 2.0,
            (TOP + H - BOTTOM) / 2.0,
            esc(&self.y_label)
        );
    }

    /// A point's hover text: its series, its name where it has one, x and y with the axes' labels.
    fn point_title(&self, s: &Series, k: usize) -> String {
        let (x, y) = s.points[k];
        let name = s.labels.get(k).map_or(String::new(), |l| format!(" · {l}"));
        esc(&format!("{}{name}: {} = {}, {} = {}", s.name, self.x_label, num(x), self.y_label, num(y)))
    }

    /// Writes each series as a group of its marks: a polyline (with titled hover targets on up to
    /// [`LINE_TARGETS`] of its vertices), dots or bars (each titled), and the names of annotated
    /// points beside them.
    fn write_series(&self, o: &mut String, plot: &Plot) {
        let (px, py) = (|x: f64| plot.px(x), |y: f64| plot.py(y));
        let (x0, y0, bw) = (plot.x0, plot.y0, plot.bw);
        for (i, s) in self.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let n = s.points.len();
            let _ = write!(o, r#"<g class="series" data-points="{n}" data-name="{}">"#, esc(&s.name));
            match s.mark {
                Mark::Line | Mark::Step => {
                    let _ = write!(o, r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points=""#);
                    let mut prev: Option<f64> = None;
                    for &(x, y) in &s.points {
                        if let (Mark::Step, Some(py0)) = (s.mark, prev) {
                            let _ = write!(o, "{:.1},{:.1} ", px(x), py0);
                        }
                        let _ = write!(o, "{:.1},{:.1} ", px(x), py(y));
                        prev = Some(py(y));
                    }
                    let _ = write!(o, r#""><title>{}</title></polyline>"#, esc(&s.name));
                    let every = n.div_ceil(LINE_TARGETS).max(1);
                    for k in (0..n).filter(|k| k % every == 0 || *k == n - 1 || !s.labels.is_empty()) {
                        let (x, y) = s.points[k];
                        let _ = write!(
                            o,
                            r#"<circle class="hp" cx="{:.1}" cy="{:.1}" r="3" fill="{c}" fill-opacity="0"><title>{}</title></circle>"#,
                            px(x),
                            py(y),
                            self.point_title(s, k)
                        );
                    }
                }
                Mark::Dots => {
                    for (k, &(x, y)) in s.points.iter().enumerate() {
                        let _ = write!(
                            o,
                            r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"><title>{}</title></circle>"#,
                            px(x),
                            py(y),
                            self.point_title(s, k)
                        );
                    }
                }
                Mark::Bars => {
                    let w = (px(x0 + bw) - px(x0)).max(0.5);
                    let base = py(y0.max(0.0));
                    for (k, &(x, y)) in s.points.iter().enumerate() {
                        let top = py(y);
                        let _ = write!(
                            o,
                            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{c}" fill-opacity="0.75"><title>{}</title></rect>"#,
                            px(x) - w / 2.0,
                            top.min(base),
                            w,
                            (base - top).abs(),
                            self.point_title(s, k)
                        );
                    }
                }
            }
            if s.annotate {
                for (k, &(x, y)) in s.points.iter().enumerate() {
                    if let Some(l) = s.labels.get(k) {
                        let _ = write!(
                            o,
                            r#"<text class="pl" x="{:.1}" y="{:.1}">{}</text>"#,
                            px(x) + 5.0,
                            py(y) - 5.0,
                            esc(l)
                        );
                    }
                }
            }
            o.push_str("</g>");
        }
    }

    /// Writes the legend, when there is more than one series: on the title's line, flush right.
    fn write_legend(&self, o: &mut String) {
        if self.series.len() > 1 {
            let width: f64 = self.series.iter().map(|s| 24.0 + 6.2 * s.name.chars().count() as f64).sum();
            let mut lx = (W - RIGHT - width).max(LEFT + 6.5 * self.title.chars().count() as f64 + 12.0);
            o.push_str(r#"<g class="legend">"#);
            for (i, s) in self.series.iter().enumerate() {
                let c = COLORS[i % COLORS.len()];
                let _ = write!(
                    o,
                    r#"<rect x="{lx:.1}" y="7" width="10" height="10" fill="{c}"/><text x="{:.1}" y="16">{}</text>"#,
                    lx + 13.0,
                    esc(&s.name)
                );
                lx += 24.0 + 6.2 * s.name.chars().count() as f64;
            }
            o.push_str("</g>");
        }
    }
}

/// A chart's plotted range, rounded out to its ticks, and the mapping from data to pixels.
struct Plot {
    /// The x and y ticks.
    xt: Vec<f64>,
    yt: Vec<f64>,
    /// The plotted x and y ranges.
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    /// The bars' width in data units (0 without bar series).
    bw: f64,
}

impl Plot {
    /// The pixel x of data x.
    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0) * (W - LEFT - RIGHT)
    }

    /// The pixel y of data y.
    fn py(&self, y: f64) -> f64 {
        H - BOTTOM - (y - self.y0) / (self.y1 - self.y0) * (H - TOP - BOTTOM)
    }
}

/// The narrowest gap between consecutive x of the bar series (their bars' width).
fn bar_width(series: &[Series]) -> f64 {
    let w = series
        .iter()
        .filter(|s| s.mark == Mark::Bars)
        .flat_map(|s| s.points.windows(2).map(|w| (w[1].0 - w[0].0).abs()))
        .filter(|d| *d > 0.0)
        .fold(f64::INFINITY, f64::min);
    if w.is_finite() { w } else { 1.0 }
}

/// Round ticks covering `[lo, hi]` (about five), and the widened range they span.
pub fn ticks(lo: f64, hi: f64) -> (Vec<f64>, f64, f64) {
    let (lo, hi) = if hi - lo <= f64::EPSILON * lo.abs().max(1.0) {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        (lo - pad, hi + pad)
    } else {
        (lo, hi)
    };
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    let end = (hi / step).ceil() * step;
    let n = ((end - start) / step).round() as usize;
    ((0..=n).map(|i| start + i as f64 * step).collect(), start, end)
}

/// A tick label: short, without float noise.
fn num(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.1}M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", x / 1e3)
    } else if a >= 100.0 || (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        format!("{x:.1}")
    } else {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Escapes text for HTML and XML (element content and quoted attributes).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// At most `max` of `points`, evenly spaced by index, the first and the last always kept.
pub fn downsample<T: Clone>(points: &[T], max: usize) -> Vec<T> {
    if points.len() <= max || max < 2 {
        return points.to_vec();
    }
    let last = points.len() - 1;
    (0..max).map(|i| points[i * last / (max - 1)].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let (t, lo, hi) = ticks(3.2, 97.0);
        assert_eq!(lo, 0.0);
        assert_eq!(hi, 100.0);
        assert!(t.len() >= 4 && t.len() <= 11, "{t:?}");
        let (t, lo, hi) = ticks(5.0, 5.0);
        assert!(lo < 5.0 && hi > 5.0 && !t.is_empty());
    }

    #[test]
    fn downsample_keeps_ends_and_bounds_the_count() {
        let v: Vec<u32> = (0..10_000).collect();
        let d = downsample(&v, 2000);
        assert_eq!(d.len(), 2000);
        assert_eq!((d[0], d[1999]), (0, 9999));
        assert_eq!(downsample(&v[..5], 2000), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_chart_is_well_formed_and_counts_its_points() {
        let c = Chart::new("chart-x", "A <title> & more", "x", "y")
            .with(Series::new("a", Mark::Step, vec![(0.0, 0.0), (1.0, 0.5), (2.0, 1.0)]))
            .with(Series::new("b", Mark::Bars, vec![(0.5, 3.0), (1.5, 4.0)]))
            .with(Series::new("c", Mark::Dots, vec![(1.0, f64::NAN), (1.0, 2.0)]));
        let s = c.svg();
        assert!(s.starts_with(r#"<svg class="chart" id="chart-x""#));
        assert!(
            s.contains(r#"data-points="3""#) && s.contains(r#"data-points="2""#) && s.contains(r#"data-points="1""#)
        );
        assert!(s.contains("A &lt;title&gt; &amp; more"));
        assert!(!s.contains("NaN") && !s.contains("inf"));
        assert_eq!(s.matches("<svg").count(), s.matches("</svg>").count());
        assert_eq!(s.matches("<g").count(), s.matches("</g>").count());
        let empty = Chart::new("e", "empty", "x", "y").svg();
        assert!(empty.contains("no data") && empty.ends_with("</svg>"));
    }
}
