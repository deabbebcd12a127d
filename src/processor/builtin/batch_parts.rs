//! `batch-parts`: coalesces the answer's text deltas into larger chunks — up to `max_chunks`
//! deltas, or whatever arrived within `max_delay_ms` — so clients and the processors after it
//! handle fewer, larger chunks. Order is kept; other chunks pass as they are.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::domain::{Chunk, Hook, HookSet, RunInfo, StreamWindow};
use crate::processor::{BuildError, HookError, OutputWindowArgs, Processor, parse_options};

pub(super) const KIND: &str = "batch-parts";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default = "default_max_chunks")]
    max_chunks: usize,
    #[serde(default = "default_max_delay_ms")]
    max_delay_ms: u64,
}

fn default_max_chunks() -> usize {
    8
}

fn default_max_delay_ms() -> u64 {
    50
}

/// Coalesces text deltas.
pub(super) struct BatchParts {
    id: String,
    window: StreamWindow,
}

impl BatchParts {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        if !(1..=StreamWindow::MAX_CHUNKS).contains(&options.max_chunks) {
            return Err(format!("`max_chunks` must be between 1 and {}", StreamWindow::MAX_CHUNKS).into());
        }
        let delay = (options.max_delay_ms > 0).then(|| Duration::from_millis(options.max_delay_ms));
        Ok(Arc::new(BatchParts { id: id.to_owned(), window: StreamWindow::new(options.max_chunks, delay) }))
    }
}

#[async_trait::async_trait]
impl Processor for BatchParts {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessOutputStream])
    }

    fn stream_window(&self, _run: &RunInfo) -> Option<StreamWindow> {
        Some(self.window)
    }

    async fn process_output_window(&self, args: OutputWindowArgs<'_>) -> Result<Vec<Chunk>, HookError> {
        let mut out: Vec<Chunk> = Vec::with_capacity(args.parts.len());
        for chunk in args.parts {
            match (out.last_mut(), chunk) {
                (Some(Chunk::TextDelta { id, text }), Chunk::TextDelta { id: next_id, text: next })
                    if *id == next_id =>
                {
                    text.push_str(&next);
                }
                (_, chunk) => out.push(chunk),
            }
        }
        Ok(out)
    }
}
