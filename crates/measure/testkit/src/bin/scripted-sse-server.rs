//! `scripted-sse-server [FIRST_MS] [GAP_MS] [TOKENS] [CPU]`: the scripted-timing server of
//! `goodput_testkit` as a process of its own, answering every generation request with
//! [`goodput_testkit::steady_stream`]: the first token `FIRST_MS` after the request arrived
//! (default 50), then one every `GAP_MS` (default 10), `TOKENS` tokens (default 16), paced from
//! absolute deadlines. A client's TTFT minus `FIRST_MS` is its measurement error plus the
//! server's own lateness, which it reports: once a second, for the requests whose first token
//! went out in that second, a line `lateness n=N p50_ms=X p99_ms=Y` (first-token write time minus
//! its scripted time). Runs on one thread (pinned to `CPU` when given), prints `listening on
//! http://127.0.0.1:PORT` first and serves until killed.

fn main() {
    let mut args = std::env::args().skip(1);
    let mut num = |d: f64| args.next().and_then(|a| a.parse::<f64>().ok()).unwrap_or(d);
    let (first, gap, tokens) = (num(50.0), num(10.0), num(16.0) as usize);
    let cpu = num(-1.0);
    if cpu >= 0.0 {
        goodput_testkit::fast::pin_to(cpu as usize);
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let server =
            goodput_testkit::ScriptedServer::start(move |_| goodput_testkit::steady_stream(first, gap, tokens, false))
                .await;
        println!("listening on {}", server.url());
        // the log keeps every request (its indices are the requests' own): read it from a cursor
        let mut cursor = 0;
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let mut late: Vec<f64> = Vec::new();
            {
                let log = server.served.lock().expect("log");
                while cursor < log.len() {
                    let s = &log[cursor];
                    if s.path.starts_with("GET") {
                        cursor += 1;
                        continue;
                    }
                    let Some(&t) = s.chunk_times.first() else { break };
                    let due = s.arrived + std::time::Duration::from_secs_f64(first / 1000.0);
                    late.push(t.saturating_duration_since(due).as_secs_f64() * 1e3);
                    cursor += 1;
                }
            }
            if !late.is_empty() {
                late.sort_by(f64::total_cmp);
                let q = |p: f64| late[((late.len() - 1) as f64 * p).round() as usize];
                println!("lateness n={} p50_ms={:.3} p99_ms={:.3}", late.len(), q(0.5), q(0.99));
            }
        }
    });
}
