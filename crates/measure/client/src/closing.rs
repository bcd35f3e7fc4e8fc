//! Whether the server took a request that failed before any byte of a response.
//!
//! Servers close keep-alive connections without saying so: llama.cpp's right after every
//! streamed response (its FIN follows the last chunk by 0.1 ms or more), uvicorn's (vLLM,
//! SGLang) after 5 s idle. A closed loop that sends the moment a stream ends can write its next
//! request into a connection the server is closing. Such a request never reached the server and
//! may be sent again; a request the server read and then dropped (a crash, an overloaded proxy)
//! must not be, or the server sees more requests than the run reports. The two look the same to
//! HTTP (the connection ends with no response), but not to TCP. [`Peer`], shared by a connection
//! and the requests it carries, keeps what the kernel says, and a request is sent again only
//! when it shows one of:
//!
//! - **not written**: nothing of the request was written since the connection's last answer
//!   (the HTTP client saw the close first, or the connection ended while the request waited);
//! - **closed before the write**: the first write of a request on a connection that has carried
//!   one looks (`recv` with `MSG_PEEK`) for the server's FIN or reset first; when one is there it
//!   writes nothing and fails with [`NotWritten`]. Until the run has seen the server keep a
//!   connection ([`KeepAlive`]), that look waits for the connection to have been idle
//!   [`SETTLE`], so a close that follows a response closely is caught before anything is written;
//! - **reset**: the server's kernel answered with a reset (`ECONNRESET`, or `EPIPE` where the
//!   server's FIN came first, as a read's error or the socket's pending error): the request
//!   reached a socket the server had closed, or was still unread in it when the server closed (a
//!   server that has read a request and closes sends a FIN, not a reset). Where the reset is
//!   still on its way when the connection ends (the FIN crossed the request), the connection's
//!   socket is kept open a moment so that [`Peer::wait_reset`] can see it arrive, for at most two
//!   round trips.
//!
//! Anything else (the connection ended with a FIN after the request was written) is the server's
//! failure, and final. One case is taken for a request that did not reach the server although it
//! did: a server that reads a request and then aborts the connection with a reset (`SO_LINGER`
//! 0) rather than closing it. A server seen closing a connection right after its response gets
//! a connection per request from then on ([`KeepAlive`]), so later requests race no close.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the run has learnt of the server's keep-alive, shared by the client and its
/// connections. Until a reused connection has been answered, a request about to reuse one
/// within [`SETTLE`] of its last response waits out the rest of that time and looks for the
/// server's close first: a server that closes connections right after their responses
/// (llama.cpp's, about 0.1 ms after the last chunk on loopback) is caught before any request is
/// written into such a connection. Once the server is seen doing so, keep-alive is turned off for
/// good (each request gets a connection of its own); once a reused connection is answered, the
/// wait is over.
#[derive(Clone, Debug, Default)]
pub struct KeepAlive(Arc<Mutex<Learnt>>);

#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Learnt {
    #[default]
    Unknown,
    /// A reused connection was answered.
    Kept,
    /// The server closed a connection right after its response (when it was seen).
    Off(Instant),
}

/// A connection the server closed within this long of its last response was closed because the
/// response ended (not for being idle): the server closes connections after each response.
pub const CLOSES_AFTER_RESPONSE: Duration = Duration::from_secs(1);

/// Until the server is known to keep connections, a connection is reused no sooner than this
/// after its last response bytes (the first few reuses of a run wait at most this long).
pub const SETTLE: Duration = Duration::from_millis(25);

impl KeepAlive {
    fn get(&self) -> Learnt {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether requests still reuse connections.
    pub fn on(&self) -> bool {
        self.off_since().is_none()
    }

    /// Whether a reused connection has been answered (no settling needed).
    pub fn known_kept(&self) -> bool {
        self.get() == Learnt::Kept
    }

    /// When keep-alive was turned off.
    pub fn off_since(&self) -> Option<Instant> {
        match self.get() {
            Learnt::Off(t) => Some(t),
            _ => None,
        }
    }

    /// Turns keep-alive off (the first call's time is kept).
    pub fn turn_off(&self) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !matches!(*g, Learnt::Off(_)) {
            *g = Learnt::Off(Instant::now());
        }
    }

    /// A reused connection was answered: the server keeps connections.
    fn kept(&self) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if *g == Learnt::Unknown {
            *g = Learnt::Kept;
        }
    }
}

/// A connection's history as the kernel reported it, shared by the connection and its requests.
#[derive(Clone, Debug, Default)]
pub struct Peer(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    /// Response bytes were read since the last write: the next write starts a new request.
    answered: AtomicBool,
    /// The request being answered is a reused connection's.
    reused: AtomicBool,
    /// A write is waiting for its answer (bytes written, none read since).
    outstanding: AtomicBool,
    /// The server's kernel reset the connection.
    reset: AtomicBool,
    /// When response bytes were last read.
    last_read: Mutex<Option<Instant>>,
    /// A copy of the socket, kept when the connection ended with a request unanswered, to see a
    /// reset arrive after it ([`Peer::wait_reset`]).
    #[cfg(target_os = "linux")]
    kept: Mutex<Option<std::os::fd::OwnedFd>>,
    /// The client's keep-alive switch, turned off when this connection is closed by the server
    /// right after a response.
    keep_alive: Option<KeepAlive>,
}

/// The error a write returns when the server had closed the connection before it: nothing was
/// written.
#[derive(Debug, thiserror::Error)]
#[error("the server had closed this keep-alive connection; the request was not written")]
pub struct NotWritten;

/// How a request that failed before any response is known not to have reached the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotTaken {
    /// hyper saw the connection close first and never wrote it.
    Unwritten,
    /// The server's FIN or reset was there before the first byte was written.
    ClosedBeforeWrite,
    /// The server's kernel answered with a reset.
    Reset,
}

impl Peer {
    /// A connection of a client whose keep-alive switch is `keep_alive`.
    pub fn new(keep_alive: KeepAlive) -> Self {
        Peer(Arc::new(Inner { keep_alive: Some(keep_alive), ..Default::default() }))
    }

    /// The server ended the connection (its FIN was read). Idle, within
    /// [`CLOSES_AFTER_RESPONSE`] of its last response: the server closes connections after
    /// their responses, and the client stops reusing them.
    pub(crate) fn on_end(&self) {
        let idle = !self.outstanding();
        let soon = self.idle_for().is_some_and(|d| d < CLOSES_AFTER_RESPONSE);
        if idle
            && soon
            && let Some(k) = &self.0.keep_alive
        {
            k.turn_off();
        }
    }

    /// Bytes of a response were read.
    pub(crate) fn on_read(&self) {
        if self.0.reused.swap(false, Ordering::Relaxed)
            && let Some(k) = &self.0.keep_alive
        {
            k.kept();
        }
        self.0.answered.store(true, Ordering::Relaxed);
        self.0.outstanding.store(false, Ordering::Relaxed);
        *self.0.last_read.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// Bytes were written.
    pub(crate) fn on_write(&self) {
        self.0.outstanding.store(true, Ordering::Relaxed);
    }

    /// Whether this write starts a new request on a connection that has answered one before
    /// (and so must first look for the server's close). Clears the mark.
    pub(crate) fn starts_request_after_answer(&self) -> bool {
        self.0.answered.swap(false, Ordering::Relaxed)
    }

    /// A request is being written on this (reused) connection: its answer shows the server
    /// keeps connections.
    pub(crate) fn reusing(&self) {
        self.0.reused.store(true, Ordering::Relaxed);
    }

    /// How long a request about to reuse this connection waits first ([`SETTLE`]): none once
    /// the server is known to keep connections.
    pub(crate) fn settle(&self) -> Option<Duration> {
        if self.0.keep_alive.as_ref().is_none_or(KeepAlive::known_kept) {
            return None;
        }
        self.idle_for().and_then(|idle| SETTLE.checked_sub(idle)).filter(|d| !d.is_zero())
    }

    pub(crate) fn set_reset(&self) {
        self.0.reset.store(true, Ordering::Relaxed);
    }

    /// Whether the server's kernel reset the connection (so far).
    pub fn was_reset(&self) -> bool {
        self.0.reset.load(Ordering::Relaxed)
    }

    /// How long ago the connection last received response bytes.
    pub fn idle_for(&self) -> Option<Duration> {
        self.0.last_read.lock().unwrap_or_else(|e| e.into_inner()).map(|t| t.elapsed())
    }

    /// Whether a written request is still unanswered.
    pub(crate) fn outstanding(&self) -> bool {
        self.0.outstanding.load(Ordering::Relaxed)
    }

    /// Keeps a copy of the socket (the connection is ending with a request unanswered).
    #[cfg(target_os = "linux")]
    pub(crate) fn keep(&self, fd: std::os::fd::BorrowedFd<'_>) {
        if let Ok(copy) = fd.try_clone_to_owned() {
            *self.0.kept.lock().unwrap_or_else(|e| e.into_inner()) = Some(copy);
        }
    }

    /// Waits (at most two round trips of the connection, within `limit`) for a reset to arrive
    /// on the kept socket; whether one did. Lets the socket go either way.
    pub async fn wait_reset(&self, limit: Duration) -> bool {
        if self.was_reset() {
            return true;
        }
        #[cfg(target_os = "linux")]
        {
            let Some(fd) = self.0.kept.lock().unwrap_or_else(|e| e.into_inner()).take() else { return false };
            use std::os::fd::AsFd;
            let Some((_, rtt)) = sys::state(fd.as_fd()) else { return false };
            let until = Instant::now() + (rtt * 2 + Duration::from_millis(1)).min(limit);
            loop {
                if sys::reset(fd.as_fd()) {
                    self.set_reset();
                    return true;
                }
                // a connection closed both ways takes no reset any more
                match sys::state(fd.as_fd()) {
                    Some((s, _)) if s != sys::TCP_CLOSE && Instant::now() < until => {
                        tokio::time::sleep(Duration::from_millis(1)).await
                    }
                    _ => return false,
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = limit;
            false
        }
    }
}

/// Whether the connection `e` failed on was given up by the server before it took the request
/// (see the module doc); `peer` is the connection's history when it got one.
pub async fn not_taken(e: &(dyn std::error::Error + Send + Sync + 'static), peer: Option<&Peer>) -> Option<NotTaken> {
    if let Some(how) = shown_by_error(e) {
        return Some(how);
    }
    // nothing was written since the connection's last answer: the request never left (the
    // connection ended while it waited to be written)
    if peer.is_some_and(|p| !p.outstanding()) {
        return Some(NotTaken::Unwritten);
    }
    match peer {
        Some(p) if p.wait_reset(RESET_WAIT_LIMIT).await => Some(NotTaken::Reset),
        _ => None,
    }
}

/// What the error itself shows.
pub fn shown_by_error(e: &(dyn std::error::Error + 'static)) -> Option<NotTaken> {
    let chain = || std::iter::successors(Some(e), |x| x.source());
    if chain().any(|x| x.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_canceled)) {
        return Some(NotTaken::Unwritten);
    }
    let io = || chain().filter_map(|x| x.downcast_ref::<std::io::Error>());
    if io().any(|x| x.get_ref().is_some_and(|i| i.is::<NotWritten>())) {
        return Some(NotTaken::ClosedBeforeWrite);
    }
    if io().any(|x| matches!(x.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe)) {
        return Some(NotTaken::Reset);
    }
    None
}

/// The longest a failed request waits for the reset that would show the server did not take it.
pub const RESET_WAIT_LIMIT: Duration = Duration::from_millis(250);

#[cfg(target_os = "linux")]
pub(crate) mod sys {
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::time::Duration;

    /// `TCP_CLOSE` in the kernel's TCP states: the connection is over (reset, or closed both
    /// ways).
    pub const TCP_CLOSE: u8 = 7;

    /// Whether the peer has closed or reset the connection (a FIN or reset is waiting, or data
    /// the server sent unasked, such as a 408 before it closes): a peek that does not wait.
    pub fn peer_closed(fd: BorrowedFd<'_>) -> bool {
        let mut b = [0u8; 1];
        // SAFETY: a valid socket and a one-byte buffer.
        let n = unsafe { libc::recv(fd.as_raw_fd(), b.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        if n >= 0 {
            return true; // 0: FIN; > 0: bytes nobody asked for
        }
        let e = std::io::Error::last_os_error();
        e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::Interrupted
    }

    /// Whether the server's kernel reset the connection: the socket's pending error is
    /// `ECONNRESET`, or `EPIPE` (a reset after the server's FIN). Reading it clears it.
    pub fn reset(fd: BorrowedFd<'_>) -> bool {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a valid socket and a c_int of the size given.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        r == 0 && (err == libc::ECONNRESET || err == libc::EPIPE)
    }

    /// The connection's TCP state and smoothed round-trip time.
    pub fn state(fd: BorrowedFd<'_>) -> Option<(u8, Duration)> {
        // SAFETY: an all-zero tcp_info is valid; the kernel fills at most `len` bytes.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: a valid socket and a buffer of `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut info as *mut libc::tcp_info).cast(),
                &mut len,
            )
        };
        (r == 0).then(|| (info.tcpi_state, Duration::from_micros(u64::from(info.tcpi_rtt))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_after_an_answer_starts_a_request_once() {
        let p = Peer::default();
        assert!(!p.starts_request_after_answer(), "a fresh connection's first write");
        p.on_write();
        assert!(p.outstanding());
        p.on_read();
        assert!(!p.outstanding());
        assert!(p.idle_for().is_some());
        assert!(p.starts_request_after_answer());
        assert!(!p.starts_request_after_answer(), "the rest of the same request's writes");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_kernel_tells_a_fin_from_a_reset() {
        use std::io::{Read, Write};
        use std::os::fd::AsFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        assert!(!sys::peer_closed(client.as_fd()), "an open connection");
        // the server closes: a FIN waits in the client's socket
        drop(server);
        std::thread::sleep(Duration::from_millis(20));
        assert!(sys::peer_closed(client.as_fd()));
        assert!(!sys::reset(client.as_fd()), "a FIN alone");
        // a request written into the closed connection is answered with a reset
        client.write_all(b"POST / HTTP/1.1\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // (reading shows only the end of the stream: the FIN came first)
        let mut b = [0u8; 8];
        assert_eq!(client.read(&mut b).unwrap_or(0), 0);
        // the kept socket shows the reset
        let p = Peer::default();
        p.keep(client.as_fd());
        assert!(p.wait_reset(Duration::from_millis(50)).await);
        assert!(p.was_reset());

        // a server that reads the request and then closes sends a FIN only: no reset follows,
        // even once the client closes its side too
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"POST / HTTP/1.1\r\n\r\n").unwrap();
        let mut got = [0u8; 64];
        let n = server.read(&mut got).unwrap();
        assert_eq!(&got[..n], b"POST / HTTP/1.1\r\n\r\n");
        drop(server);
        std::thread::sleep(Duration::from_millis(20));
        let p = Peer::default();
        p.keep(client.as_fd());
        client.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(!p.wait_reset(Duration::from_millis(50)).await);
        assert!(!p.was_reset());
    }
}
