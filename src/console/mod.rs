//! The operator console: pages served by the binary itself on `[console] listen`, over the public
//! API. Its assets are embedded (`assets`); its data comes from the gRPC methods, called
//! in-process through `gateway` with the key the operator signed in with — the console shows
//! what that key may see over gRPC, and nothing else.
//!
//! Requests to `/api/` must be `POST` with `content-type: application/json`: a form on another
//! site cannot send that without a CORS preflight, which the console never grants. Every request
//! must name the console in `Host` ([`ConsoleAccess`]), and on a server without API keys the
//! calls that change state are refused unless the operator opts in.

mod access;
mod assets;
mod connections;
mod error;
mod gateway;
mod tls;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;

pub use self::access::ConsoleAccess;
pub use self::connections::ConnectionLimits;
pub use self::error::ConsoleError;
use self::gateway::Gateway;

/// The largest request body the console takes (a playground text, a working memory).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

pub use self::tls::acceptor;

/// Serves the console over the services of `routes` ([`crate::server::Services::routes`]) on
/// `listener` (over TLS with `tls`), answering as `access` allows and holding connections within
/// `limits`, for as long as the future is polled.
pub async fn serve(
    listener: TcpListener,
    routes: tonic::service::Routes,
    tls: Option<tokio_rustls::TlsAcceptor>,
    access: ConsoleAccess,
    limits: ConnectionLimits,
) -> Result<(), ConsoleError> {
    let gateway = Gateway::new(routes)?;
    let app = Router::new()
        .route("/", get(assets::index))
        .route("/assets/{file}", get(assets::file))
        .route("/api/{service}/{method}", post(api))
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Console { gateway, access: access.clone() })
        .layer(axum::middleware::from_fn(move |request: Request, next: Next| {
            let checked = access.check_host(request.headers());
            async move {
                match checked {
                    Ok(()) => next.run(request).await,
                    Err(error) => error.into_response(),
                }
            }
        }))
        .layer(axum::middleware::map_response(secure_headers));
    match tls {
        Some(acceptor) => connections::serve(tls::TlsListener::new(listener, acceptor), app, limits).await,
        None => connections::serve(listener, app, limits).await,
    }
    Ok(())
}

/// What the console's handlers share.
#[derive(Clone)]
struct Console {
    gateway: Gateway,
    access: ConsoleAccess,
}

/// `POST /api/<service>/<method>`: the method called with the JSON body.
async fn api(
    State(Console { gateway, access }): State<Console>,
    Path((service, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(';').next().is_some_and(|kind| kind.trim() == "application/json"));
    if !json {
        return ConsoleError::NotJson.into_response();
    }
    if let Err(error) = access.check_write(&service, &method) {
        return error.into_response();
    }
    match gateway.call(&service, &method, &headers, &body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not a console page\n").into_response()
}

/// Every answer: no framing by other sites, no referrer, scripts and styles from here only.
async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
