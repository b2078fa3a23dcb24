//! Panic isolation: a panic in one request or background job answers that request with an
//! error (or ends that job) and touches nothing else. Locks are `parking_lot` (no poisoning);
//! blocking work runs under `spawn_blocking`, whose panics come back as errors; background
//! threads catch their panics per job; and [`CatchPanic`] wraps the whole service so a panic in
//! async handler code answers its request instead of unwinding the message loop.
//!
//! [`fault`] injects panics for the tests that prove this (debug builds only; `lode_engine::faults`).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::FutureExt;
use tower::Service;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Request, Response};

/// Wraps the LSP service: a request whose handler panics gets an internal error.
pub struct CatchPanic<S>(pub S);

type Boxed<E> = Pin<Box<dyn Future<Output = Result<Option<Response>, E>> + Send>>;

fn panicked(id: Option<tower_lsp_server::jsonrpc::Id>, method: &str) -> Option<Response> {
    tracing::error!("the {method} handler panicked; the server keeps serving");
    id.map(|id| {
        Response::from_error(
            id,
            Error {
                code: ErrorCode::InternalError,
                message: format!("internal error: {method} panicked (logged); the server keeps serving").into(),
                data: None,
            },
        )
    })
}

impl<S> Service<Request> for CatchPanic<S>
where
    S: Service<Request, Response = Option<Response>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Option<Response>;
    type Error = S::Error;
    type Future = Boxed<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let id = req.id().cloned();
        let method = req.method().to_owned();
        let start = std::time::Instant::now();
        let what = tracing::enabled!(target: "lode_lsp::requests", tracing::Level::DEBUG)
            .then(|| format!("{method} {}", id.as_ref().map_or(String::new(), |i| i.to_string())));
        let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| self.0.call(req))) {
            Ok(f) => f,
            Err(_) => return Box::pin(async move { Ok(panicked(id, &method)) }),
        };
        Box::pin(async move {
            let r = match AssertUnwindSafe(fut).catch_unwind().await {
                Ok(r) => r,
                Err(_) => Ok(panicked(id, &method)),
            };
            if let Some(what) = what {
                tracing::debug!(target: "lode_lsp::requests", "{what}: {:.2} ms", start.elapsed().as_secs_f64() * 1000.0);
            }
            r
        })
    }
}

pub use lode_engine::faults::fault;
