//! The metrics endpoint: `GET /metrics` in the Prometheus text format, on a port of its own
//! (plain HTTP/1.1, one response per connection — what a scraper needs and no more).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::runtime::Runtime;
use crate::telemetry::metrics::{self, Gauge};

/// The most of a request the endpoint reads.
const MAX_REQUEST_BYTES: usize = 8192;

/// Serves `/metrics` on `listener` until the future is dropped.
pub async fn serve_metrics(listener: TcpListener, runtime: Arc<Runtime>) {
    loop {
        let Ok((connection, _)) = listener.accept().await else { continue };
        tokio::spawn(answer(connection, Arc::clone(&runtime)));
    }
}

async fn answer(mut connection: TcpStream, runtime: Arc<Runtime>) {
    let mut request = Vec::with_capacity(1024);
    let mut buffer = [0; 1024];
    while !request.windows(4).any(|window| window == b"\r\n\r\n") && request.len() < MAX_REQUEST_BYTES {
        match connection.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => request.extend_from_slice(&buffer[..read]),
        }
    }
    let first_line = String::from_utf8_lossy(&request).lines().next().unwrap_or_default().to_owned();
    let (status, body) = match first_line.split(' ').take(2).collect::<Vec<_>>().as_slice() {
        ["GET", "/metrics"] => ("200 OK", scrape(&runtime)),
        _ => ("404 Not Found", "only GET /metrics is served here\n".to_owned()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = connection.write_all(response.as_bytes()).await;
    let _ = connection.shutdown().await;
}

/// The registry, with the gauges read now: remote instances per processor, the bytes streams
/// hold unread, the store's size, writability and free disk space.
fn scrape(runtime: &Runtime) -> String {
    let mut instances: BTreeMap<String, usize> = BTreeMap::new();
    for session in runtime.remote_pool().all_sessions() {
        *instances.entry(session.processor_id.clone()).or_default() += 1;
    }
    let mut gauges: Vec<Gauge> = instances
        .into_iter()
        .map(|(processor, count)| Gauge {
            metric: &metrics::REMOTE_INSTANCES,
            labels: vec![("processor", processor)],
            value: count as f64,
        })
        .collect();
    gauges.push(Gauge {
        metric: &metrics::STREAM_BUFFERED_BYTES,
        labels: Vec::new(),
        value: runtime.stream_budget().used() as f64,
    });
    if let Some(store) = runtime.store() {
        if let Some(bytes) = store.size_bytes() {
            gauges.push(Gauge { metric: &metrics::STORE_BYTES, labels: Vec::new(), value: bytes as f64 });
        }
        if let Some(writability) = store.writability() {
            let now = writability.borrow().clone();
            gauges.push(Gauge {
                metric: &metrics::STORE_WRITABLE,
                labels: vec![("state", now.name().to_owned())],
                value: if now.check().is_ok() { 1.0 } else { 0.0 },
            });
        }
        if let Some(bytes) = store.free_bytes() {
            gauges.push(Gauge {
                metric: &metrics::STORE_FREE_BYTES,
                labels: Vec::new(),
                value: bytes as f64,
            });
        }
    }
    metrics::global().render(&gauges, metrics::replica())
}
