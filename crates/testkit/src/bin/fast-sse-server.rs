//! `fast-sse-server [PORT] [TOKENS] [CPU]`: the minimal fast SSE server of `goodput_testkit::fast`
//! as a process of its own (for benches that pin the server and the client to separate cores).
//! Prints `listening on http://127.0.0.1:PORT` and serves until killed.

fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let tokens: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let cpu: Option<usize> = args.next().and_then(|a| a.parse().ok());
    let server = goodput_testkit::fast::FastServer::start(port, tokens, move || {
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
