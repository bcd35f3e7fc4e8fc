//! `fast-sse-server [PORT] [TOKENS] [CPU] [WRITES]`: the minimal fast SSE server of
//! `goodput_testkit::fast` as a process of its own (for benches that pin the server and the
//! client to separate cores). WRITES: `per-token` (default) or `one` (each response in one
//! write).
//! Prints `listening on http://127.0.0.1:PORT` and serves until killed.

use goodput_testkit::fast::Writes;

fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let tokens: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let cpu: Option<usize> = args.next().and_then(|a| a.parse().ok());
    let writes = match args.next().as_deref() {
        None | Some("per-token") => Writes::PerToken,
        Some("one") => Writes::One,
        Some(w) => {
            eprintln!("fast-sse-server: WRITES is `per-token` or `one`, not `{w}`");
            std::process::exit(2);
        }
    };
    let server = goodput_testkit::fast::FastServer::start_writing(port, tokens, writes, move || {
        if let Some(c) = cpu {
            goodput_testkit::fast::pin_to(c);
        }
    })
    .expect("bind");
    println!("listening on {}", server.url());
    loop {
        std::thread::park();
    }
}
