//! Windows of `processOutputStream` chunks. A processor that would rather see chunks in batches
//! than one by one — a remote stream guard, a moderation judge — returns a [`StreamWindow`] from
//! `Processor::stream_window`; the runtime then collects chunks until the window closes (at
//! `max_chunks`, after `max_delay`, or when the model's stream of the step ends) and hands them
//! over in one `process_output_window` call. Chunks after the processor wait for the window, so
//! the client always receives them in order.

use std::time::Duration;

/// How a processor takes `processOutputStream` chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamWindow {
    /// The window closes when it holds this many chunks (at least 1).
    pub max_chunks: usize,
    /// The window closes this long after its first chunk arrived (`None`: only when full or when
    /// the step's stream ends).
    pub max_delay: Option<Duration>,
    /// True: chunks wait for the window's answer, which replaces them. False: chunks flow on at
    /// once and the processor sees copies (an observer); its answer is ignored.
    pub hold: bool,
}

impl StreamWindow {
    /// The largest window a processor may ask for.
    pub const MAX_CHUNKS: usize = 4096;

    /// A holding window of `max_chunks` chunks (clamped to 1..=[`Self::MAX_CHUNKS`]).
    pub fn new(max_chunks: usize, max_delay: Option<Duration>) -> StreamWindow {
        StreamWindow { max_chunks: max_chunks.clamp(1, StreamWindow::MAX_CHUNKS), max_delay, hold: true }
    }

    /// The same window, observed rather than held.
    pub fn observed(self) -> StreamWindow {
        StreamWindow { hold: false, ..self }
    }
}
