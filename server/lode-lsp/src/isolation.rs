//! Panic isolation: a panic in one request or background job answers that request with an
//! error (or ends that job) and touches nothing else. Locks are `parking_lot` (no poisoning);
//! blocking work runs under `spawn_blocking`, whose panics come back as errors; background
//! threads catch their panics per job; and [`CatchPanic`] wraps the whole service so a panic in
//! async handler code answers its request instead of unwinding the message loop.
//!
//! [`fault`] injects panics for the tests that prove this (debug builds only).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::FutureExt;
use tower::Service;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Request, Response};

/// Wraps the LSP service: a request whose handler panics gets an internal error, and a request
/// named by `$/cancelRequest` ends at once (see [`InFlight`]).
pub struct CatchPanic<S>(pub S, pub InFlight);

/// Requests in flight, by id. The framing guard reads every frame before the library does and
/// acts on `$/cancelRequest` as soon as it reads one: the library would poll the notification
/// only when one of its in-flight slots frees, and a flood of slow requests holds them all.
/// A cancelled request is answered with RequestCancelled (-32800) and its handler future is
/// dropped (which stops its work: see `CancelOnDrop`).
#[derive(Clone, Default)]
pub struct InFlight(std::sync::Arc<parking_lot::Mutex<std::collections::HashMap<String, futures::future::AbortHandle>>>);

impl InFlight {
    /// Cancels the request whose JSON-RPC id is `id`, if it is in flight.
    pub fn cancel(&self, id: &serde_json::Value) -> bool {
        match self.0.lock().remove(&id.to_string()) {
            Some(h) => {
                h.abort();
                true
            }
            None => false,
        }
    }
}

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
        let key = id.as_ref().and_then(|i| serde_json::to_string(i).ok());
        let (abort, registration) = futures::future::AbortHandle::new_pair();
        if let Some(k) = &key {
            self.1 .0.lock().insert(k.clone(), abort);
        }
        let in_flight = self.1.clone();
        Box::pin(async move {
            let r = match futures::future::Abortable::new(AssertUnwindSafe(fut).catch_unwind(), registration).await {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Ok(panicked(id, &method)),
                Err(futures::future::Aborted) => Ok(id.map(|id| Response::from_error(id, Error::request_cancelled()))),
            };
            if let Some(k) = key {
                in_flight.0.lock().remove(&k);
            }
            if let Some(what) = what {
                tracing::debug!(target: "lode_lsp::requests", "{what}: {:.2} ms", start.elapsed().as_secs_f64() * 1000.0);
            }
            r
        })
    }
}

/// Fault injection for the isolation tests: in a debug build, `LODE_FAULT=ask,scan,…` makes
/// the named point panic the first time it is reached. Release builds never read it.
pub fn fault(point: &str) {
    if !cfg!(debug_assertions) {
        return;
    }
    static FIRED: parking_lot::Mutex<Vec<String>> = parking_lot::Mutex::new(Vec::new());
    let Ok(spec) = std::env::var("LODE_FAULT") else { return };
    if spec.split(',').any(|p| p.trim() == point) {
        let mut fired = FIRED.lock();
        if !fired.iter().any(|f| f == point) {
            fired.push(point.to_owned());
            drop(fired);
            panic!("injected fault at {point}");
        }
    }
}
