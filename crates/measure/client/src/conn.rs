//! Connections that know how many requests they have carried.
//!
//! A request that fails before any byte of a response is ambiguous: the server may have read it
//! and dropped the connection, or may have closed the connection before the request arrived.
//! The second happens only on a reused keep-alive connection (servers close idle or finished
//! connections without announcing it), never on a fresh one. [`Tracked`] wraps the connector so
//! each connection carries a use counter ([`Uses`]) in its metadata; the exchange reads it
//! through `hyper_util`'s connection capture and resends only what failed on a reused one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{CaptureConnection, Connected, Connection};

/// Requests a connection has been handed, shared by its clones.
#[derive(Clone, Debug, Default)]
pub struct Uses(Arc<AtomicU32>);

impl Uses {
    /// Counts one more request on the connection; how many it had carried before.
    pub fn take(&self) -> u32 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// What a request learned about the connection it was given.
#[derive(Clone, Debug, Default)]
pub struct ConnInfo {
    /// Whether the connection had carried a request before (counting this one); `None` when the
    /// request never got a connection.
    pub reused: Option<bool>,
    /// When the connection's newest data arrived ([`crate::arrival`]), where the kernel stamps it.
    pub arrivals: Option<crate::arrival::Arrivals>,
    /// What the kernel said about the server's side of it ([`crate::closing`]).
    pub peer: Option<crate::closing::Peer>,
}

/// Counts the request on the connection it was given, and reads what that connection carries.
pub fn info(capture: &CaptureConnection) -> ConnInfo {
    let meta = capture.connection_metadata();
    let Some(connected) = meta.as_ref() else { return ConnInfo::default() };
    let mut ext = http::Extensions::new();
    connected.get_extras(&mut ext);
    ConnInfo {
        reused: ext.get::<Uses>().map(|u| u.take() > 0),
        arrivals: ext.get::<crate::arrival::Arrivals>().cloned(),
        peer: ext.get::<crate::closing::Peer>().cloned(),
    }
}

/// A connector whose connections carry a [`Uses`] counter.
#[derive(Clone, Debug)]
pub struct Tracked<C>(pub C);

impl<C> tower_service::Service<http::Uri> for Tracked<C>
where
    C: tower_service::Service<http::Uri>,
    C::Future: Send + 'static,
{
    type Response = Counted<C::Response>;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let fut = self.0.call(uri);
        Box::pin(async move { Ok(Counted { io: fut.await?, uses: Uses::default() }) })
    }
}

/// A connection and its counter.
#[derive(Debug)]
pub struct Counted<T> {
    io: T,
    uses: Uses,
}

impl<T: Connection> Connection for Counted<T> {
    fn connected(&self) -> Connected {
        self.io.connected().extra(self.uses.clone())
    }
}

impl<T: Read + Unpin> Read for Counted<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Counted<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}
