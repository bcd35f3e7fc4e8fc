//! When a response's bytes reached this machine: the kernel's receive time of what a read returned.
//!
//! A client that reads the clock when its task gets to a chunk stamps it late by however long the
//! chunk waited: behind other streams' chunks that arrived in the same instant (streams started
//! together deliver their tokens together), behind a busy runtime, behind the scheduler. That wait
//! is the client's, not the server's, and it lands in TTFT and ITL tails. On Linux each connection
//! asks the kernel to stamp the data it receives (`SO_TIMESTAMPNS`) and reads through `recvmsg`,
//! which hands back the receive time of the newest data the read returned. [`Arrivals`] keeps that
//! time, converted to the monotonic clock, for the exchange to stamp the events decoded from it.
//!
//! The conversion: the kernel's stamp is on the real-time clock; right after the read, the time
//! since that stamp (real-time now minus the stamp) is subtracted from the monotonic now. Only that
//! interval (microseconds to milliseconds) comes from the real-time clock, so a clock step matters
//! only if it falls inside it; a stamp in the future or more than [`MAX_AGE`] old is not used.
//!
//! A stamp is an upper bound on when an event's bytes arrived: it belongs to the newest read on
//! the connection, which read those bytes or later ones. [`stamp`] keeps it at or before now and
//! not before the request's previous stamp, so it is never later than a clock read would be.
//! Where the kernel gives no stamp (another OS, a refused socket option), reads are plain and
//! [`stamp`] is the clock read.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use tokio::net::TcpStream;

/// The oldest kernel stamp used; an older one (or one from the future) means the real-time clock
/// stepped, and the clock read is used instead.
pub const MAX_AGE: Duration = Duration::from_secs(10);

/// The origin of [`Arrivals`]' nanosecond counts (a fixed monotonic instant of this process).
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// When the newest data read on a connection arrived, and when the newest write to it completed;
/// shared by the connection and the requests that run on it.
#[derive(Clone, Debug)]
pub struct Arrivals(Arc<[AtomicI64; 2]>);

const READ: usize = 0;
const WRITTEN: usize = 1;
/// An empty slot.
const NONE: i64 = i64::MIN;

impl Default for Arrivals {
    fn default() -> Self {
        Arrivals(Arc::new([AtomicI64::new(NONE), AtomicI64::new(NONE)]))
    }
}

impl Arrivals {
    /// Keeps `at` in slot `i`, as signed nanoseconds from the origin.
    fn set(&self, i: usize, at: Instant) {
        let o = origin();
        let ns = match at.checked_duration_since(o) {
            Some(d) => d.as_nanos() as i64,
            None => -((o - at).as_nanos() as i64),
        };
        self.0[i].store(ns, Ordering::Release);
    }

    fn get(&self, i: usize) -> Option<Instant> {
        match self.0[i].load(Ordering::Acquire) {
            NONE => None,
            ns if ns >= 0 => Some(origin() + Duration::from_nanos(ns as u64)),
            ns => Some(origin() - Duration::from_nanos(ns.unsigned_abs())),
        }
    }

    fn record(&self, at: Instant) {
        self.set(READ, at)
    }

    /// The newest arrival, if a read has been stamped.
    pub fn latest(&self) -> Option<Instant> {
        self.get(READ)
    }

    /// When the newest write on the connection returned (the kernel had its bytes).
    pub fn written(&self) -> Option<Instant> {
        self.get(WRITTEN)
    }

    /// Converts a kernel stamp `age` old at `now` (monotonic) and keeps it. A read without a
    /// stamp, or with one out of range (see [`MAX_AGE`]), empties the slot: an older read's stamp
    /// must never stand for newer bytes.
    fn record_age(&self, now: Instant, age: Option<Duration>) {
        match age.filter(|a| *a <= MAX_AGE).and_then(|a| now.checked_sub(a)) {
            Some(at) => self.record(at),
            None => self.0[READ].store(NONE, Ordering::Release),
        }
    }
}

/// The time to stamp bytes a request has just been handed: the newest arrival on its connection,
/// kept between `floor` (the request's previous stamp, or when it was sent) and now; now where
/// there is no arrival.
pub fn stamp(arrivals: Option<&Arrivals>, floor: Instant) -> Instant {
    let now = Instant::now();
    match arrivals.and_then(Arrivals::latest) {
        Some(at) => at.max(floor).min(now),
        None => now,
    }
}

/// A connector of plain TCP connections that stamp what they read ([`StampedTcp`]) and keep
/// what the kernel says of the server's side ([`crate::closing::Peer`], reporting to the client's
/// keep-alive switch).
#[derive(Clone, Debug)]
pub struct Stamping(pub HttpConnector, pub crate::closing::KeepAlive);

impl tower_service::Service<http::Uri> for Stamping {
    type Response = StampedTcp;
    type Error = <HttpConnector as tower_service::Service<http::Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<StampedTcp, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        sys::keep_stamping();
        let fut = self.0.call(uri);
        let keep_alive = self.1.clone();
        Box::pin(async move {
            let mut c = StampedTcp::new(fut.await?.into_inner());
            c.peer = Some(crate::closing::Peer::new(keep_alive));
            Ok(c)
        })
    }
}

/// A TCP connection whose reads keep the kernel's receive time in its [`Arrivals`], which it
/// hands to requests in its metadata.
#[derive(Debug)]
pub struct StampedTcp {
    io: TcpStream,
    /// Whether the kernel agreed to stamp received data (reads go through `recvmsg`).
    stamped: bool,
    arrivals: Arrivals,
    /// What the kernel said about the server's side of the connection ([`crate::closing`]);
    /// `None` on a server's side of one.
    peer: Option<crate::closing::Peer>,
    /// A request about to reuse the connection: checked for the server's close before its first
    /// byte, after waiting out [`crate::closing::SETTLE`] (`settle`) when it must.
    checking: bool,
    settle: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl StampedTcp {
    /// Stamps what `io` receives from now on (a server's accepted connection, for one).
    pub fn new(io: TcpStream) -> Self {
        sys::keep_stamping();
        let stamped = sys::enable(&io);
        StampedTcp { io, stamped, arrivals: Arrivals::default(), peer: None, checking: false, settle: None }
    }

    /// The connection's stamps.
    pub fn arrivals(&self) -> &Arrivals {
        &self.arrivals
    }
}

impl Connection for StampedTcp {
    fn connected(&self) -> Connected {
        let c = self.io.connected().extra(self.arrivals.clone());
        match &self.peer {
            Some(p) => c.extra(p.clone()),
            None => c,
        }
    }
}

impl StampedTcp {
    /// Keeps what a read says about the server's side: bytes of an answer, its end (a reset,
    /// when the kernel's state says so), or a reset.
    fn read_done(&self, r: Result<usize, std::io::ErrorKind>) {
        let Some(peer) = &self.peer else { return };
        match r {
            Ok(n) if n > 0 => peer.on_read(),
            Ok(_) => {
                #[cfg(target_os = "linux")]
                {
                    use crate::closing::sys;
                    use std::os::fd::AsFd;
                    if sys::reset(self.io.as_fd()) {
                        peer.set_reset();
                    }
                }
                peer.on_end();
            }
            Err(std::io::ErrorKind::ConnectionReset) => peer.set_reset(),
            Err(_) => {}
        }
    }

    /// Before the first write of a request on a connection that has answered one: waits out
    /// the settling time when it must, then an error when the server has closed the connection
    /// meanwhile (nothing is written).
    fn before_write(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let Some(peer) = self.peer.clone() else { return Poll::Ready(Ok(())) };
        if !self.checking {
            if !peer.starts_request_after_answer() {
                return Poll::Ready(Ok(()));
            }
            self.checking = true;
            self.settle = peer.settle().map(|d| Box::pin(tokio::time::sleep(d)));
        }
        if let Some(s) = &mut self.settle {
            std::task::ready!(s.as_mut().poll(cx));
            self.settle = None;
        }
        self.checking = false;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsFd;
            if crate::closing::sys::peer_closed(self.io.as_fd()) {
                return Poll::Ready(Err(std::io::Error::other(crate::closing::NotWritten)));
            }
        }
        peer.reusing();
        Poll::Ready(Ok(()))
    }
}

impl Drop for StampedTcp {
    fn drop(&mut self) {
        // a request still unanswered: keep the socket a moment, to see whether a reset follows
        #[cfg(target_os = "linux")]
        if let Some(peer) = self.peer.as_ref().filter(|p| p.outstanding()) {
            use std::os::fd::AsFd;
            peer.keep(self.io.as_fd());
        }
    }
}

impl Read for StampedTcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.stamped {
            // SAFETY: the read buffer fills only initialized bytes, and the cursor is advanced by
            // exactly the number it filled.
            let mut rb = tokio::io::ReadBuf::uninit(unsafe { buf.as_mut() });
            let r = std::task::ready!(tokio::io::AsyncRead::poll_read(Pin::new(&mut self.io), cx, &mut rb));
            let n = rb.filled().len();
            self.read_done(r.as_ref().map(|()| n).map_err(std::io::Error::kind));
            // SAFETY: `n` bytes were initialized by the read.
            unsafe { buf.advance(n) };
            return Poll::Ready(r);
        }
        loop {
            std::task::ready!(self.io.poll_read_ready(cx))?;
            let this = &mut *self;
            // SAFETY: `recv` writes only initialized bytes into the slice, and the cursor is
            // advanced by exactly the number it wrote.
            let unfilled = unsafe { buf.as_mut() };
            match this.io.try_io(tokio::io::Interest::READABLE, || sys::recv(&this.io, unfilled)) {
                Ok((n, age)) => {
                    if n > 0 {
                        this.arrivals.record_age(Instant::now(), age);
                    }
                    this.read_done(Ok(n));
                    // SAFETY: `recv` initialized the first `n` bytes.
                    unsafe { buf.advance(n) };
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    this.read_done(Err(e.kind()));
                    return Poll::Ready(Err(e));
                }
            }
        }
    }
}

impl Write for StampedTcp {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        std::task::ready!(self.before_write(cx))?;
        let r = tokio::io::AsyncWrite::poll_write(Pin::new(&mut self.io), cx, buf);
        self.wrote(&r);
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        tokio::io::AsyncWrite::poll_flush(Pin::new(&mut self.io), cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        tokio::io::AsyncWrite::poll_shutdown(Pin::new(&mut self.io), cx)
    }

    fn is_write_vectored(&self) -> bool {
        tokio::io::AsyncWrite::is_write_vectored(&self.io)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        std::task::ready!(self.before_write(cx))?;
        let r = tokio::io::AsyncWrite::poll_write_vectored(Pin::new(&mut self.io), cx, bufs);
        self.wrote(&r);
        r
    }
}

impl StampedTcp {
    /// Notes when a write that took bytes returned.
    fn wrote(&self, r: &Poll<std::io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = r
            && *n > 0
        {
            self.arrivals.set(WRITTEN, Instant::now());
            if let Some(p) = &self.peer {
                p.on_write();
            }
        }
    }
}

#[cfg(target_os = "linux")]
mod sys {
    use std::mem::MaybeUninit;
    use std::os::fd::AsRawFd;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use tokio::net::TcpStream;

    /// Keeps the kernel's receive stamping on for the life of the process. The kernel stamps
    /// packets while any socket asks for it, and turns stamping on a moment after the first one
    /// does (deferred work): a socket that asks and stays open keeps connections that come and go
    /// from missing stamps in that moment.
    pub fn keep_stamping() {
        static HOLDER: std::sync::OnceLock<Option<std::net::UdpSocket>> = std::sync::OnceLock::new();
        HOLDER.get_or_init(|| {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
            ask(s.as_raw_fd()).then_some(s)
        });
    }

    /// Asks the kernel to stamp the data the socket receives; whether it agreed.
    pub fn enable(io: &TcpStream) -> bool {
        ask(io.as_raw_fd())
    }

    fn ask(fd: std::os::fd::RawFd) -> bool {
        let on: libc::c_int = 1;
        // SAFETY: a valid socket and a c_int option of the size given.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        r == 0
    }

    /// One `recvmsg` into `buf`: the bytes read and how long ago (now, on the real-time clock)
    /// the kernel received the newest of them, when it said.
    pub fn recv(io: &TcpStream, buf: &mut [MaybeUninit<u8>]) -> std::io::Result<(usize, Option<Duration>)> {
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // room for one SCM_TIMESTAMPNS message (and alignment for its header)
        let mut control = [0u64; 8];
        // SAFETY: an all-zero msghdr is valid; its pointers are set to live buffers below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: the socket is open and every pointer in `msg` is valid for its length.
        let n = unsafe { libc::recvmsg(io.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut stamp = None;
        // SAFETY: walking the control messages the kernel wrote, within `msg_controllen`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    stamp = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>()));
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let age = stamp.and_then(|ts| {
            let at = Duration::new(u64::try_from(ts.tv_sec).ok()?, u32::try_from(ts.tv_nsec).ok()?);
            SystemTime::now().duration_since(UNIX_EPOCH).ok()?.checked_sub(at)
        });
        Ok((n as usize, age))
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::mem::MaybeUninit;
    use std::time::Duration;

    use tokio::net::TcpStream;

    pub fn keep_stamping() {}

    pub fn enable(_: &TcpStream) -> bool {
        false
    }

    pub fn recv(_: &TcpStream, _: &mut [MaybeUninit<u8>]) -> std::io::Result<(usize, Option<Duration>)> {
        unreachable!("reads are plain where the kernel does not stamp them")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;

    #[test]
    fn a_stamp_stays_between_the_floor_and_now() {
        let a = Arrivals::default();
        let floor = Instant::now();
        // no arrival yet: the clock read
        let t = stamp(Some(&a), floor);
        assert!(t >= floor);
        // an arrival before the floor is lifted to it
        a.record(floor - Duration::from_millis(5));
        assert_eq!(stamp(Some(&a), floor), floor);
        // an arrival between the floor and now is kept as it is
        let mid = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        a.record(mid);
        assert_eq!(stamp(Some(&a), floor), mid);
        // an arrival after now (cannot happen; guarded anyway) is brought back to now
        a.record(Instant::now() + Duration::from_secs(1));
        assert!(stamp(Some(&a), floor) <= Instant::now());
    }

    /// Bytes that wait in the socket are stamped when they arrived, not when they were read.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn bytes_read_late_carry_their_arrival_time() {
        use hyper_util::client::legacy::connect::HttpConnector;
        use tokio::io::AsyncWriteExt;
        use tower_service::Service;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: http::Uri = format!("http://{}", listener.local_addr().unwrap()).parse().unwrap();
        let mut conn = Stamping(HttpConnector::new(), Default::default()).call(url).await.unwrap();
        assert!(conn.stamped, "the kernel refused SO_TIMESTAMPNS");
        let (mut server, _) = listener.accept().await.unwrap();
        let arrivals = conn.arrivals.clone();

        // the kernel turns receive stamps on a moment after the first socket asks (deferred
        // work): probe until a read is stamped
        let mut buf = [0u8; 64];
        let on = Instant::now();
        loop {
            server.write_all(b"p").await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            assert_eq!(read(&mut conn, &mut buf).await, 1);
            if arrivals.latest().is_some() {
                break;
            }
            assert!(on.elapsed() < Duration::from_secs(5), "the kernel stamped no read in 5 s");
        }
        let before = Instant::now();
        server.write_all(b"data: one").await.unwrap();
        let sent = Instant::now();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let n = read(&mut conn, &mut buf).await;
        let read_at = Instant::now();
        assert_eq!(&buf[..n], b"data: one");
        let at = arrivals.latest().expect("a stamp");
        // stamped while the write was under way (loopback delivers within the write; 1 ms for
        // converting the kernel's clock), at least 30 ms before the read
        let ms = Duration::from_millis(1);
        assert!(before <= at + ms && at <= sent + ms, "stamp {:?} after the write began", at.duration_since(before));
        assert!(at + Duration::from_millis(25) <= read_at, "{:?} before the read", read_at - at);
        assert!(arrivals.written().is_none());
        tokio::io::AsyncWriteExt::write_all(&mut TokioIo::new(conn), b"x").await.unwrap();
        assert!(arrivals.written().is_some());
    }

    async fn read(conn: &mut StampedTcp, buf: &mut [u8]) -> usize {
        let mut io = TokioIo::new(conn);
        tokio::io::AsyncReadExt::read(&mut io, buf).await.unwrap()
    }

    #[test]
    fn ages_out_of_range_are_not_kept() {
        let a = Arrivals::default();
        let now = Instant::now() + Duration::from_secs(60);
        a.record_age(now, Some(MAX_AGE + Duration::from_nanos(1)));
        a.record_age(now, None);
        assert_eq!(a.latest(), None);
        a.record_age(now, Some(Duration::from_micros(250)));
        assert_eq!(a.latest(), Some(now - Duration::from_micros(250)));
        // a later read without a stamp (or with one out of range) leaves none, not the old one
        a.record_age(now, None);
        assert_eq!(a.latest(), None);
        a.record_age(now, Some(Duration::from_micros(250)));
        a.record_age(now, Some(MAX_AGE * 2));
        assert_eq!(a.latest(), None);
    }
}
