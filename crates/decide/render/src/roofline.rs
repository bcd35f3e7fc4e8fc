//! `goodput roofline` rendered for people: the console report of a [`RooflineReport`] (the
//! model and memory lines, the step table, the notes) and its self-contained log-log SVG (axes
//! and grid, the roofs, the steps' points and their labels).

use std::fmt::Write as _;

use goodput_results::roofline::{Bound, RooflinePoint, RooflineReport};

/// `3.35 T`, `139.3 G`, `591.4 T`: three or four significant digits and an SI prefix.
fn si(x: f64) -> String {
    const PREFIXES: [(f64, &str); 7] =
        [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")];
    let (scale, p) = PREFIXES.into_iter().find(|(scale, _)| x.abs() >= *scale).unwrap_or((1.0, ""));
    let v = x / scale;
    if v.abs() < 10.0 { format!("{v:.2} {p}") } else { format!("{v:.1} {p}") }
}

fn duration(s: f64) -> String {
    match s {
        s if s >= 1.0 => format!("{s:.2} s"),
        s if s >= 0.01 => format!("{:.1} ms", s * 1e3),
        s => format!("{:.2} ms", s * 1e3),
    }
}

fn intensity(x: f64) -> String {
    if x >= 100.0 { format!("{x:.0}") } else { format!("{x:.1}") }
}

/// The console report.
pub fn render(r: &RooflineReport) -> String {
    let mut o = String::new();
    model_lines(&mut o, r);
    memory_lines(&mut o, r);
    step_table(&mut o, r);
    notes(&mut o, r);
    o
}

/// The title, the parameter count and the weights a decode step reads.
fn model_lines(o: &mut String, r: &RooflineReport) {
    let m = &r.memory;
    let b1 = r.decode.iter().find(|p| p.batch == 1).unwrap_or(&r.decode[0]);
    let _ = writeln!(
        o,
        "roofline: {} on {}× {} ({} weights, {} KV)\n",
        r.model,
        r.tp,
        r.gpu,
        r.dtype.name(),
        r.kv_dtype.name()
    );
    let _ = writeln!(
        o,
        "  parameters        {:.2}B total, {:.2}B active",
        r.total_params as f64 / 1e9,
        r.active_params as f64 / 1e9
    );
    let _ = writeln!(
        o,
        "  weights           {}B ({}B per GPU); a decode step at batch {} reads {}B of them\n{:20}(all but the input embedding, a lookup)",
        si(m.weight_bytes),
        si(m.weight_bytes_per_gpu),
        b1.batch,
        si(b1.weight_bytes),
        ""
    );
}

/// The KV cache per token and its capacity, the ridge point and the prompt's attention scores.
fn memory_lines(o: &mut String, r: &RooflineReport) {
    let m = &r.memory;
    let _ = writeln!(o, "  KV per token      {:.0} KiB (all layers, whole model)", m.kv_bytes_per_token / 1024.0);
    match (&m.plan, m.kv_capacity_tokens, m.max_batch, &m.does_not_fit) {
        (Some(p), Some(tokens), Some(max), _) => {
            let _ = writeln!(
                o,
                "  KV capacity       {tokens} tokens ({:.1} GB per GPU at {} memory utilization); at most {max} sequences of {} tokens",
                p.kv_gb, m.gpu_memory_utilization, r.spec.context
            );
        }
        (_, _, _, Some(why)) => {
            let _ = writeln!(o, "  KV capacity       none: {why}");
        }
        _ => {}
    }
    let _ = writeln!(
        o,
        "  ridge point       {:.0} FLOP/byte ({}FLOP/s {} ÷ {}B/s per GPU)",
        r.ridge_point,
        si(r.peak_flops),
        r.dtype.name(),
        si(r.bandwidth)
    );
    let scores = r.attention_scores_per_head_per_layer as f64;
    let _ = writeln!(
        o,
        "  prompt attention  {}² = {:.1}M scores per head per layer (causal kernels compute half)\n",
        r.spec.prompt,
        scores / 1e6
    );
}

/// The table: the prefill (TTFT) and each decode batch (TPOT).
fn step_table(o: &mut String, r: &RooflineReport) {
    let _ = writeln!(
        o,
        "  {:<14}{:>12}{:>12}{:>10}{:>9}{:>11}{:>12}{:>11}{:>6}",
        "step", "FLOPs", "bytes", "FLOP/B", "bound", "floor", "calibrated", "tok/s", "KV"
    );
    step_row(o, &r.prefill, "", "", "TTFT");
    // where the weights do not fit, no deployment reaches these rates: the floors stay (the
    // physics), the throughput is not claimed
    let fit = r.memory.does_not_fit.is_none();
    for d in &r.decode {
        let fits = match d.fits {
            Some(true) => "fits",
            Some(false) => "over",
            None if fit => "-",
            None => "none",
        };
        let tok_s = if fit { format!("{:.0}", d.batch as f64 / d.floor_s) } else { "-".into() };
        step_row(o, d, &tok_s, fits, "TPOT");
    }
}

/// One step's row: its FLOPs, bytes, intensity, bound and times, then `tok_s`, `kv` and the
/// latency its time floors (`phase`).
fn step_row(o: &mut String, p: &RooflinePoint, tok_s: &str, kv: &str, phase: &str) {
    let _ = writeln!(
        o,
        "  {:<14}{:>12}{:>12}{:>10}{:>9}{:>11}{:>12}{tok_s:>11}{kv:>6}   {phase}",
        p.label,
        si(p.flops),
        format!("{}B", si(p.bytes)),
        intensity(p.intensity),
        p.bound.name(),
        duration(p.floor_s),
        duration(p.calibrated_s),
    );
}

/// What the columns mean, where decode turns compute-bound, and the seed's band.
fn notes(o: &mut String, r: &RooflineReport) {
    let _ = writeln!(
        o,
        "\n  floor: every FLOP at peak and every byte at full bandwidth, nothing else (TTFT floor of the prefill,\n  \
         TPOT floor of a decode step; tok/s: the batch's output at the floor). calibrated: the engine model's step\n  \
         time at MFU {:.2} and MBU {:.2}, with its per-step overhead{}. Decode sequences attend\n  \
         {} tokens each; FLOPs and bytes are the whole model's{}.\n",
        r.mfu,
        r.mbu,
        if r.tp > 1 { " and tensor-parallel all-reduces" } else { "" },
        r.spec.context,
        if r.tp > 1 { format!(" (each GPU does 1/{})", r.tp) } else { String::new() }
    );
    let c = r.spec.context;
    if r.memory.does_not_fit.is_some() {
        let _ = writeln!(
            o,
            "  the weights do not fit (KV: none; tok/s: -): the floors are what the model and GPU would do, no deployment\n  \
             of this configuration runs at them\n"
        );
    }
    // one meaning of "bound" throughout: where a step's FLOP per byte sits against the ridge point
    // (the bound column); the calibrated model's own crossing is named as such
    let _ = match r.compute_bound_batch {
        Some(b) => writeln!(
            o,
            "  bound: a step's FLOP/byte against the ridge point ({} FLOP/byte); decode crosses it, turning \
             compute-bound, at batch {b}",
            intensity(r.ridge_point)
        ),
        None => writeln!(
            o,
            "  bound: a step's FLOP/byte against the ridge point ({} FLOP/byte); decode never crosses it",
            intensity(r.ridge_point)
        ),
    };
    if let Some(cal) = r.compute_bound_batch_calibrated {
        let _ = writeln!(
            o,
            "  (with the calibrated MFU and MBU the step's compute time overtakes its memory time from batch {cal}: \
             the calibrated column's crossing, not the bound column's)"
        );
    }
    let _ = writeln!(
        o,
        "  (context {c}: its intensity tends to {} FLOP/byte as the batch grows: weights are read once\n  \
         per step, KV once per sequence)",
        intensity(r.decode_intensity_limit)
    );
    let band = &r.seed_band;
    let quote = format!("the seed's \"{}–{} operations per byte at typical batch sizes\"", band.low, band.high);
    let _ = match band.batches {
        Some([lo, hi]) => writeln!(o, "  {quote}: decode at batch {lo}–{hi} (context {c})"),
        None => writeln!(o, "  {quote}: no decode batch reaches it at context {c}"),
    };
}

/// A power of ten for an axis, as a number and an SI prefix: `("0.1", "")`, `("10", "k")`.
fn decade(e: i32) -> (String, &'static str) {
    const PREFIXES: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    match PREFIXES.get((e / 3) as usize) {
        _ if e < 0 => (format!("{}", 10f64.powi(e)), ""),
        Some(p) => (10u64.pow((e % 3) as u32).to_string(), p),
        None => (format!("1e{e}"), ""),
    }
}

/// Escapes text for XML content and attribute values.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

/// The SVG's canvas and plot area, and the decades (log10) its axes span.
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    top: f64,
    pw: f64,
    ph: f64,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    /// Axes wide enough for every point and the ridge, tall enough for the calibrated slope at the
    /// left edge and twice the peak.
    fn new(r: &RooflineReport, points: &[&RooflinePoint]) -> Frame {
        let (w, h) = (900.0, 600.0);
        let (left, right, top, bottom) = (110.0, 40.0, 60.0, 80.0);
        let (pw, ph) = (w - left - right, h - top - bottom);
        let lo_i = points.iter().map(|p| p.intensity).fold(1.0, f64::min);
        let hi_i = points.iter().map(|p| p.intensity).fold(r.ridge_point, f64::max);
        let (x0, x1) = ((lo_i / 2.0).log10().floor(), (hi_i * 2.0).log10().ceil());
        let (y0, y1) =
            ((10f64.powf(x0) * r.bandwidth * r.mbu.min(1.0)).log10().floor(), (r.peak_flops * 2.0).log10().ceil());
        Frame { w, h, left, top, pw, ph, x0, x1, y0, y1 }
    }

    /// An intensity's horizontal position.
    fn x(&self, v: f64) -> f64 {
        self.left + (v.log10() - self.x0) / (self.x1 - self.x0) * self.pw
    }

    /// A FLOP/s's vertical position.
    fn y(&self, v: f64) -> f64 {
        self.top + self.ph - (v.log10() - self.y0) / (self.y1 - self.y0) * self.ph
    }

    fn xmin(&self) -> f64 {
        10f64.powf(self.x0)
    }

    fn xmax(&self) -> f64 {
        10f64.powf(self.x1)
    }
}

/// A log-log roofline, self-contained: the roof (bandwidth slope and compute ceiling) per GPU,
/// the calibrated roof, the ridge point, the seed's 60–80 FLOP/byte band, and the prefill and
/// each decode step at the FLOP/s their intensity allows. Every element is labelled.
pub fn svg(r: &RooflineReport) -> String {
    let points: Vec<_> = std::iter::once(&r.prefill).chain(&r.decode).collect();
    let f = Frame::new(r, &points);
    let mut o = String::new();
    svg_head(&mut o, r, &f);
    seed_band(&mut o, r, &f);
    axes(&mut o, &f);
    roofs(&mut o, r, &f);
    step_points(&mut o, r, &f, &points);
    let _ = writeln!(o, "</svg>");
    o
}

/// The XML declaration, the `<svg>` element, its title and white background.
fn svg_head(o: &mut String, r: &RooflineReport, f: &Frame) {
    let (w, h) = (f.w, f.h);
    let _ = writeln!(
        o,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">
<title>{}</title>
<rect x="0" y="0" width="{w}" height="{h}" fill="white"/>
<text id="title" x="{}" y="30" text-anchor="middle" font-size="16">{}</text>"#,
        xml(&format!("Roofline: {} on {} ({}), per GPU", r.model, r.gpu, r.dtype.name())),
        f.left + f.pw / 2.0,
        xml(&format!("Roofline: {} on {} ({} weights, TP {}), per GPU", r.model, r.gpu, r.dtype.name(), r.tp))
    );
}

/// The seed's 60–80 FLOP/byte band, where it lies inside the axes.
fn seed_band(o: &mut String, r: &RooflineReport, f: &Frame) {
    let (blo, bhi) = (r.seed_band.low, r.seed_band.high);
    if blo > f.xmin() && bhi < f.xmax() {
        let (top, ph) = (f.top, f.ph);
        let _ = writeln!(
            o,
            r##"<g id="seed-band"><rect x="{:.1}" y="{top}" width="{:.1}" height="{ph}" fill="#fdf2c4"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#8a6d00">{}–{} FLOP/B (seed)</text></g>"##,
            f.x(blo),
            f.x(bhi) - f.x(blo),
            (f.x(blo) + f.x(bhi)) / 2.0,
            top + 14.0,
            blo,
            bhi
        );
    }
}

/// The plot's frame, a grid line and label at each decade of both axes, and the axis titles.
fn axes(o: &mut String, f: &Frame) {
    let (left, top, pw, ph) = (f.left, f.top, f.pw, f.ph);
    let _ = writeln!(o, r##"<g id="axes" stroke="#999" fill="none">"##);
    let _ = writeln!(o, r#"<rect x="{left}" y="{top}" width="{pw}" height="{ph}"/>"#);
    let _ = writeln!(o, "</g>");
    let _ = writeln!(o, r##"<g id="x-ticks" fill="#333" text-anchor="middle">"##);
    for e in (f.x0 as i32)..=(f.x1 as i32) {
        let (n, p) = decade(e);
        let _ = writeln!(
            o,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1}" stroke="#eee"/><text x="{0:.1}" y="{2}">{3}{4}</text>"##,
            f.x(10f64.powi(e)),
            top + ph,
            top + ph + 18.0,
            n,
            p
        );
    }
    let _ = writeln!(o, "</g>");
    let _ = writeln!(o, r##"<g id="y-ticks" fill="#333" text-anchor="end">"##);
    for e in (f.y0 as i32)..=(f.y1 as i32) {
        let v = 10f64.powi(e);
        let (n, p) = decade(e);
        let _ = writeln!(
            o,
            r##"<line x1="{left}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#eee"/><text x="{2}" y="{3:.1}">{4} {5}FLOP/s</text>"##,
            f.y(v),
            left + pw,
            left - 6.0,
            f.y(v) + 4.0,
            n,
            p
        );
    }
    let _ = writeln!(o, "</g>");
    let _ = writeln!(
        o,
        r#"<text id="x-label" x="{:.1}" y="{:.1}" text-anchor="middle">arithmetic intensity (FLOP/byte)</text>
<text id="y-label" transform="translate(22 {:.1}) rotate(-90)" text-anchor="middle">attainable FLOP/s per GPU</text>"#,
        left + pw / 2.0,
        f.h - 30.0,
        top + ph / 2.0
    );
}

/// The peak roof, the calibrated roof (dashed) and the ridge point.
fn roofs(o: &mut String, r: &RooflineReport, f: &Frame) {
    let (xmin, xmax) = (f.xmin(), f.xmax());
    let roof = |peak: f64, bw: f64| {
        let ridge = peak / bw;
        format!(
            "{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}",
            f.x(xmin),
            f.y(xmin * bw),
            f.x(ridge),
            f.y(peak),
            f.x(xmax),
            f.y(peak)
        )
    };
    let _ = writeln!(
        o,
        r##"<g id="roof"><polyline points="{}" fill="none" stroke="#1f4e9c" stroke-width="2.5"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#1f4e9c">peak {}FLOP/s, {}B/s</text></g>"##,
        roof(r.peak_flops, r.bandwidth),
        f.x(xmax) - 6.0,
        f.y(r.peak_flops) - 8.0,
        si(r.peak_flops),
        si(r.bandwidth)
    );
    let (cp, cb) = (r.peak_flops * r.mfu, r.bandwidth * r.mbu);
    let _ = writeln!(
        o,
        r##"<g id="calibrated-roof"><polyline points="{}" fill="none" stroke="#7a9cd3" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#7a9cd3">calibrated (MFU {:.2}, MBU {:.2})</text></g>"##,
        roof(cp, cb),
        f.x(xmax) - 6.0,
        f.y(cp) + 16.0,
        r.mfu,
        r.mbu
    );
    let _ = writeln!(
        o,
        r##"<g id="ridge"><line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="#1f4e9c" stroke-dasharray="3 3"/><circle cx="{0:.1}" cy="{1:.1}" r="4" fill="#1f4e9c"/><text x="{3:.1}" y="{4:.1}" fill="#1f4e9c">ridge {5:.0} FLOP/B</text></g>"##,
        f.x(r.ridge_point),
        f.y(r.peak_flops),
        f.top + f.ph,
        f.x(r.ridge_point) + 6.0,
        f.top + f.ph - 8.0,
        r.ridge_point
    );
}

/// Each step's point with its label and a tooltip: the prefill first, then each decode batch.
fn step_points(o: &mut String, r: &RooflineReport, f: &Frame, points: &[&RooflinePoint]) {
    let mut placed: Vec<[f64; 4]> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let (px, py) = (f.x(p.intensity), f.y(p.attainable_flops));
        let (id, color, label) = if i == 0 {
            ("prefill".to_string(), "#c0392b", format!("prefill {} ({})", r.spec.prompt, intensity(p.intensity)))
        } else {
            (format!("decode-b{}", p.batch), "#27864a", format!("b={} ({})", p.batch, intensity(p.intensity)))
        };
        let (dx, dy, anchor) = place_label(&mut placed, i, points.len(), (px, py), &label);
        let bound = if p.bound == Bound::Compute { "compute-bound" } else { "memory-bound" };
        let _ = writeln!(
            o,
            r#"<g id="{id}" class="point {}"><title>{}</title><circle cx="{px:.1}" cy="{py:.1}" r="5" fill="{color}"/><text x="{:.1}" y="{:.1}" text-anchor="{anchor}" fill="{color}">{}</text></g>"#,
            bound,
            xml(&format!("{}: {} FLOP/byte, {bound}, floor {}", p.label, intensity(p.intensity), duration(p.floor_s))),
            px + dx,
            py + dy,
            xml(&label)
        );
    }
}

/// Where the `i`th point's label goes, as an offset from the point and a text anchor. Decode
/// labels alternate above-left and below-right of the slope, each moved further out while it would
/// overlap one already `placed`; the prefill's sits below the ceiling. Records the label's box.
fn place_label(
    placed: &mut Vec<[f64; 4]>,
    i: usize,
    n: usize,
    (px, py): (f64, f64),
    label: &str,
) -> (f64, f64, &'static str) {
    let (dx, mut dy, anchor, step) = match (i, i % 2) {
        (0, _) => (0.0, 22.0, "middle", 14.0),
        (_, 1) => (-8.0, -8.0, "end", -14.0),
        _ => (8.0, 16.0, "start", 14.0),
    };
    let width = 7.0 * label.chars().count() as f64;
    let left_edge = match anchor {
        "end" => px + dx - width,
        "middle" => px + dx - width / 2.0,
        _ => px + dx,
    };
    let overlaps =
        |ty: f64, b: &[f64; 4]| left_edge < b[1] && left_edge + width > b[0] && ty - 12.0 < b[3] && ty > b[2];
    for _ in 0..n {
        if !placed.iter().any(|b| overlaps(py + dy, b)) {
            break;
        }
        dy += step;
    }
    placed.push([left_edge, left_edge + width, py + dy - 12.0, py + dy]);
    (dx, dy, anchor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_decide::roofline::analyze;
    use goodput_engine::{Catalog, EngineConfig, Given, Preset};
    use goodput_results::roofline::RooflineSpec;

    /// What `goodput roofline --model {model} --gpu h100 --tp {tp}` computes.
    fn report(model: &str, tp: u32) -> RooflineReport {
        let c = Catalog::builtin();
        let mut cfg = EngineConfig::new(c.model(model).unwrap().clone(), c.gpu("h100").unwrap().clone());
        Preset::Vllm.apply(&mut cfg);
        cfg.tp = tp;
        Preset::Vllm.derive(&mut cfg, Given { memory_utilization: false, max_num_seqs: false, kv_dtype: false });
        let spec = RooflineSpec { prompt: 4096, context: 1024, batches: vec![1, 8, 32, 64, 128, 256, 512] };
        analyze(&cfg, &spec).unwrap()
    }

    #[test]
    fn svg_is_labelled_and_escaped() {
        let mut r = report("mixtral-8x7b", 2);
        r.model = "a<b&c".into();
        let s = svg(&r);
        assert!(s.contains("a&lt;b&amp;c") && !s.contains("a<b"));
        for id in ["roof", "ridge", "prefill", "decode-b1", "decode-b512", "x-label", "y-label", "seed-band"] {
            assert!(s.contains(&format!("id=\"{id}\"")), "{id}");
        }
        assert!(!s.contains("NaN") && !s.contains("inf") && !s.contains("href"));
    }
}
