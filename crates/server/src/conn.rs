//! One client connection, as hyper writes and reads it ([`Conn`]) and as a request's handler watches it
//! ([`Watch`]): one socket shared by the two.
//!
//! - **Writes time out.** A write that waits on the client longer than the write timeout fails, and so
//!   does any write once the response under way is past its due time ([`Watch::response_started`]):
//!   a client that reads slowly or not at all cannot hold a response, nor the queries it counts for,
//!   longer than the write timeout. The connection is then closed.
//! - **A client gone is noticed while its request is answered** ([`Watch::gone`]). A reset is gone. An
//!   end of input is either a half-close (the client sent its request, shut its side, and still reads)
//!   or a close (it reads nothing more), and the two look alike until something is sent: the watcher
//!   then sends an interim `100 Continue` (an HTTP/1.1 client must accept unexpected 1xx responses), to
//!   which a closed client's system answers with a reset that the next look sees. A half-closed client
//!   gets its response; a closed one has its queries not yet started dropped.

use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::lock;

/// Counts of the connections a server has had, for `/metrics`.
#[derive(Default)]
pub struct Connections {
    /// Open now.
    pub open: AtomicU64,
    /// Refused at `--max-connections`.
    pub refused: AtomicU64,
    /// Closed for a timeout (reading a request, or writing a response).
    pub timed_out: AtomicU64,
    /// Closed by the end of a shutdown's grace period.
    pub cut: AtomicU64,
    /// The most open at once ([`crate::ServerConfig::max_connections`]).
    pub max: u64,
}

/// The interim response sent to tell a half-closed client from a closed one.
const PROBE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// After the probe, how long to wait before each look for the reset a closed client answers with (the
/// reset comes a round trip later; a client still there after the last look has half-closed).
const PROBE_LOOKS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_secs(1),
];

/// What a connection's request handlers share with its [`Conn`].
pub struct Watch {
    stream: Arc<TcpStream>,
    write_timeout: Duration,
    /// When the response under way must be written by (None: none is under way).
    due: Mutex<Option<Instant>>,
    /// Whether hyper's last write waited for the client (bytes of its own may still be buffered: no
    /// probe may go before them).
    blocked: AtomicBool,
    /// Set when a probe went out in part only: the connection is closed at its next write.
    broken: AtomicBool,
    /// The server's connection counts.
    pub connections: Arc<Connections>,
}

impl Watch {
    /// A response's first bytes go out now: it must be written whole within the write timeout.
    pub fn response_started(&self) {
        *lock(&self.due) = Some(Instant::now() + self.write_timeout);
    }

    /// Resolves once the client is gone (reset, or closed as a probe shows); never while it may still
    /// read the response (connected, half-closed, or sending its next request). `may_probe`: whether
    /// the request is HTTP/1.1 (a 1xx response must not be sent to an HTTP/1.0 client, whose end of
    /// input is then taken for a half-close).
    pub async fn gone(&self, may_probe: bool) {
        let mut byte = [0u8; 1];
        match self.stream.peek(&mut byte).await {
            Err(_) => return,
            Ok(0) => {}
            // The next request, pipelined: nothing more can be told before this one is answered.
            Ok(_) => return std::future::pending().await,
        }
        if !may_probe || self.blocked.load(Ordering::Acquire) {
            return std::future::pending().await;
        }
        // Hyper writes nothing while a handler waits for its answers (it runs the handler on the
        // connection's own task), and its earlier writes are out (`blocked` is clear): the probe is
        // alone on the wire.
        match self.stream.try_write(PROBE) {
            Ok(n) if n == PROBE.len() => {}
            Ok(_) => {
                self.broken.store(true, Ordering::Release);
                return;
            }
            Err(_) => return,
        }
        for wait in PROBE_LOOKS {
            tokio::time::sleep(wait).await;
            if !matches!(self.stream.take_error(), Ok(None)) {
                return;
            }
        }
        std::future::pending().await
    }
}

/// The socket as hyper uses it, its writes timed ([`Watch`]).
pub struct Conn {
    stream: Arc<TcpStream>,
    watch: Arc<Watch>,
    /// Wakes a waiting write at its deadline.
    timer: Pin<Box<Sleep>>,
    /// Since when the current write has waited for the client (None: it has not).
    waiting_since: Option<Instant>,
}

impl Conn {
    /// `stream` for hyper, its writes due within `write_timeout`; and the [`Watch`] its handlers get.
    pub fn new(
        stream: TcpStream,
        write_timeout: Duration,
        connections: Arc<Connections>,
    ) -> (Conn, Arc<Watch>) {
        let stream = Arc::new(stream);
        let watch = Arc::new(Watch {
            stream: stream.clone(),
            write_timeout,
            due: Mutex::new(None),
            blocked: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            connections,
        });
        let conn = Conn {
            stream,
            watch: watch.clone(),
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            waiting_since: None,
        };
        (conn, watch)
    }

    fn timed_out(&self, what: &str) -> io::Error {
        self.watch.connections.timed_out.fetch_add(1, Ordering::Relaxed);
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} within the write timeout: the connection is closed"),
        )
    }

    /// One write by `write` when the socket takes it, timed.
    fn write_with(
        &mut self,
        cx: &mut Context<'_>,
        write: impl Fn(&TcpStream) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        if self.watch.broken.load(Ordering::Acquire) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "an interim response went out in part",
            )));
        }
        let now = Instant::now();
        let due = *lock(&self.watch.due);
        if due.is_some_and(|d| now >= d) {
            return Poll::Ready(Err(self.timed_out("the client did not read the response")));
        }
        loop {
            match self.stream.poll_write_ready(cx) {
                Poll::Ready(Ok(())) => match write(&self.stream) {
                    Ok(n) => {
                        self.waiting_since = None;
                        self.watch.blocked.store(false, Ordering::Release);
                        return Poll::Ready(Ok(n));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Poll::Ready(Err(e)),
                },
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    self.watch.blocked.store(true, Ordering::Release);
                    let since = *self.waiting_since.get_or_insert(now);
                    let deadline = due.map_or(since + self.watch.write_timeout, |d| {
                        d.min(since + self.watch.write_timeout)
                    });
                    if now >= deadline {
                        return Poll::Ready(Err(self.timed_out("the client read nothing")));
                    }
                    self.timer.as_mut().reset(deadline.into());
                    if self.timer.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Err(self.timed_out("the client read nothing")));
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.stream.poll_read_ready(cx))?;
            match this.stream.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    if n > 0 {
                        // The next request: no response is under way.
                        *lock(&this.watch.due) = None;
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().write_with(cx, |s| s.try_write(buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write_with(cx, |s| s.try_write_vectored(bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A TCP socket buffers nothing of its own to flush.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        match socket2::SockRef::from(&*self.stream).shutdown(Shutdown::Write) {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }
}
