//! Multi-turn and agentic sessions as a whole: how long each took, how many calls it made, how
//! much of its time was the server's and how much its tools' (or its user's thinking), and TTFT
//! by call index (a later call resends a longer context, which a prefix cache serves).
//! Definitions: `docs/metrics.md`, "Sessions".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::RequestRecord;
use crate::request::RequestMetrics;
use crate::stats::{Distribution, PercentileMethod, Samples};

/// Call indices reported one by one; later calls are pooled in the last row.
pub const CALL_ROWS: u32 = 64;

/// TTFT of the calls at one index of their agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CallTtft {
    /// The call's index within its agent (0-based); the last row pools every later one.
    pub call: u32,
    pub n: u64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
}

/// The sessions of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Sessions with at least one measured request.
    pub sessions: u64,
    /// Of those, sessions whose sub-agents sent requests too.
    #[serde(default)]
    pub with_sub_agents: u64,
    /// Calls per session (its sub-agents' included).
    pub calls: Distribution,
    /// From the first call's scheduled start to the last call's end, seconds.
    pub wall_s: Distribution,
    /// Σ time in the server (each call's send to its end) ÷ (that + Σ time in tools or thinking
    /// between an agent's calls), over every session: the share of the agents' time the server
    /// had their request.
    pub server_share: f64,
    /// Σ seconds in the server and in tools, over all sessions.
    pub server_s: f64,
    pub tool_s: f64,
    /// Successful calls' TTFT by call index.
    pub ttft_by_call: Vec<CallTtft>,
}

/// The sessions of `records` (the measured ones: `measured[i]`), or `None` when no record is
/// part of a session.
pub fn summarize_sessions(records: &[RequestRecord], measured: &[bool], m: PercentileMethod) -> Option<SessionSummary> {
    // session → its records, in send order within each agent
    let mut by: BTreeMap<u64, Vec<&RequestRecord>> = BTreeMap::new();
    for (r, &ok) in records.iter().zip(measured) {
        if let (true, Some(s)) = (ok, r.session) {
            by.entry(s).or_default().push(r);
        }
    }
    if by.is_empty() {
        return None;
    }
    let mut out = SessionSummary { sessions: by.len() as u64, ..Default::default() };
    let (mut calls, mut wall) = (Samples::default(), Samples::default());
    let mut ttft: BTreeMap<u32, Samples> = BTreeMap::new();
    for rs in by.values_mut() {
        calls.push(rs.len() as f64);
        out.with_sub_agents += u64::from(rs.iter().any(|r| r.agent.is_some()));
        let start = rs.iter().map(|r| r.scheduled_ms).fold(f64::INFINITY, f64::min);
        let end = rs.iter().filter_map(|r| r.end_ms.or(r.last_event_ms())).fold(f64::NEG_INFINITY, f64::max);
        if end > start {
            wall.push((end - start) / 1000.0);
        }
        // each agent's calls in order: the gap before a call is its tool's (or user's) time
        rs.sort_by_key(|r| (r.agent, r.turn, r.id));
        let mut prev: Option<(Option<u32>, f64)> = None;
        for r in rs.iter() {
            let (Some(sent), Some(done)) = (r.first_sent_ms(), r.end_ms.or(r.last_event_ms())) else { continue };
            out.server_s += (done - sent).max(0.0) / 1000.0;
            if let Some((agent, prev_end)) = prev
                && agent == r.agent
            {
                out.tool_s += (r.scheduled_ms - prev_end).max(0.0) / 1000.0;
            }
            prev = Some((r.agent, done));
            if r.is_success()
                && let Some(t) = RequestMetrics::of(r).ttft
            {
                ttft.entry(r.turn.unwrap_or(0).min(CALL_ROWS)).or_default().push(t);
            }
        }
    }
    let total = out.server_s + out.tool_s;
    out.server_share = if total > 0.0 { out.server_s / total } else { 0.0 };
    out.calls = calls.describe(m);
    out.wall_s = wall.describe(m);
    out.ttft_by_call = ttft
        .into_iter()
        .map(|(call, mut s)| {
            let d = s.describe(m);
            CallTtft { call, n: d.n, mean: d.mean, p50: d.p50, p90: d.p90 }
        })
        .collect();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(session: u64, agent: Option<u32>, turn: u32, a: f64, sent: f64, c1: f64, end: f64) -> RequestRecord {
        RequestRecord {
            session: Some(session),
            agent,
            turn: Some(turn),
            scheduled_ms: a,
            sent_ms: Some(sent),
            event_ms: vec![c1, end],
            event_tokens: vec![1, 1],
            end_ms: Some(end),
            output_tokens: Some(2),
            ..Default::default()
        }
    }

    #[test]
    fn sessions_computed_by_hand() {
        // session 1: call 0 at 0..100 (TTFT 20), a 400 ms tool, call 1 at 500..650 (TTFT 10); its
        // sub-agent (forked after call 0): one call at 100..300 (TTFT 30)
        // session 2: one call at 1000..1100 (TTFT 40)
        let recs = vec![
            call(1, None, 0, 0.0, 0.0, 20.0, 100.0),
            call(1, Some(1), 0, 100.0, 100.0, 130.0, 300.0),
            call(1, None, 1, 500.0, 500.0, 510.0, 650.0),
            call(2, None, 0, 1000.0, 1000.0, 1040.0, 1100.0),
        ];
        let s = summarize_sessions(&recs, &[true; 4], PercentileMethod::Linear).unwrap();
        assert_eq!((s.sessions, s.with_sub_agents), (2, 1));
        assert_eq!((s.calls.min, s.calls.max), (Some(1.0), Some(3.0)));
        // walls 0.65 s and 0.1 s
        assert_eq!((s.wall_s.min, s.wall_s.max), (Some(0.1), Some(0.65)));
        // server: 100 + 200 + 150 + 100 ms; tools: the root's 400 ms between its calls
        assert!((s.server_s - 0.55).abs() < 1e-12 && (s.tool_s - 0.4).abs() < 1e-12, "{s:?}");
        assert!((s.server_share - 0.55 / 0.95).abs() < 1e-12);
        // TTFT by call index: call 0 of three agents (20, 30, 40), call 1 of one (10)
        assert_eq!(s.ttft_by_call.len(), 2);
        assert_eq!((s.ttft_by_call[0].n, s.ttft_by_call[0].mean), (3, Some(30.0)));
        assert_eq!((s.ttft_by_call[1].call, s.ttft_by_call[1].p50), (1, Some(10.0)));
        assert!(summarize_sessions(&[RequestRecord::default()], &[true], PercentileMethod::Linear).is_none());
    }
}
