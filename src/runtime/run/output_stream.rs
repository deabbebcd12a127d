//! The way out: every chunk goes through the output processors' `processOutputStream`, in order,
//! to the client. A processor takes chunks one by one, or in windows ([`StreamWindow`]); a
//! holding window keeps its chunks — and so everything behind it — until it closes, which keeps
//! the order the client sees. Windows close when full, when their delay runs out (the model loop
//! waits on [`Run::next_window_deadline`]), and when the model's stream of a step ends. Windows
//! carry content only: lifecycle chunks (`start`, `step-start`, `step-finish`, `finish`) reach a
//! windowed processor's successors right after its window, unsent.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::time::Instant;

use super::decided::{Decided, stream_decision};
use super::windows::{Answered, Flying, OpenWindow, WINDOWS_IN_FLIGHT};
use super::{
    ByProcessor, MAX_DATA_CHUNKS_PER_EMIT, Run, RunStop, StepAnswer, guarded, guarded_deciding,
    guarded_since, stop,
};
use crate::domain::{Chunk, DataChunk, ErrorSource, Hook, Part, RunFailure};
use crate::processor::{
    OutputStreamArgs, OutputStreamEndArgs, OutputWindowArgs, OutputWindowSendArgs, Processor, WindowAnswered,
};

/// Whether chunks going out close the windows they pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Closing {
    /// Windows close only when full (the model's chunks, and what comes with them).
    WhenFull,
    /// Every window closes after taking the chunks: nothing stays held.
    All,
}

/// Emptied chunk lists kept for the next chunk: most chunks pass the chain one by one, and
/// each stage would otherwise allocate a list for what comes out of it.
#[derive(Debug, Default)]
pub(super) struct ChunkBuffers {
    spare: Vec<Vec<Chunk>>,
}

impl ChunkBuffers {
    /// Buffers kept at most; a bigger list (a window's) is let go rather than kept.
    const KEPT: usize = 4;
    const KEPT_CAPACITY: usize = 64;

    /// An empty list.
    fn take(&mut self) -> Vec<Chunk> {
        self.spare.pop().unwrap_or_default()
    }

    /// A list holding `chunk`.
    fn one(&mut self, chunk: Chunk) -> Vec<Chunk> {
        let mut chunks = self.take();
        chunks.push(chunk);
        chunks
    }

    /// Keeps `chunks`, emptied, for later.
    fn give_back(&mut self, mut chunks: Vec<Chunk>) {
        if self.spare.len() < ChunkBuffers::KEPT && chunks.capacity() <= ChunkBuffers::KEPT_CAPACITY {
            chunks.clear();
            self.spare.push(chunks);
        }
    }
}

impl Run {
    /// Sends a chunk through the stream processors to the client, closing every window, then
    /// the custom chunks those processors emitted.
    pub(super) async fn emit(&mut self, chunk: Chunk) -> Result<(), RunStop> {
        let out = self.stream_one(chunk, Closing::All).await?;
        self.deliver_all(out).await?;
        self.flush_emitted(Closing::All).await
    }

    /// Sends a step's opening chunk: it may wait in a window for the step's text.
    pub(super) async fn emit_step_start(&mut self, chunk: Chunk) -> Result<(), RunStop> {
        let out = self.stream_one(chunk, Closing::WhenFull).await?;
        self.deliver_all(out).await?;
        self.flush_emitted(Closing::WhenFull).await
    }

    /// Sends one chunk of the model's answer through the stream processors to the client, and
    /// adds what comes out to the step's answer.
    pub(super) async fn stream_model_chunk(
        &mut self,
        chunk: Chunk,
        answer: &mut StepAnswer,
    ) -> Result<(), RunStop> {
        let out = self.stream_one(chunk, Closing::WhenFull).await?;
        self.deliver_answer(out, answer).await?;
        self.flush_emitted(Closing::WhenFull).await
    }

    /// The model's stream of a step ended: each stream processor, in order, closes its window
    /// and releases what it held back, so the step's answer is whole.
    pub(super) async fn close_windows(&mut self, answer: &mut StepAnswer) -> Result<(), RunStop> {
        let chains = Arc::clone(&self.chains);
        for (stage, processor) in chains.of(Hook::ProcessOutputStream).iter().enumerate() {
            let mut released = self.close_window(stage, processor.as_ref()).await?;
            released.extend(self.stream_end(processor.as_ref()).await?);
            let out = self.stream_from(stage + 1, released, Closing::WhenFull).await?;
            self.deliver_answer(out, answer).await?;
        }
        self.flush_emitted(Closing::All).await
    }

    /// What one processor still holds at the end of a step's stream.
    async fn stream_end(&mut self, processor: &dyn Processor) -> Result<Vec<Chunk>, RunStop> {
        let seen = seen_by(&mut self.stream_parts, processor.id());
        let args = OutputStreamEndArgs {
            ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
            stream_parts: seen,
            message_list: &self.list,
        };
        guarded(
            &self.recorder,
            processor.id(),
            Hook::ProcessOutputStream,
            processor.process_output_stream_end(args),
        )
        .await
        .map_err(|error| stop(processor, Hook::ProcessOutputStream, error))
    }

    /// Sends on the windows whose delay has run out, in chain order.
    pub(super) async fn close_due_windows(&mut self, answer: &mut StepAnswer) -> Result<(), RunStop> {
        while let Some(stage) = self.windows.first_due(Instant::now()) {
            let processor = Arc::clone(&self.chains.of(Hook::ProcessOutputStream)[stage]);
            let closed = self.send_window(stage, processor.as_ref()).await?;
            self.release(stage, closed, answer).await?;
        }
        Ok(())
    }

    /// A window sent ahead by the processor at `stage` has its answer: releases what the
    /// windows answered so far let through.
    pub(super) async fn release_answered(
        &mut self,
        stage: usize,
        answer: &mut StepAnswer,
    ) -> Result<(), RunStop> {
        let processor = Arc::clone(&self.chains.of(Hook::ProcessOutputStream)[stage]);
        let answered = self.settle(stage, processor.as_ref(), Settle::Answered).await?;
        self.release(stage, answered, answer).await
    }

    /// Sends what the processor at `stage` let through on down the chain, to the client.
    async fn release(
        &mut self,
        stage: usize,
        chunks: Vec<Chunk>,
        answer: &mut StepAnswer,
    ) -> Result<(), RunStop> {
        let out = self.stream_from(stage + 1, chunks, Closing::WhenFull).await?;
        self.deliver_answer(out, answer).await?;
        self.flush_emitted(Closing::WhenFull).await
    }

    /// When the next window's delay runs out, if any window is open with one.
    pub(super) fn next_window_deadline(&self) -> Option<Instant> {
        self.windows.next_deadline()
    }

    /// True while a window sent ahead waits for its answer.
    pub(super) fn windows_in_flight(&self) -> bool {
        self.windows.any_flying()
    }

    async fn deliver_answer(&mut self, mut out: Vec<Chunk>, answer: &mut StepAnswer) -> Result<(), RunStop> {
        for chunk in out.drain(..) {
            answer.absorb(&chunk);
            self.deliver(chunk).await?;
        }
        self.buffers.give_back(out);
        Ok(())
    }

    async fn deliver_all(&mut self, mut out: Vec<Chunk>) -> Result<(), RunStop> {
        for chunk in out.drain(..) {
            self.deliver(chunk).await?;
        }
        self.buffers.give_back(out);
        Ok(())
    }

    /// Streams the custom chunks the last hook emitted, through the stream processors.
    pub(super) async fn flush_emitted(&mut self, closing: Closing) -> Result<(), RunStop> {
        let mut queue: VecDeque<DataChunk> = std::mem::take(&mut self.processors.emitted).into();
        let mut budget = MAX_DATA_CHUNKS_PER_EMIT;
        while let Some(data) = queue.pop_front() {
            if budget == 0 {
                return Err(RunStop::Failed(RunFailure {
                    message: format!(
                        "processors emitted more than {MAX_DATA_CHUNKS_PER_EMIT} custom chunks in answer to one chunk"
                    ),
                    source: ErrorSource::Runtime,
                    origin: String::new(),
                }));
            }
            budget -= 1;
            let out = self.stream_one(Chunk::Data(data), closing).await?;
            self.deliver_all(out).await?;
            queue.extend(std::mem::take(&mut self.processors.emitted));
        }
        Ok(())
    }

    /// Hands a processed chunk to the client, keeping custom chunks for the result and the
    /// non-transient ones, from any hook, as parts of the answer (the step's assistant message,
    /// or the response's last one after the loop).
    async fn deliver(&mut self, chunk: Chunk) -> Result<(), RunStop> {
        if let Chunk::Data(data) = &chunk {
            self.data.push(data.clone());
            if !data.transient {
                self.pending_data_parts.push(Part::Data {
                    name: data.name.clone(),
                    data: data.data.clone(),
                    id: data.id.clone(),
                });
            }
        }
        self.recorder.delivered(&chunk);
        self.sink.send(chunk).await.map_err(|_| RunStop::Cancelled)
    }

    /// One chunk through the whole chain ([`Run::stream_from`] the first processor).
    async fn stream_one(&mut self, chunk: Chunk, closing: Closing) -> Result<Vec<Chunk>, RunStop> {
        let chunks = self.buffers.one(chunk);
        self.stream_from(0, chunks, closing).await
    }

    /// `processOutputStream` over the stream processors from position `first` on; returns what
    /// comes out of the last one. A processor that drops a chunk ends the chain for it; `data-*`
    /// chunks reach only processors that opt in (and pass a window, closing it, to keep order).
    async fn stream_from(
        &mut self,
        first: usize,
        mut chunks: Vec<Chunk>,
        closing: Closing,
    ) -> Result<Vec<Chunk>, RunStop> {
        let chains = Arc::clone(&self.chains);
        for (stage, processor) in chains.of(Hook::ProcessOutputStream).iter().enumerate().skip(first) {
            if chunks.is_empty() && !self.windows.holds(stage) {
                continue;
            }
            let mut out = self.buffers.take();
            for chunk in chunks.drain(..) {
                if chunk.is_data() && !processor.process_data_parts(&self.info) {
                    out.extend(self.close_window(stage, processor.as_ref()).await?);
                    out.push(chunk);
                } else if chunk.is_content() && self.window_for(stage, processor.as_ref()) {
                    out.extend(self.add_to_window(stage, processor.as_ref(), chunk).await?);
                } else if !chunk.is_content()
                    && (self.windows.holds(stage) || processor.stream_window(&self.info).is_some())
                {
                    // Lifecycle chunks pass a windowed processor, after its windows.
                    out.extend(self.close_window(stage, processor.as_ref()).await?);
                    out.push(chunk);
                } else {
                    if self.windows.holds(stage) {
                        // Its windows stopped (its instance went away): what they hold goes first.
                        out.extend(self.close_window(stage, processor.as_ref()).await?);
                    }
                    out.extend(self.process_one(processor.as_ref(), chunk).await?);
                }
            }
            if closing == Closing::All {
                out.extend(self.close_window(stage, processor.as_ref()).await?);
            }
            let passed = std::mem::replace(&mut chunks, out);
            self.buffers.give_back(passed);
        }
        Ok(chunks)
    }

    /// One chunk through one processor.
    async fn process_one(
        &mut self,
        processor: &dyn Processor,
        chunk: Chunk,
    ) -> Result<Option<Chunk>, RunStop> {
        let seen = seen_by(&mut self.stream_parts, processor.id());
        seen.push(chunk.clone());
        let seen: &[Chunk] = seen;
        let args = OutputStreamArgs {
            ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
            part: chunk,
            stream_parts: seen,
            message_list: &self.list,
        };
        let given = seen.last();
        guarded_deciding(
            &self.recorder,
            processor.id(),
            Hook::ProcessOutputStream,
            processor.process_output_stream(args),
            |answer| stream_decision(given, answer),
        )
        .await
        .map_err(|error| stop(processor, Hook::ProcessOutputStream, error))
    }

    /// True when a window of the processor at `stage` is open for the next content chunk:
    /// one already is, or the processor takes windows and one opens.
    fn window_for(&mut self, stage: usize, processor: &dyn Processor) -> bool {
        if self.windows.is_open(stage) {
            return true;
        }
        let Some(window) = processor.stream_window(&self.info) else {
            return false;
        };
        let closes_at = window.max_delay.map(|delay| Instant::now() + delay);
        *self.windows.slot(stage) = Some(OpenWindow { window, parts: Vec::new(), closes_at });
        true
    }

    /// Adds a chunk to the open window at `stage`; returns what passes on now (the chunk itself
    /// for an observed window, what the windows answered when it is full, else nothing).
    async fn add_to_window(
        &mut self,
        stage: usize,
        processor: &dyn Processor,
        chunk: Chunk,
    ) -> Result<Vec<Chunk>, RunStop> {
        seen_by(&mut self.stream_parts, processor.id()).push(chunk.clone());
        let open = self.windows.slot(stage).as_mut().expect("the window is open");
        let mut out = Vec::new();
        if !open.window.hold {
            out.push(chunk.clone());
        }
        open.parts.push(chunk);
        if open.parts.len() >= open.window.max_chunks {
            out.extend(self.send_window(stage, processor).await?);
        }
        Ok(out)
    }

    /// Closes the window at `stage` (if open) and sends it ahead when the processor can, so
    /// the run reads on while it is answered; returns what the windows answered so far let
    /// through. Otherwise the window is answered now, after those in flight.
    async fn send_window(&mut self, stage: usize, processor: &dyn Processor) -> Result<Vec<Chunk>, RunStop> {
        let (mut out, sent) = self.send_ahead(stage, processor).await?;
        if sent {
            out.extend(self.settle(stage, processor, Settle::Answered).await?);
        } else {
            out.extend(self.settle(stage, processor, Settle::All).await?);
            out.extend(self.answer_open(stage, processor).await?);
        }
        Ok(out)
    }

    /// Sends the open window at `stage` ahead if it holds its chunks back and the processor sends
    /// windows ahead; true when it went (it is then in flight; otherwise it is still open). With
    /// [`WINDOWS_IN_FLIGHT`] in flight already, the oldest is answered first: what it let
    /// through comes back.
    async fn send_ahead(
        &mut self,
        stage: usize,
        processor: &dyn Processor,
    ) -> Result<(Vec<Chunk>, bool), RunStop> {
        let mut out = Vec::new();
        let holding = self.windows.open(stage).is_some_and(|open| open.window.hold && !open.parts.is_empty());
        if !holding || !self.windows.sends_ahead(stage) {
            return Ok((out, false));
        }
        if self.windows.flying(stage) >= WINDOWS_IN_FLIGHT {
            out.extend(self.settle(stage, processor, Settle::Oldest).await?);
        }
        let open = self.windows.slot(stage).take().expect("the window is open");
        let seen = seen_by(&mut self.stream_parts, processor.id()).len();
        let ctx = self.processors.context(&self.info, &self.recorder.note, processor.id());
        let sent_with = ctx.state.clone();
        let Some(in_flight) = processor.send_output_window(OutputWindowSendArgs { ctx, parts: &open.parts })
        else {
            *self.windows.slot(stage) = Some(open);
            return Ok((out, false));
        };
        let mut flying = Flying::new(open.parts, seen, sent_with, in_flight);
        flying.nudge().await;
        self.windows.push_flying(stage, flying);
        // The task that writes the call out was just woken on this thread, behind the run: with
        // a model whose chunks are all ready, the run would otherwise read on for a while first.
        tokio::task::yield_now().await;
        Ok((out, true))
    }

    /// Closes the window at `stage`, if one is open, and waits for the answers of all its
    /// windows, in order: the processor's answers replace held windows' chunks; an observed
    /// window's answer is ignored (its chunks already went on). A window sent ahead goes before
    /// the wait, so its round trip overlaps those of the windows in flight before it.
    async fn close_window(&mut self, stage: usize, processor: &dyn Processor) -> Result<Vec<Chunk>, RunStop> {
        let (mut out, _) = self.send_ahead(stage, processor).await?;
        out.extend(self.settle(stage, processor, Settle::All).await?);
        out.extend(self.answer_open(stage, processor).await?);
        Ok(out)
    }

    /// Closes the open window at `stage`, if any, and waits for its answer.
    async fn answer_open(&mut self, stage: usize, processor: &dyn Processor) -> Result<Vec<Chunk>, RunStop> {
        let Some(open) = self.windows.slot(stage).take().filter(|open| !open.parts.is_empty()) else {
            return Ok(Vec::new());
        };
        let seen = seen_by(&mut self.stream_parts, processor.id()).len();
        let answer = self.answer_window(processor, open.parts, seen, None, std::time::Instant::now()).await?;
        Ok(if open.window.hold { answer } else { Vec::new() })
    }

    /// Takes the answers of the windows in flight at `stage`, oldest first, as `how` says.
    async fn settle(
        &mut self,
        stage: usize,
        processor: &dyn Processor,
        how: Settle,
    ) -> Result<Vec<Chunk>, RunStop> {
        let mut out = Vec::new();
        while let Some(oldest) = self.windows.oldest(stage) {
            let state = self.processors.state_of(processor.id());
            if state.is_some_and(|state| state != oldest.sent_with()) {
                // An earlier answer changed the state it was sent with: its call is abandoned
                // (the instance is told to cancel it) and it is answered again with the new one.
                let stale = self.windows.take_oldest(stage).expect("the oldest window in flight");
                self.windows.stop_ahead(stage);
                let (parts, seen) = stale.abandon();
                out.extend(
                    self.answer_window(processor, parts, seen, None, std::time::Instant::now()).await?,
                );
            } else {
                if how == Settle::Answered {
                    if !oldest.nudge().await {
                        break;
                    }
                } else {
                    oldest.answered().await;
                }
                let flying = self.windows.take_oldest(stage).expect("the oldest window in flight");
                let answered = flying.into_answered().expect("the window's answer came");
                let Answered { parts, seen, sent_at, answer } = answered;
                out.extend(self.answer_window(processor, parts, seen, Some(answer), sent_at).await?);
            }
            if how == Settle::Oldest {
                break;
            }
        }
        Ok(out)
    }

    /// `processOutputWindow` on a closed window of `parts`, the processor having seen `seen`
    /// chunks then; `answered` is its answer when it was sent ahead at `started`.
    async fn answer_window(
        &mut self,
        processor: &dyn Processor,
        parts: Vec<Chunk>,
        seen: usize,
        answered: Option<std::thread::Result<WindowAnswered>>,
        started: std::time::Instant,
    ) -> Result<Vec<Chunk>, RunStop> {
        let (answered, panicked) = match answered {
            Some(Ok(answered)) => (Some(answered), None),
            Some(Err(panic)) => (None, Some(panic)),
            None => (None, None),
        };
        let seen = &seen_by(&mut self.stream_parts, processor.id())[..seen];
        let args = OutputWindowArgs {
            ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
            parts,
            stream_parts: seen,
            message_list: &self.list,
            answered,
        };
        let hook_call = async move {
            if let Some(panic) = panicked {
                std::panic::resume_unwind(panic);
            }
            processor.process_output_window(args).await
        };
        guarded_since(
            &self.recorder,
            processor.id(),
            Hook::ProcessOutputStream,
            started,
            hook_call,
            Vec::decision,
        )
        .await
        .map_err(|error| stop(processor, Hook::ProcessOutputStream, error))
    }
}

/// How many answers of the windows in flight [`Run::settle`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// Those that came, up to the first still awaited.
    Answered,
    /// The oldest, waiting for it.
    Oldest,
    /// All, waiting for each.
    All,
}

/// The chunks `processor_id` has seen; the id is allocated once per processor per run.
fn seen_by<'a>(stream_parts: &'a mut ByProcessor<Vec<Chunk>>, processor_id: &str) -> &'a mut Vec<Chunk> {
    if !stream_parts.contains_key(processor_id) {
        stream_parts.insert(processor_id.to_owned(), Vec::new());
    }
    stream_parts.get_mut(processor_id).expect("inserted above")
}
