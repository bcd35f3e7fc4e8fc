//! `goodput bench`: the target, the API and its body, timeouts, retries and metrics scraping.

use super::*;

impl TimeoutArgs {
    pub fn plan(&self) -> Result<Timeouts, UsageError> {
        Ok(Timeouts {
            connect: positive_duration("--timeout-connect", &self.timeout_connect)?,
            first_token: positive_duration("--timeout-first-token", &self.timeout_first_token)?,
            idle: positive_duration("--timeout-idle", &self.timeout_idle)?,
            total: positive_duration("--timeout-total", &self.timeout_total)?,
            stall: self.timeout_stall.as_deref().map(|s| positive_duration("--timeout-stall", s)).transpose()?,
        })
    }
}

/// The request fields the client sets itself, and what sets each instead of `--extra-body`.
pub(super) const CLIENT_FIELDS: &[(&str, &str)] = &[
    ("model", "--model"),
    ("prompt", "--dataset / --input-tokens"),
    ("messages", "--dataset / --input-tokens"),
    ("max_tokens", "--output-tokens"),
    ("max_completion_tokens", "--output-tokens"),
    ("stream", "nothing: the client always streams, and measures the stream"),
    ("stream_options", "nothing: the client always asks for usage in the stream"),
    ("n", "nothing: the client measures one choice per request"),
];

/// Refuses `--extra-body` fields that would override what the client sends and measures (a
/// silent `"stream": false` fails every request with a misleading message; `"max_tokens"`
/// diverges from the lengths the results report). `ignore_eos`/`min_tokens` are the client's
/// unless `--no-ignore-eos` is given.
pub(super) fn extra_body_owned_fields(
    m: &serde_json::Map<String, serde_json::Value>,
    ignore_eos: bool,
) -> Result<(), UsageError> {
    for key in m.keys() {
        let instead = CLIENT_FIELDS.iter().find(|(k, _)| k == key).map(|(_, f)| *f).or_else(|| {
            (ignore_eos && matches!(key.as_str(), "ignore_eos" | "min_tokens"))
                .then_some("--output-tokens (fixed lengths), or --no-ignore-eos to set it yourself")
        });
        if let Some(instead) = instead {
            return Err(usage("--extra-body", format!("`{key}` is set by the client; use {instead}")));
        }
    }
    Ok(())
}

/// The endpoint to call: `--api`, else the one a full endpoint `--url` names, else completions;
/// a `--url` naming one endpoint and an `--api` naming the other are refused.
pub(super) fn api_of(a: &BenchArgs) -> Result<goodput_client::Api, UsageError> {
    let named = a.url.as_deref().and_then(goodput_client::http::endpoint_in_url);
    match (a.api, named) {
        (Some(api), Some(n)) if api != n => Err(usage(
            "--api",
            format!(
                "--url names the {} endpoint ({}): drop --api or change --url",
                n.path(),
                a.url.as_deref().unwrap_or("")
            ),
        )),
        (Some(api), _) => Ok(api),
        (None, Some(n)) => Ok(n),
        (None, None) => Ok(goodput_client::Api::default()),
    }
}

/// A size in bytes: `16MiB`, `512KiB`, `1MB`, `1000000` (at least 1 KiB).
pub fn parse_size(flag: &str, s: &str) -> Result<u64, UsageError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "kib" | "k" => 1024.0,
        "mib" | "m" => 1024.0 * 1024.0,
        "gib" | "g" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(usage(flag, format!("`{s}` is not a size (e.g. 16MiB, 512KiB, 1000000)"))),
    };
    let n = num
        .parse::<f64>()
        .ok()
        .map(|n| n * mult)
        .filter(|b| b.is_finite() && *b >= 1024.0 && *b <= 1e12)
        .ok_or_else(|| usage(flag, format!("`{s}` is not a size between 1KiB and 1TB (e.g. 16MiB)")))?;
    Ok(n as u64)
}

/// A validated `goodput bench`.
pub fn bench(a: &BenchArgs) -> Result<Planned, UsageError> {
    let target = match &a.url {
        Some(u) => {
            if a.engine != EngineArgs::default() {
                return Err(usage(
                    "--url",
                    "engine flags (--gpu, --tp, --dtype, …) describe the embedded engine: drop them or drop --url",
                ));
            }
            TargetPlan::Url { url: goodput_client::http::normalize_base(u).map_err(|e| usage("--url", e))? }
        }
        None => TargetPlan::Embedded { engine: Box::new(engine_plan(a.model.as_deref(), &a.engine)?) },
    };
    let extra_body = match &a.extra_body {
        Some(j) => match serde_json::from_str::<serde_json::Value>(j) {
            Ok(serde_json::Value::Object(m)) => {
                extra_body_owned_fields(&m, !a.no_ignore_eos)?;
                Some(m)
            }
            _ => {
                return Err(usage("--extra-body", "expected a JSON object, e.g. '{\"temperature\": 0}'"));
            }
        },
        None => None,
    };
    if a.api_key_env.is_empty() {
        return Err(usage("--api-key-env", "expected an environment variable name"));
    }
    let (load, workload, res) = load_and_workload(&a.load, &a.workload)?;
    if a.url.is_some() && a.workload.reasoning_tokens.is_some() {
        return Err(usage(
            "--reasoning-tokens",
            "tells the engine model how long to think; a real server's model decides for itself (drop it, and \
             read the reasoning it streams with --reasoning-parser)",
        ));
    }
    if let TargetPlan::Embedded { engine } = &target {
        check_workload_fits(engine, &workload)?;
    }
    let ca_pem = match &a.ca_cert {
        Some(p) => {
            if a.url.is_none() {
                return Err(usage("--ca-cert", "applies to an https --url"));
            }
            let pem = std::fs::read(p).map_err(|e| usage("--ca-cert", format!("cannot read {}: {e}", p.display())))?;
            goodput_client::http::ca_certificates(&pem)
                .map_err(|e| usage("--ca-cert", format!("{}: {e}", p.display())))?;
            Some(pem)
        }
        None => None,
    };
    let output = output_plan(&a.output)?;
    // the JSONL log beside --out is written as records finish: an existing one must be writable
    if let Some(log) = jsonl_path(&output).filter(|p| p.is_file()) {
        writable("--out", &log)?;
    }
    distinct_files(&load, &a.workload, &output)?;
    let scrape = scrape_plan(a, &target)?;
    let plan = RunPlan {
        ca_cert: a.ca_cert.clone(),
        target: Some(target),
        engine: None,
        api: Some(api_of(a)?),
        max_event_bytes: Some(parse_size("--max-event-size", &a.max_event_size)?),
        reasoning_parser: Some(a.reasoning_parser.parse().map_err(|m| usage("--reasoning-parser", m))?),
        model: a.model.clone(),
        api_key_env: Some(a.api_key_env.clone()),
        ignore_eos: !a.no_ignore_eos,
        extra_body,
        retries: Some(a.retries),
        workload,
        load,
        timeouts: Some(a.timeouts.plan()?),
        slo: slo_plan(&a.slo)?,
        output,
        scrape,
    };
    let extrapolated = twin_extrapolations(&a.engine, &plan.load, &plan.workload)?;
    Ok(Planned { plan, res, ca_pem, quiet: a.output.quiet, html: a.output.html.clone(), extrapolated })
}

/// `--scrape-metrics [URL]` and `--scrape-interval`: on for the embedded engine whatever the
/// flags say (it serves `/metrics` itself), on for a URL only when asked.
pub(super) fn scrape_plan(a: &BenchArgs, target: &TargetPlan) -> Result<Option<ScrapePlan>, UsageError> {
    let interval = parse_duration("--scrape-interval", &a.scrape_interval)?;
    if interval < Duration::from_millis(10) {
        return Err(usage("--scrape-interval", "at least 10ms (each scrape is an HTTP request to the server)"));
    }
    let url = match &a.scrape_metrics {
        Some(u) if !u.trim().is_empty() => {
            goodput_client::http::normalize_base(u).map_err(|e| usage("--scrape-metrics", e))?;
            Some(u.trim().to_string())
        }
        _ => None,
    };
    let on = a.scrape_metrics.is_some() || matches!(target, TargetPlan::Embedded { .. });
    Ok(on.then_some(ScrapePlan { url, interval }))
}
