//! The connections: accepted up to `--max-connections` (one more is answered 503 and closed), each
//! served as HTTP/1.1 by hyper over a [`Conn`] (its writes timed), a request's header due within
//! `--idle-timeout` of the connection waiting for it, and half-closed clients answered. On shutdown no
//! connection is accepted, idle ones close, those answering finish their response, and whatever is
//! still open after `--shutdown-grace` is closed (its requests abandoned: the engine drops their queries
//! not yet started), so that a stop never waits on a client.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tower::ServiceExt;
use tracing::{debug, info, warn};

use crate::conn::{Conn, Connections};
use crate::ServerConfig;

/// Serves `app` on `listener` until `shutdown` resolves, then stops as the module says.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    config: &ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let connections = Arc::new(Connections {
        max: config.max_connections as u64,
        ..Connections::default()
    });
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        // hyper's header timer runs from when the connection starts waiting for a request: it bounds
        // idle keep-alive connections and slowly sent headers alike.
        .header_read_timeout(config.idle_timeout)
        .half_close(true)
        .keep_alive(true);
    let http = Arc::new(http);
    let (stop, stopping) = watch::channel(false);
    let mut open: JoinSet<()> = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(_) = open.join_next(), if !open.is_empty() => {}
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors, or a connection reset before it was taken: wait a
                        // moment rather than spin, and go on.
                        warn!(error = %e, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    connections.refused.fetch_add(1, Ordering::Relaxed);
                    refuse(&stream, config.max_connections);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let (conn, watch) = Conn::new(stream, config.write_timeout, connections.clone());
                let (app, http, mut stopping) = (app.clone(), http.clone(), stopping.clone());
                let connections = connections.clone();
                open.spawn(async move {
                    connections.open.fetch_add(1, Ordering::Relaxed);
                    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                        request.extensions_mut().insert(watch.clone());
                        app.clone().oneshot(request.map(Body::new))
                    });
                    let served = http.serve_connection(TokioIo::new(conn), service);
                    tokio::pin!(served);
                    let result = tokio::select! {
                        r = served.as_mut() => r,
                        _ = async { let _ = stopping.wait_for(|s| *s).await; } => {
                            served.as_mut().graceful_shutdown();
                            served.await
                        }
                    };
                    if let Err(e) = result {
                        debug!(error = %e, "connection closed");
                    }
                    connections.open.fetch_sub(1, Ordering::Relaxed);
                    drop(slot);
                });
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    let grace = config.shutdown_grace;
    let drained = tokio::time::timeout(grace, async { while open.join_next().await.is_some() {} })
        .await
        .is_ok();
    if drained {
        info!("warpsearch serve: stopped, every accepted request answered");
    } else {
        let n = open.len();
        connections.cut.fetch_add(n as u64, Ordering::Relaxed);
        open.shutdown().await;
        warn!(
            connections = n,
            grace_s = grace.as_secs_f64(),
            "warpsearch serve: stopped, closing the connections still open after the shutdown grace"
        );
    }
    Ok(())
}

/// Tells a connection beyond `--max-connections` so (503, `Retry-After: 1`), if its socket takes the
/// few bytes at once, and closes it.
fn refuse(stream: &TcpStream, max: usize) {
    let body = format!(
        "{{\"error\":\"the server holds its limit of {max} connections: retry later\",\"field\":null}}"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(response.as_bytes());
}
