//! A search's (or a stored document's) response body: its JSON written once into chunks, handed to
//! hyper a chunk at a time, the request's hold on its places among `--max-in-flight` (a search's
//! [`Held`], a document's permit) let go only once the last chunk is taken. Hyper
//! takes a chunk only when its write buffer has room, so a client that does not read keeps its
//! queries counted against `--max-in-flight` (and its connection's write timeout running) instead of
//! leaving tens of megabytes behind an answered request.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use serde::Serialize;

use crate::conn::Watch;
use crate::request::ApiError;
#[cfg(doc)]
use crate::searcher::Held;

/// Bytes a chunk holds: with hyper's queue of at most 16 buffers, at most 256 KiB of a response are
/// buffered past the point where its queries stop counting.
const CHUNK: usize = 16 << 10;

/// JSON written into [`CHUNK`]-sized buffers (one buffer grown to 54 MB was copied a dozen times over).
#[derive(Default)]
struct Chunker {
    done: VecDeque<Bytes>,
    current: Vec<u8>,
    len: u64,
}

impl Write for Chunker {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len();
        while !buf.is_empty() {
            if self.current.capacity() == 0 {
                self.current.reserve_exact(CHUNK);
            }
            let take = buf.len().min(CHUNK - self.current.len());
            self.current.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
            if self.current.len() == CHUNK {
                self.done
                    .push_back(Bytes::from(std::mem::take(&mut self.current)));
            }
        }
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The body: the chunks left, their length, and what is let go with the last.
struct Chunks {
    chunks: VecDeque<Bytes>,
    left: u64,
    /// Dropped to let go of the places (a [`Held`] or a semaphore permit).
    held: Option<Box<dyn Send>>,
    watch: Option<Arc<Watch>>,
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(watch) = this.watch.take() {
            watch.response_started();
        }
        match this.chunks.pop_front() {
            Some(chunk) => {
                this.left -= chunk.len() as u64;
                if this.chunks.is_empty() {
                    this.held = None;
                }
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            None => {
                this.held = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

/// `value` as a JSON response whose places stay held (`held`, let go when dropped) until hyper takes
/// its last bytes; `watch`: the connection, told when the response starts (its write timeout runs from
/// then).
pub fn json(value: &impl Serialize, held: impl Send + 'static, watch: Option<Arc<Watch>>) -> Response {
    let mut out = Chunker::default();
    if let Err(e) = serde_json::to_writer(&mut out, value) {
        return ApiError::internal(format!("writing the response: {e}")).into_response();
    }
    if !out.current.is_empty() {
        out.done.push_back(Bytes::from(out.current));
    }
    let body = Chunks {
        chunks: out.done,
        left: out.len,
        held: Some(Box::new(held)),
        watch,
    };
    ([(header::CONTENT_TYPE, "application/json")], Body::new(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_the_bytes_in_order() {
        let mut c = Chunker::default();
        let data: Vec<u8> = (0..3 * CHUNK + 5).map(|i| (i % 251) as u8).collect();
        for piece in data.chunks(1000) {
            c.write_all(piece).unwrap();
        }
        assert_eq!(c.len, data.len() as u64);
        assert_eq!(c.done.len(), 3);
        assert!(c.done.iter().all(|b| b.len() == CHUNK));
        let mut all: Vec<u8> = c.done.iter().flat_map(|b| b.iter().copied()).collect();
        all.extend_from_slice(&c.current);
        assert_eq!(all, data);
    }
}
