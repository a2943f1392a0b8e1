//! What a running probe shows to the outside: `/metrics` in the
//! Prometheus/OpenMetrics text format, over what the engine publishes
//! ([`sluice_engine::Published`]), and the web console ([`serve_web`]).

mod metrics;
mod web;

pub use web::{WebConfig, published_from, serve_web};

use std::net::SocketAddr;
use std::thread;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use sluice_engine::Published;

/// A server running on a thread of its own until it is dropped.
pub struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Server {
    /// The address it listens on (with the port the system chose for `:0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves `/metrics` on `addr` (`127.0.0.1:9900`).
pub fn serve_metrics(addr: &str, published: Published) -> std::io::Result<Server> {
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let published = published.clone();
            async move {
                (
                    [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
                    metrics::render(&published.lock()),
                )
                    .into_response()
            }
        }),
    );
    serve(addr, app)
}

fn serve(addr: &str, app: Router) -> std::io::Result<Server> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let thread = thread::Builder::new().name("sluice-http".into()).spawn(move || {
        runtime.block_on(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                return;
            };
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
    })?;
    Ok(Server {
        addr: bound,
        stop: Some(stop),
        thread: Some(thread),
    })
}
