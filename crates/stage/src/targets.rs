//! The three targets: a server at a URL, the embedded engine, the simulator.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use goodput_client::{CancelHandle, Counters, Endpoint, HttpClient, Observer, RunConfig, ScrapeConfig, cancel_pair};
use goodput_engine::EngineStats;
use goodput_metrics::{Collector, RequestRecord, StopReason, Summary};
use goodput_results::plan::{EnginePlan, RunPlan};
use goodput_results::server_metrics::{Flavour, ServerMetrics};
use goodput_results::{Run, Target as RunTarget, format_rfc3339_ns, summary_options, unix_ns};
use goodput_server::{Embedded, ServerConfig};
use goodput_sim::simulate_until;
use goodput_workload::Workload;

use crate::seam::{Control, Resources, Stage, StageError, Target};

/// A server reached over HTTP.
pub struct UrlTarget {
    pub url: String,
    /// The model to request.
    pub model: String,
    /// Sent as a bearer token (never written anywhere).
    pub api_key: Option<String>,
    /// Extra CA certificates (PEM) to trust for https.
    pub ca_pem: Option<Vec<u8>>,
    pub res: Resources,
}

impl Target for UrlTarget {
    async fn run(&mut self, stage: &Stage, ctl: &Control) -> Result<Run, StageError> {
        let timeouts = stage.plan.timeouts.unwrap_or_default();
        let client = HttpClient::with_roots(
            &self.url,
            self.api_key.as_deref(),
            stage.load.pool_size(),
            timeouts.connect,
            self.ca_pem.as_deref(),
        )?;
        // a key in the URL's query (`?api-key=…`) is not written into the result document
        let known: Vec<&str> = self.api_key.as_deref().into_iter().collect();
        let url = goodput_metrics::redact::redact(&self.url, &known).into_owned();
        let target = RunTarget::Url { url, model: Some(self.model.clone()) };
        let scrape = stage.plan.scrape.as_ref().map(|s| {
            let own = goodput_client::http::metrics_url(&self.url).unwrap_or_else(|_| format!("{}/metrics", self.url));
            let url = s.url.clone().unwrap_or(own);
            // the API key goes only to the target's own host
            let base = |u: &str| goodput_client::scrape::split_url(u).ok().map(|(b, _)| b);
            let same_host = base(&url).is_some() && base(&url) == base(&self.url);
            let cfg = ScrapeConfig {
                url,
                interval: s.interval,
                api_key: if same_host { self.api_key.clone() } else { None },
                ca_pem: self.ca_pem.clone(),
                connect_timeout: timeouts.connect,
            };
            (cfg, None)
        });
        let m = measure(client, &self.model, false, stage, ctl, &self.res, scrape).await?;
        Ok(m.into_run(stage, target, None))
    }

    fn gpus(&self) -> Option<u32> {
        None
    }

    fn describe(&self) -> String {
        format!("on {}", self.url)
    }

    fn is_simulated(&self) -> bool {
        false
    }
}

/// Called with a URL when a server starts.
pub type OnStart = Box<dyn FnMut(&str) + Send>;

/// The engine model behind goodput's own OpenAI-compatible server, in real time: a fresh engine
/// per stage, so its statistics are the stage's own.
pub struct EmbeddedTarget {
    pub engine: EnginePlan,
    pub res: Resources,
    /// Called with the engine's URL when each stage's server starts (for a console note).
    pub on_start: Option<OnStart>,
}

impl Target for EmbeddedTarget {
    async fn run(&mut self, stage: &Stage, ctl: &Control) -> Result<Run, StageError> {
        let model = self.engine.config.model.name.clone();
        // the embedded engine yields the CPU to the load generator when both want it
        let server_cfg = ServerConfig { seed: stage.seed, nice: 10, ..ServerConfig::new(&model) };
        let e = Embedded::start(self.engine.config.clone(), self.res.tokenizer.clone(), server_cfg).await?;
        if let Some(f) = &mut self.on_start {
            f(&e.url());
        }
        let timeouts = stage.plan.timeouts.unwrap_or_default();
        let client = HttpClient::new(&e.url(), None, stage.load.pool_size(), timeouts.connect)?;
        // the embedded server serves /metrics itself: always scraped
        let interval = stage.plan.scrape.as_ref().map_or(DEFAULT_SCRAPE_INTERVAL, |s| s.interval);
        let scrape = ScrapeConfig {
            url: format!("{}/metrics", e.url()),
            interval,
            api_key: None,
            ca_pem: None,
            connect_timeout: timeouts.connect,
        };
        let measured =
            measure(client, &model, true, stage, ctl, &self.res, Some((scrape, Some(Flavour::Goodput)))).await;
        let stats = e.state.engine().stats().await;
        let url = e.url();
        e.shutdown().await;
        let target = RunTarget::Embedded { url: Some(url), model: Some(model), engine: Box::new(self.engine.clone()) };
        Ok(measured?.into_run(stage, target, stats))
    }

    fn gpus(&self) -> Option<u32> {
        Some(self.engine.config.gpus())
    }

    fn describe(&self) -> String {
        format!("on the embedded {}", self.engine.short())
    }

    fn is_simulated(&self) -> bool {
        false
    }
}

/// The embedded engine's scrape period when the plan names none.
const DEFAULT_SCRAPE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Most requests one simulated run sends (records are summarized as they finish and sampled
/// past `--records`' cap, so memory does not grow with it; this bounds a duration-only run).
pub const MAX_SIM_REQUESTS: u64 = 20_000_000;

/// The engine model in virtual time.
pub struct SimTarget {
    pub engine: EnginePlan,
    pub res: Resources,
}

impl Target for SimTarget {
    async fn run(&mut self, stage: &Stage, ctl: &Control) -> Result<Run, StageError> {
        let plan = &stage.plan;
        let mut engine = goodput_engine::build(&self.engine.config)?;
        let spec = self.res.workload_spec(&plan.workload, stage.seed);
        let workload = Workload::counts(spec, Some(self.res.tokenizer.clone()))?;
        let mut cfg = sending(stage);
        // every record is kept: a duration alone never runs past the limit
        cfg.bounds.requests = Some(plan.load.requests.unwrap_or(MAX_SIM_REQUESTS));
        let started = Instant::now();
        let wall_ns = unix_ns();
        // records are summarized as they finish; the document keeps what --records says
        let mut collector = collector(stage, ctl);
        // a saturated capacity step stops as a measured one does (the failing steps above the
        // capacity are the costly ones); Ctrl-C is not watched: a simulation ends in moments
        let out = simulate_until(engine.as_mut(), &cfg, workload, ctl.saturation, &mut |r| collector.push_returning(r));
        let (mut summary, mut summary_full, records, kept) = collector.finish();
        if kept.is_partial() {
            summary.records_kept = Some(kept);
        }
        warn_over_saturated(out.over_saturation, &mut summary, &mut summary_full);
        let elapsed_s = started.elapsed().as_secs_f64();
        let model = self.engine.config.model.name.clone();
        let target = RunTarget::Sim { model: Some(model), engine: Box::new(self.engine.clone()) };
        Ok(Run {
            name: stage.name.clone(),
            started_at: Some(format_rfc3339_ns(wall_ns)),
            load: Some(stage.load.clone()),
            elapsed_s: Some(elapsed_s),
            virtual_end_s: Some(out.end_s),
            interrupted: matches!(out.stop, StopReason::MaxErrors | StopReason::Saturated | StopReason::OverSaturated),
            stop: out.stop,
            summary_full,
            engine_stats: Some(out.stats),
            ..Run::from_parts(plan.clone(), target, summary, records)
        })
    }

    fn gpus(&self) -> Option<u32> {
        Some(self.engine.config.gpus())
    }

    fn describe(&self) -> String {
        format!("on {} (simulated)", self.engine.short())
    }

    fn is_simulated(&self) -> bool {
        true
    }
}

/// A warning the run itself knows (not its records), in both summaries.
fn warn_both(w: goodput_metrics::Warning, summary: &mut Summary, full: &mut Option<Summary>) {
    if let Some(f) = full {
        f.warnings.push(w.clone());
    }
    summary.warnings.push(w);
}

/// A run stopped as over-saturated says why among its warnings.
fn warn_over_saturated(verdict: Option<String>, summary: &mut Summary, full: &mut Option<Summary>) {
    if let Some(message) = verdict {
        warn_both(
            goodput_metrics::Warning { code: goodput_metrics::WarningCode::OverSaturated, message },
            summary,
            full,
        );
    }
}

/// The collector of `stage`'s records: its plan's summary options and `--records`, and the
/// whole-run summary where `ctl` asks for it.
fn collector(stage: &Stage, ctl: &Control) -> Collector {
    let plan = &stage.plan;
    let c = Collector::new(summary_options(plan, &stage.load), plan.output.records, stage.seed);
    if ctl.whole_run { c } else { c.without_whole_run() }
}

/// What a measured stage produced, before it becomes a [`Run`].
struct Measured {
    /// Every record, summarized as it finished (memory stays bounded however long the run).
    records: Collector,
    stop: StopReason,
    interrupted: bool,
    started_ns: i128,
    elapsed_s: f64,
    /// How late the client's runtime woke (ms, one per probe tick).
    runtime_lag_ms: goodput_metrics::Samples,
    bookkeeping: goodput_metrics::Bookkeeping,
    after_done: goodput_metrics::AfterDone,
    connections: goodput_metrics::ConnectionReuse,
    /// The server's metrics scraped beside the load.
    server_metrics: Option<ServerMetrics>,
    /// Why the run was called over-saturated, when it was.
    over_saturation: Option<String>,
}

impl Measured {
    fn into_run(mut self, stage: &Stage, target: RunTarget, engine_stats: Option<EngineStats>) -> Run {
        let mut collector = self.records;
        let opts = collector.options_mut();
        opts.runtime_lag = goodput_metrics::RuntimeLag::of(&mut self.runtime_lag_ms, opts.percentiles);
        opts.bookkeeping = Some(self.bookkeeping);
        opts.after_done = Some(self.after_done);
        opts.connections = Some(self.connections);
        let mut server_metrics = self.server_metrics;
        if let Some(m) = &mut server_metrics {
            m.cross_check(collector.output_tokens());
        }
        // the document keeps what --records says (the JSONL log has every record)
        let (mut summary, mut summary_full, records, kept) = collector.finish();
        if let Some(m) = &server_metrics {
            for w in m.warnings() {
                warn_both(w, &mut summary, &mut summary_full);
            }
        }
        if kept.is_partial() {
            summary.records_kept = Some(kept);
        }
        warn_over_saturated(self.over_saturation, &mut summary, &mut summary_full);
        Run {
            name: stage.name.clone(),
            started_at: Some(format_rfc3339_ns(self.started_ns)),
            load: Some(stage.load.clone()),
            elapsed_s: Some(self.elapsed_s),
            interrupted: self.interrupted,
            stop: self.stop,
            summary_full,
            engine_stats,
            server_metrics,
            ..Run::from_parts(stage.plan.clone(), target, summary, records)
        }
    }
}

/// Stops a stage once more requests are in flight than it can ever serve within the SLO.
struct Saturation {
    inner: Arc<dyn Observer>,
    limit: Option<u64>,
    stop: Arc<CancelHandle>,
    saturated: AtomicBool,
}

impl Saturation {
    fn check(&self, c: &Counters) {
        if let Some(limit) = self.limit
            && c.in_flight.load(Ordering::Relaxed) > limit
            && !self.saturated.swap(true, Ordering::SeqCst)
        {
            self.stop.cancel();
        }
    }
}

impl Observer for Saturation {
    fn record(&self, record: &RequestRecord, c: &Counters) {
        self.check(c);
        self.inner.record(record, c);
    }

    fn sent(&self, request: &RequestRecord, body: &[u8], c: &Counters) {
        self.check(c);
        self.inner.sent(request, body, c);
    }
}

/// Drives one stage's load over HTTP.
async fn measure(
    client: HttpClient,
    model: &str,
    send_seed: bool,
    stage: &Stage,
    ctl: &Control,
    res: &Resources,
    scrape: Option<(ScrapeConfig, Option<Flavour>)>,
) -> Result<Measured, StageError> {
    let plan: &RunPlan = &stage.plan;
    let mut ep =
        Endpoint::new(client, plan.api.unwrap_or_default(), plan.timeouts.unwrap_or_default(), res.tokenizer.clone());
    ep.retries = plan.retries.unwrap_or(0);
    if let Some(b) = plan.max_event_bytes {
        ep.max_event_bytes = usize::try_from(b).unwrap_or(usize::MAX);
    }
    ep.reasoning = plan.reasoning_parser.unwrap_or_default();
    let cfg = RunConfig {
        sending: sending(stage),
        grace: Some(plan.load.grace),
        model: model.to_string(),
        extra_body: plan.extra_body.clone(),
        // the embedded engine stops each request where the simulator would
        send_seed,
    };
    let workload = Workload::new(res.workload_spec(&plan.workload, stage.seed), res.tokenizer.clone())?;
    // the stage stops on the caller's interrupt, or when saturated
    let (stop, token) = cancel_pair();
    let stop = Arc::new(stop);
    let forward = {
        let (stop, interrupt) = (Arc::clone(&stop), ctl.interrupt.clone());
        tokio::spawn(async move {
            interrupt.cancelled().await;
            stop.cancel();
        })
    };
    let guard = Arc::new(Saturation {
        inner: Arc::clone(&ctl.observer),
        limit: ctl.saturation,
        stop: Arc::clone(&stop),
        saturated: AtomicBool::new(false),
    });
    // started before the load (its first scrape precedes the first request), stopped after it
    let scraper = match scrape {
        Some((cfg, flavour)) => Some((goodput_client::Scraper::start(cfg).await?, flavour)),
        None => None,
    };
    // records are summarized as they finish; the document keeps what --records says
    let collector = Arc::new(Mutex::new(collector(stage, ctl)));
    let outcome = goodput_client::run_into(ep, cfg, workload, token, guard.clone(), collector.clone()).await;
    forward.abort();
    let server_metrics = match scraper {
        Some((s, flavour)) => Some(s.finish(&outcome.clock, flavour).await),
        None => None,
    };
    let saturated = guard.saturated.load(Ordering::SeqCst);
    let elapsed = outcome.clock.t0().elapsed();
    Ok(Measured {
        stop: if saturated { StopReason::Saturated } else { outcome.stop },
        interrupted: outcome.interrupted || saturated,
        started_ns: unix_ns() - elapsed.as_nanos() as i128,
        elapsed_s: outcome.elapsed_s,
        records: take_collector(collector),
        runtime_lag_ms: outcome.runtime_lag_ms,
        bookkeeping: outcome.bookkeeping,
        after_done: goodput_metrics::AfterDone {
            drained: outcome.streams_open_after_done,
            left_open: outcome.streams_left_open,
        },
        connections: outcome.connections,
        over_saturation: outcome.over_saturation,
        server_metrics,
    })
}

/// The collector back from the run (its last other holder, the runner, has ended).
fn take_collector(c: Arc<Mutex<Collector>>) -> Collector {
    match Arc::try_unwrap(c) {
        Ok(m) => m.into_inner().unwrap_or_else(|e| e.into_inner()),
        // a request's task still holds it (a drain after [DONE]): take its contents
        Err(shared) => {
            let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
            let empty = Collector::new(goodput_metrics::SummaryOptions::new(), goodput_metrics::RecordsMode::None, 0);
            std::mem::replace(&mut *g, empty)
        }
    }
}

/// Any of the three, chosen at run time (the command line's target).
pub enum AnyTarget {
    Url(UrlTarget),
    Embedded(EmbeddedTarget),
    Sim(SimTarget),
}

impl Target for AnyTarget {
    async fn run(&mut self, stage: &Stage, ctl: &Control) -> Result<Run, StageError> {
        match self {
            AnyTarget::Url(t) => t.run(stage, ctl).await,
            AnyTarget::Embedded(t) => t.run(stage, ctl).await,
            AnyTarget::Sim(t) => t.run(stage, ctl).await,
        }
    }

    fn gpus(&self) -> Option<u32> {
        match self {
            AnyTarget::Url(t) => t.gpus(),
            AnyTarget::Embedded(t) => t.gpus(),
            AnyTarget::Sim(t) => t.gpus(),
        }
    }

    fn describe(&self) -> String {
        match self {
            AnyTarget::Url(t) => t.describe(),
            AnyTarget::Embedded(t) => t.describe(),
            AnyTarget::Sim(t) => t.describe(),
        }
    }

    fn is_simulated(&self) -> bool {
        matches!(self, AnyTarget::Sim(_))
    }
}

/// What a stage sends, for either driver: its load and seed, the plan's bounds, shard and
/// output lengths.
fn sending(stage: &Stage) -> goodput_workload::Sending {
    let l = &stage.plan.load;
    goodput_workload::Sending {
        load: stage.load.clone(),
        bounds: goodput_workload::Bounds {
            requests: l.requests,
            duration_s: l.duration.map(|d| d.as_secs_f64()),
            max_errors: l.max_errors,
            // judged against the SLO's first-token budget, 1 s without one
            over_saturation_ms: l.stop_over_saturated.then(|| {
                use goodput_metrics::slo::Metric;
                let slo = stage.plan.slo.slo().map(|(s, _)| s);
                let limit = |m| slo.as_ref().and_then(|s| s.limit(m));
                limit(Metric::Ttft).or(limit(Metric::Ttfo)).or(limit(Metric::E2e)).unwrap_or(1000.0)
            }),
            pause_scale: l.pause_scale,
        },
        seed: stage.seed,
        shard: l.shard,
        ignore_eos: stage.plan.ignore_eos,
    }
}
