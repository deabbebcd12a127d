//! The console's pages, scripts and styles, embedded in the binary: nothing is fetched from
//! elsewhere and nothing is built at run time.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One embedded file under `/assets/`.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset { name: $name, content_type: $content_type, body: include_str!(concat!("assets/", $name)) }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

const ASSETS: &[Asset] = &[
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("view.js", JS),
    asset!("plot.js", JS),
    asset!("runs.js", JS),
    asset!("run.js", JS),
    asset!("guardrails.js", JS),
    asset!("processors.js", JS),
    asset!("agents.js", JS),
    asset!("memory.js", JS),
    asset!("playground.js", JS),
];

const INDEX: &str = include_str!("assets/index.html");

/// `GET /`: the page every view lives in.
pub(super) async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response()
}

/// `GET /assets/<file>`.
pub(super) async fn file(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|asset| asset.name == name) {
        Some(asset) => ([(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    }
}
