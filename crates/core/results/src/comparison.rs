//! What comparing result documents produces (`goodput compare --out`, `goodput check`), as
//! data: workload fingerprints and their differences, the metrics compared and their deltas with
//! significance, `--max-regress` bounds and their outcomes. Computing them is
//! `goodput_decide::compare`; every rule is spelled out in `docs/metrics.md`, "Comparing runs".

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Received mean lengths that differ by more than this share (and more than one token) make two
/// workloads different.
pub const LENGTH_TOLERANCE: f64 = 0.05;

// ---------------------------------------------------------------------------------------------
// Fingerprint

/// One field of a workload fingerprint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum FieldValue {
    /// Must be equal.
    Exact(String),
    /// A mean length: equal within [`LENGTH_TOLERANCE`] (or one token).
    Approx(f64),
    /// Not recorded (a field one side does not have is not compared).
    Absent,
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Exact(s) => f.write_str(s),
            FieldValue::Approx(x) => write!(f, "{x:.1}"),
            FieldValue::Absent => f.write_str("-"),
        }
    }
}

/// What a run's workload was: the fields two runs must share to be compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub fields: BTreeMap<String, FieldValue>,
}

/// One field that differs between two fingerprints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    pub field: String,
    pub a: String,
    pub b: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} vs {}", self.field, self.a, self.b)
    }
}

impl Fingerprint {
    /// Every field that differs (fields absent on either side are not compared).
    pub fn differences(&self, other: &Fingerprint) -> Vec<Difference> {
        let mut out = Vec::new();
        for (k, a) in &self.fields {
            let b = other.fields.get(k).unwrap_or(&FieldValue::Absent);
            let differ = match (a, b) {
                (FieldValue::Exact(x), FieldValue::Exact(y)) => x != y,
                (FieldValue::Approx(x), FieldValue::Approx(y)) => {
                    (x - y).abs() > 1.0 && (x - y).abs() > LENGTH_TOLERANCE * x.abs().max(y.abs())
                }
                _ => false,
            };
            if differ {
                out.push(Difference { field: k.clone(), a: a.to_string(), b: b.to_string() });
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Metrics

/// A latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Latency {
    Ttft,
    Tpot,
    Itl,
    E2e,
    /// A reasoning model's time to the first answer token (only where a run reasoned).
    Ttfo,
}

/// A statistic of a latency distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stat {
    Mean,
    P50,
    P90,
    P99,
}

/// A metric that is compared and can be bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Metric {
    Latency(Stat, Latency),
    /// Completed requests per second.
    RequestThroughput,
    /// Output tokens per second.
    OutputThroughput,
    /// Share of attempted requests within the SLO (a fraction; deltas in percentage points).
    Attainment,
    /// Good requests per second.
    Goodput,
    /// Output tokens of good requests per second.
    TokenGoodput,
}

impl Metric {
    pub const LATENCIES: [Latency; 5] = [Latency::Ttft, Latency::Tpot, Latency::Itl, Latency::E2e, Latency::Ttfo];
    pub const STATS: [Stat; 4] = [Stat::Mean, Stat::P50, Stat::P90, Stat::P99];

    /// Every metric `compare` reports, in its order.
    pub fn all() -> Vec<Metric> {
        let mut v: Vec<Metric> =
            Self::LATENCIES.iter().flat_map(|&l| Self::STATS.iter().map(move |&s| Metric::Latency(s, l))).collect();
        v.extend([
            Metric::RequestThroughput,
            Metric::OutputThroughput,
            Metric::Attainment,
            Metric::Goodput,
            Metric::TokenGoodput,
        ]);
        v
    }

    /// `p99(ttft)`, `mean(itl)`, `output_throughput`, …
    pub fn name(self) -> String {
        match self {
            Metric::Latency(s, l) => {
                let s = match s {
                    Stat::Mean => "mean",
                    Stat::P50 => "p50",
                    Stat::P90 => "p90",
                    Stat::P99 => "p99",
                };
                let l = match l {
                    Latency::Ttft => "ttft",
                    Latency::Tpot => "tpot",
                    Latency::Itl => "itl",
                    Latency::E2e => "e2e",
                    Latency::Ttfo => "ttfo",
                };
                format!("{s}({l})")
            }
            Metric::RequestThroughput => "request_throughput".into(),
            Metric::OutputThroughput => "output_throughput".into(),
            Metric::Attainment => "attainment".into(),
            Metric::Goodput => "goodput".into(),
            Metric::TokenGoodput => "token_goodput".into(),
        }
    }

    /// The unit of its values.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Latency(..) => "ms",
            Metric::RequestThroughput | Metric::Goodput => "req/s",
            Metric::OutputThroughput | Metric::TokenGoodput => "tok/s",
            Metric::Attainment => "",
        }
    }

    /// True when a larger value is worse (latencies); false for throughputs and attainment.
    pub fn higher_is_worse(self) -> bool {
        matches!(self, Metric::Latency(..))
    }

    fn parse_name(s: &str) -> Option<Metric> {
        let s = s.trim().to_ascii_lowercase();
        let simple = match s.as_str() {
            "request_throughput" => Some(Metric::RequestThroughput),
            "output_throughput" => Some(Metric::OutputThroughput),
            "attainment" => Some(Metric::Attainment),
            "goodput" | "request_goodput" => Some(Metric::Goodput),
            "token_goodput" => Some(Metric::TokenGoodput),
            _ => None,
        };
        if simple.is_some() {
            return simple;
        }
        let (stat, rest) = s.split_once('(')?;
        let lat = rest.strip_suffix(')')?;
        let stat = match stat.trim() {
            "mean" => Stat::Mean,
            "p50" | "median" => Stat::P50,
            "p90" => Stat::P90,
            "p99" => Stat::P99,
            _ => return None,
        };
        let lat = match lat.trim() {
            "ttft" => Latency::Ttft,
            "tpot" => Latency::Tpot,
            "itl" => Latency::Itl,
            "e2e" => Latency::E2e,
            "ttfo" => Latency::Ttfo,
            _ => return None,
        };
        Some(Metric::Latency(stat, lat))
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl From<Metric> for String {
    fn from(m: Metric) -> String {
        m.name()
    }
}

impl TryFrom<String> for Metric {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Metric::parse_name(s).ok_or_else(|| {
            format!(
                "unknown metric `{}`; expected mean|p50|p90|p99(ttft|tpot|itl|e2e|ttfo), request_throughput, output_throughput, attainment, goodput or token_goodput",
                s.trim()
            )
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Comparison

/// Whether a difference is significant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Significance {
    /// The 95% interval of the difference excludes 0.
    Significant,
    /// It includes 0.
    NotSignificant,
    /// Not decidable from these files (a throughput of single runs, a missing value).
    NotAvailable,
}

impl Significance {
    /// Whether a 95% interval of a difference excludes 0.
    pub fn of(ci: Option<[f64; 2]>) -> Self {
        match ci {
            Some([lo, hi]) if lo > 0.0 || hi < 0.0 => Significance::Significant,
            Some(_) => Significance::NotSignificant,
            None => Significance::NotAvailable,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Significance::Significant => "yes",
            Significance::NotSignificant => "no",
            Significance::NotAvailable => "n/a",
        }
    }
}

/// How an interval was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Seeded bootstrap of the per-request samples (medians, p90s, p99s of TTFT, TPOT, E2E).
    Bootstrap,
    /// Normal approximation from each side's mean, standard deviation and count (means).
    Normal,
    /// The order-statistic intervals of each percentile (ITL): the widest difference they allow.
    OrderStatistics,
    /// Two proportions (attainment).
    Proportions,
    /// The spread between runs of one file (throughputs and goodput with several runs).
    RunToRun,
    None,
}

/// One metric of one comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricDelta {
    pub metric: Metric,
    pub unit: String,
    pub base: Option<f64>,
    pub other: Option<f64>,
    /// `other − base`.
    pub delta: Option<f64>,
    /// `(other − base) / base`, a fraction.
    pub relative: Option<f64>,
    /// 95% interval of `other − base`.
    pub ci: Option<[f64; 2]>,
    pub method: Method,
    pub significance: Significance,
    /// The difference is significant and in the metric's worse direction.
    pub regression: bool,
}

/// One file against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub base: String,
    pub other: String,
    /// Workload fields that differ (a comparison is refused unless forced when any do).
    pub differences: Vec<Difference>,
    /// Either side's cautions ([`Subject::cautions`]): read a significant difference with them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cautions: Vec<String>,
    pub metrics: Vec<MetricDelta>,
}

impl Comparison {
    pub fn get(&self, m: Metric) -> Option<&MetricDelta> {
        self.metrics.iter().find(|d| d.metric == m)
    }
}

// ---------------------------------------------------------------------------------------------
// Bounds

/// How much a metric may regress.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Limit {
    /// Percent of the baseline's value.
    Percent(f64),
    /// Percentage points (attainment).
    Points(f64),
    /// In the metric's unit (ms for latencies, req/s, tok/s).
    Absolute(f64),
}

/// One `--max-regress` bound: `METRIC=[+|-]AMOUNT[%|pt|ms|s|us|req/s|tok/s]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub metric: Metric,
    pub limit: Limit,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.metric.higher_is_worse() { "+" } else { "-" };
        match self.limit {
            Limit::Percent(x) => write!(f, "{}={sign}{x}%", self.metric),
            Limit::Points(x) => write!(f, "{}={sign}{x}pt", self.metric),
            Limit::Absolute(x) => write!(f, "{}={sign}{x}{}", self.metric, self.metric.unit()),
        }
    }
}

impl std::str::FromStr for Bound {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (name, amount) =
            text.split_once('=').ok_or_else(|| format!("`{}`: expected METRIC=AMOUNT", text.trim()))?;
        let metric: Metric = name.parse()?;
        let a = amount.trim();
        let (sign, rest) = match a.as_bytes().first() {
            Some(b'+') => (Some(true), &a[1..]),
            Some(b'-') => (Some(false), &a[1..]),
            _ => (None, a),
        };
        if let Some(up) = sign
            && up != metric.higher_is_worse()
        {
            let want = if metric.higher_is_worse() {
                "+ (it regresses when it rises)"
            } else {
                "- (it regresses when it falls)"
            };
            return Err(format!("`{}`: {metric} takes {want}, or no sign", text.trim()));
        }
        let rest = rest.trim();
        let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, unit) = (&rest[..split], rest[split..].trim());
        let x: f64 = num
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("`{}`: `{a}` is not an amount", text.trim()))?;
        let bad_unit = |expected: &str| format!("`{}`: {metric} takes {expected}", text.trim());
        let limit = match (unit, metric) {
            ("%", _) => Limit::Percent(x),
            ("pt", Metric::Attainment) => Limit::Points(x),
            ("pt", _) => return Err(bad_unit("%, or an amount in its unit (pt is for attainment)")),
            (u, Metric::Latency(..)) => match u {
                "ms" => Limit::Absolute(x),
                "s" => Limit::Absolute(x * 1000.0),
                "us" | "µs" => Limit::Absolute(x / 1000.0),
                _ => return Err(bad_unit("%, ms, s or us")),
            },
            (u, Metric::RequestThroughput | Metric::Goodput) if u.is_empty() || u == "req/s" => Limit::Absolute(x),
            (u, Metric::OutputThroughput | Metric::TokenGoodput) if u.is_empty() || u == "tok/s" => Limit::Absolute(x),
            (_, Metric::Attainment) => return Err(bad_unit("pt (percentage points) or %")),
            (_, m) => return Err(bad_unit(&format!("% or {}", m.unit()))),
        };
        Ok(Bound { metric, limit })
    }
}

/// A bound that does not parse, with where it came from.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct BoundError {
    /// `--max-regress`, or `FILE:LINE`.
    pub origin: String,
    pub message: String,
}

/// One bound's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoundCheck {
    pub bound: Bound,
    pub delta: MetricDelta,
    /// How far it moved in the worse direction, in the bound's terms (percent, points or the
    /// metric's unit; negative: it improved).
    pub regressed_by: f64,
    /// The regression exceeds the bound (and, with `require_significant`, is significant or
    /// undecidable).
    pub violated: bool,
}

impl BoundCheck {
    /// One line for the console.
    pub fn line(&self) -> String {
        let d = &self.delta;
        let unit = match self.bound.limit {
            Limit::Percent(_) => "%".to_string(),
            Limit::Points(_) => "pt".to_string(),
            Limit::Absolute(_) => self.bound.metric.unit().to_string(),
        };
        let fmt = |v: Option<f64>| match (v, self.bound.metric) {
            (Some(x), Metric::Attainment) => format!("{:.2}%", x * 100.0),
            (Some(x), _) => format!("{x:.2}{}", if d.unit.is_empty() { "" } else { " " }) + &d.unit,
            (None, _) => "-".into(),
        };
        format!(
            "{}: {} -> {} (worse by {:.2}{unit}; bound {}; significant: {})",
            self.bound.metric,
            fmt(d.base),
            fmt(d.other),
            self.regressed_by,
            self.bound,
            d.significance.label()
        )
    }
}
