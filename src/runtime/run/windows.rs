//! The stream processors' windows in a run, by position in the stream chain: the window each has
//! open, and the windows it sent ahead ([`Processor::send_output_window`]) whose answers are
//! awaited in the order they were sent. Up to [`WINDOWS_IN_FLIGHT`] are in flight at once per
//! processor; a processor whose answer changed the state a later window was sent with sends no
//! more ahead in the run.
//!
//! [`Processor::send_output_window`]: crate::processor::Processor::send_output_window

use std::collections::VecDeque;
use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};

use serde_json::{Map, Value};
use sync_wrapper::SyncWrapper;
use tokio::time::Instant;

use crate::domain::{Chunk, StreamWindow};
use crate::processor::{WindowAnswered, WindowInFlight};

/// Windows of one processor sent and not yet answered, at most: enough to cover a round trip
/// to a remote instance while the model streams, few enough not to flood it.
pub(super) const WINDOWS_IN_FLIGHT: usize = 4;

/// A stream processor's open window.
#[derive(Debug)]
pub(super) struct OpenWindow {
    pub(super) window: StreamWindow,
    pub(super) parts: Vec<Chunk>,
    pub(super) closes_at: Option<Instant>,
}

/// A window sent ahead, waiting for its turn.
#[derive(Debug)]
pub(super) struct Flying {
    parts: Vec<Chunk>,
    /// How many chunks the processor had seen when it was sent (its last among them).
    seen: usize,
    /// The processor's state it was sent with.
    sent_with: Map<String, Value>,
    sent_at: std::time::Instant,
    /// Reached only through `&mut`, so a run stays `Sync` while its answer is not.
    answer: SyncWrapper<Answer>,
}

/// A window answered ahead: its chunks, how many the processor had seen then, when it was sent,
/// and the answer.
pub(super) struct Answered {
    pub(super) parts: Vec<Chunk>,
    pub(super) seen: usize,
    pub(super) sent_at: std::time::Instant,
    pub(super) answer: std::thread::Result<WindowAnswered>,
}

/// A flying window's answer.
enum Answer {
    Waiting(WindowInFlight),
    Came(std::thread::Result<WindowAnswered>),
}

impl fmt::Debug for Answer {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Answer::Waiting(_) => "Waiting",
            Answer::Came(_) => "Came",
        })
    }
}

impl Flying {
    /// A window of `parts` on its way.
    pub(super) fn new(
        parts: Vec<Chunk>,
        seen: usize,
        sent_with: Map<String, Value>,
        answer: WindowInFlight,
    ) -> Flying {
        Flying {
            parts,
            seen,
            sent_with,
            sent_at: std::time::Instant::now(),
            answer: SyncWrapper::new(Answer::Waiting(answer)),
        }
    }

    /// Polls the answer once; true when it has come.
    fn poll_answer(&mut self, cx: &mut Context<'_>) -> bool {
        let state = self.answer.get_mut();
        if let Answer::Waiting(waiting) = state
            && let Poll::Ready(answer) = Pin::new(waiting).poll(cx)
        {
            *state = Answer::Came(answer);
        }
        matches!(state, Answer::Came(_))
    }

    /// Moves the window on (a call goes out when first polled); true when its answer has come.
    pub(super) async fn nudge(&mut self) -> bool {
        poll_fn(|cx| Poll::Ready(self.poll_answer(cx))).await
    }

    /// Waits for the answer.
    pub(super) async fn answered(&mut self) {
        poll_fn(|cx| if self.poll_answer(cx) { Poll::Ready(()) } else { Poll::Pending }).await;
    }

    /// The state it was sent with.
    pub(super) fn sent_with(&self) -> &Map<String, Value> {
        &self.sent_with
    }

    /// The window and its answer, once it has come (`None` before).
    pub(super) fn into_answered(self) -> Option<Answered> {
        match self.answer.into_inner() {
            Answer::Came(answer) => {
                Some(Answered { parts: self.parts, seen: self.seen, sent_at: self.sent_at, answer })
            }
            Answer::Waiting(_) => None,
        }
    }

    /// Gives its answer up — a call still awaited is abandoned, and the instance told to cancel
    /// it — for its chunks and how many the processor had seen then.
    pub(super) fn abandon(self) -> (Vec<Chunk>, usize) {
        drop(self.answer);
        (self.parts, self.seen)
    }
}

/// One stream processor's windows.
#[derive(Debug, Default)]
struct StageWindows {
    open: Option<OpenWindow>,
    flying: VecDeque<Flying>,
    /// Set once an answer changed the state a later window was sent with.
    no_more_ahead: bool,
}

/// The windows of every stream processor, by position in the stream chain.
#[derive(Debug, Default)]
pub(super) struct Windows {
    stages: Vec<StageWindows>,
}

impl Windows {
    fn stage(&mut self, stage: usize) -> &mut StageWindows {
        if self.stages.len() <= stage {
            self.stages.resize_with(stage + 1, StageWindows::default);
        }
        &mut self.stages[stage]
    }

    /// The processor's open window, if any, to fill or to open.
    pub(super) fn slot(&mut self, stage: usize) -> &mut Option<OpenWindow> {
        &mut self.stage(stage).open
    }

    /// The processor's open window, if any.
    pub(super) fn open(&self, stage: usize) -> Option<&OpenWindow> {
        self.stages.get(stage)?.open.as_ref()
    }

    /// True while the processor at `stage` has an open window.
    pub(super) fn is_open(&self, stage: usize) -> bool {
        self.stages.get(stage).is_some_and(|windows| windows.open.is_some())
    }

    /// True while the processor at `stage` holds chunks back: an open window, or windows in flight.
    pub(super) fn holds(&self, stage: usize) -> bool {
        self.stages.get(stage).is_some_and(|windows| windows.open.is_some() || !windows.flying.is_empty())
    }

    /// The first stage whose window's delay has run out by `now`.
    pub(super) fn first_due(&self, now: Instant) -> Option<usize> {
        self.stages.iter().position(|windows| {
            windows.open.as_ref().and_then(|open| open.closes_at).is_some_and(|closes_at| closes_at <= now)
        })
    }

    /// When the next window's delay runs out, if any window is open with one.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.stages.iter().filter_map(|windows| windows.open.as_ref()?.closes_at).min()
    }

    /// True while some window is in flight.
    pub(super) fn any_flying(&self) -> bool {
        self.stages.iter().any(|windows| !windows.flying.is_empty())
    }

    /// How many windows the processor at `stage` has in flight.
    pub(super) fn flying(&self, stage: usize) -> usize {
        self.stages.get(stage).map_or(0, |windows| windows.flying.len())
    }

    /// True unless the processor at `stage` stopped sending windows ahead in this run.
    pub(super) fn sends_ahead(&self, stage: usize) -> bool {
        self.stages.get(stage).is_none_or(|windows| !windows.no_more_ahead)
    }

    /// The processor at `stage` sends no more windows ahead in this run.
    pub(super) fn stop_ahead(&mut self, stage: usize) {
        self.stage(stage).no_more_ahead = true;
    }

    /// Adds a window sent ahead, behind the others of its processor.
    pub(super) fn push_flying(&mut self, stage: usize, flying: Flying) {
        self.stage(stage).flying.push_back(flying);
    }

    /// The oldest window in flight of the processor at `stage`.
    pub(super) fn oldest(&mut self, stage: usize) -> Option<&mut Flying> {
        self.stages.get_mut(stage)?.flying.front_mut()
    }

    /// Takes the oldest window in flight of the processor at `stage`.
    pub(super) fn take_oldest(&mut self, stage: usize) -> Option<Flying> {
        self.stages.get_mut(stage)?.flying.pop_front()
    }

    /// Resolves with the first stage whose oldest window in flight has its answer. Only the
    /// oldest are polled: a later answer waits for them anyway, and each window was polled once
    /// as it was sent, which sent its call.
    pub(super) async fn answered(&mut self) -> usize {
        poll_fn(|cx| {
            for (stage, windows) in self.stages.iter_mut().enumerate() {
                if windows.flying.front_mut().is_some_and(|oldest| oldest.poll_answer(cx)) {
                    return Poll::Ready(stage);
                }
            }
            Poll::Pending
        })
        .await
    }
}
