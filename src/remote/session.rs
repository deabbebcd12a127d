//! A [`Session`]: one connected instance of a remote processor — the calls it has in flight and
//! the channel its calls go out on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::hook_call::{HookCall, HookResult, Outcome};
use super::tool_call::{ToolInvocation, ToolOutput, ToolSpec};
use crate::domain::{HookSet, StreamWindow};

/// What the server sends on a session's stream.
#[derive(Debug)]
pub enum SessionEvent {
    /// A hook call.
    Call(Box<HookCall>),
    /// A tool call.
    Tool(Box<ToolInvocation>),
    /// A call whose answer is no longer wanted.
    Cancel(u64),
    /// A liveness check; the instance answers with a pong carrying the nonce.
    Ping(u64),
    /// The server is shutting down: no new calls; answers to calls in flight are due by then
    /// (milliseconds since the Unix epoch).
    Drain(i64),
}

/// What an instance said about itself when it connected.
#[derive(Debug, Clone, Default)]
pub struct SessionSpec {
    /// The processor id it serves.
    pub processor_id: String,
    /// Its instance id.
    pub instance_id: String,
    /// The hooks it implements.
    pub hooks: HookSet,
    /// The hooks it serves as an observer (sent, never awaited).
    pub observed: HookSet,
    /// How it takes processOutputStream chunks (`None`: one by one).
    pub window: Option<StreamWindow>,
    /// True when its processOutputStream also takes `data-*` chunks (v2).
    pub data_parts: bool,
    /// How many calls it takes at once (0: no limit).
    pub max_concurrency: usize,
    /// The tools it executes.
    pub tools: Vec<ToolSpec>,
}

/// An instance's answer to a call or a tool call.
#[derive(Debug)]
pub enum Answer {
    /// To a hook call.
    Hook(HookResult),
    /// To a tool call.
    Tool(ToolOutput),
}

/// Why a call got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    /// The instance went away before answering.
    Gone,
    /// The instance answered a call with an answer of the other kind.
    Mismatched,
}

/// One connected instance.
#[derive(Debug)]
pub struct Session {
    /// The processor id it serves.
    pub processor_id: String,
    /// Its instance id.
    pub instance_id: String,
    /// The hooks it implements.
    pub hooks: HookSet,
    /// The hooks it serves as an observer.
    pub observed: HookSet,
    /// How it takes processOutputStream chunks.
    pub window: Option<StreamWindow>,
    /// True when its processOutputStream also takes `data-*` chunks.
    pub data_parts: bool,
    /// The tools it executes.
    pub tools: Vec<ToolSpec>,
    /// Bounds the calls in flight to its `max_concurrency`.
    permits: Option<Arc<Semaphore>>,
    max_concurrency: usize,
    outbox: mpsc::Sender<SessionEvent>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    next_call_id: AtomicU64,
    in_flight: AtomicUsize,
    /// When it connected, in milliseconds since the Unix epoch.
    pub connected_at: i64,
    answered: AtomicU64,
    errors: AtomicU64,
    latency_micros_total: AtomicU64,
    /// Observe-mode calls dropped because the instance's queue was full.
    dropped: AtomicU64,
    /// The nonce of the ping not answered yet (0: none).
    unanswered_ping: AtomicU64,
    /// Cancelled when the session ends: its outgoing stream closes.
    ended: CancellationToken,
    /// Why the server ended it, when the instance broke the protocol (an undecodable frame).
    broken: Mutex<Option<String>>,
}

/// What an instance has done since it connected.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionStats {
    /// Calls sent and not yet answered.
    pub in_flight: usize,
    /// Calls answered.
    pub answered: u64,
    /// Calls that timed out, failed, or were never answered.
    pub errors: u64,
    /// Mean time from call to answer, in milliseconds.
    pub mean_latency_ms: f64,
    /// Observe-mode calls dropped on a full queue.
    pub dropped: u64,
}

impl Session {
    /// A session whose calls go out on `outbox`.
    pub fn new(spec: SessionSpec, outbox: mpsc::Sender<SessionEvent>) -> Session {
        Session {
            processor_id: spec.processor_id,
            instance_id: spec.instance_id,
            hooks: spec.hooks,
            observed: spec.observed,
            window: spec.window,
            data_parts: spec.data_parts,
            tools: spec.tools,
            permits: (spec.max_concurrency > 0).then(|| Arc::new(Semaphore::new(spec.max_concurrency))),
            max_concurrency: spec.max_concurrency,
            outbox,
            pending: Mutex::new(HashMap::new()),
            next_call_id: AtomicU64::new(1),
            in_flight: AtomicUsize::new(0),
            connected_at: crate::domain::now_millis(),
            answered: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency_micros_total: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            unanswered_ping: AtomicU64::new(0),
            ended: CancellationToken::new(),
            broken: Mutex::new(None),
        }
    }

    /// The tool of this name it executes.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// True when it has fewer calls in flight than its `max_concurrency` (or has no limit).
    pub fn has_capacity(&self) -> bool {
        self.max_concurrency == 0 || self.in_flight() < self.max_concurrency
    }

    /// Sends a hook call and waits for its answer. Dropping the future abandons the call (the
    /// instance is told to cancel it).
    pub async fn call(&self, call: HookCall) -> Result<HookResult, CallFailure> {
        let answer = self.request(|call_id| SessionEvent::Call(Box::new(HookCall { call_id, ..call }))).await;
        match answer {
            Ok(Answer::Hook(reply)) => {
                if matches!(reply.outcome, Outcome::Failure(_)) {
                    self.record_error();
                }
                Ok(reply)
            }
            Ok(Answer::Tool(_)) => Err(self.mismatched()),
            Err(failure) => Err(failure),
        }
    }

    /// Sends a tool call and waits for its answer, like [`Session::call`].
    pub async fn call_tool(&self, request: ToolInvocation) -> Result<ToolOutput, CallFailure> {
        let answer =
            self.request(|call_id| SessionEvent::Tool(Box::new(ToolInvocation { call_id, ..request }))).await;
        match answer {
            Ok(Answer::Tool(reply)) => {
                if reply.result.is_err() {
                    self.record_error();
                }
                Ok(reply)
            }
            Ok(Answer::Hook(_)) => Err(self.mismatched()),
            Err(failure) => Err(failure),
        }
    }

    /// An answer of the wrong kind for its call: the instance is broken.
    fn mismatched(&self) -> CallFailure {
        self.record_error();
        CallFailure::Mismatched
    }

    /// Sends the event made for a fresh call id and waits for the answer, keeping the count of
    /// calls in flight and the instance's statistics.
    async fn request(&self, event: impl FnOnce(u64) -> SessionEvent) -> Result<Answer, CallFailure> {
        let call_id = self.next_call_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.pending.lock().expect("pending lock").insert(call_id, answer);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let guard = InFlight { session: self, call_id, done: false };
        let started = std::time::Instant::now();
        // Beyond its max_concurrency a call waits here for one of its calls to end (the caller's
        // timeout covers the wait).
        let _permit = match &self.permits {
            Some(permits) => Some(permits.acquire().await.map_err(|_| CallFailure::Gone)?),
            None => None,
        };
        if self.outbox.send(event(call_id)).await.is_err() {
            self.record_error();
            return Err(CallFailure::Gone);
        }
        let outcome = answered.await.map_err(|_| CallFailure::Gone);
        guard.finish();
        match &outcome {
            Ok(_) => {
                let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                self.latency_micros_total.fetch_add(micros, Ordering::Relaxed);
                self.answered.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => self.record_error(),
        }
        outcome
    }

    /// Sends a call nobody waits for (observe mode); a full queue drops it, counted.
    pub fn observe(&self, mut call: HookCall) {
        call.call_id = self.next_call_id.fetch_add(1, Ordering::Relaxed);
        if self.outbox.try_send(SessionEvent::Call(Box::new(call))).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a call that timed out, failed, or went unanswered.
    pub fn record_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// What the instance has done so far.
    pub fn stats(&self) -> SessionStats {
        let answered = self.answered.load(Ordering::Relaxed);
        let total = self.latency_micros_total.load(Ordering::Relaxed);
        #[allow(clippy::cast_precision_loss)]
        let mean_latency_ms = if answered == 0 { 0.0 } else { total as f64 / answered as f64 / 1000.0 };
        SessionStats {
            in_flight: self.in_flight(),
            answered,
            errors: self.errors.load(Ordering::Relaxed),
            mean_latency_ms,
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }

    /// Hands an answer to its caller; false for an unknown or abandoned call.
    pub fn resolve(&self, call_id: u64, reply: Answer) -> bool {
        match self.pending.lock().expect("pending lock").remove(&call_id) {
            Some(answer) => answer.send(reply).is_ok(),
            None => false,
        }
    }

    /// Fails every call in flight and ends the outgoing stream: the instance is gone.
    pub fn close(&self) {
        self.pending.lock().expect("pending lock").clear();
        if let Some(permits) = &self.permits {
            permits.close();
        }
        self.ended.cancel();
    }

    /// Ends the session because the instance broke the protocol (`reason`: what it sent): its
    /// calls in flight fail naming it, and its stream ends with INVALID_ARGUMENT saying so.
    pub fn break_off(&self, reason: String) {
        *self.broken.lock().expect("broken lock") = Some(reason);
        self.close();
    }

    /// Why the session was broken off, if it was.
    pub fn broken(&self) -> Option<String> {
        self.broken.lock().expect("broken lock").clone()
    }

    /// Resolves when the session has ended.
    pub fn ended(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.ended.clone().cancelled_owned()
    }

    /// Sends a ping; false when the previous one is still unanswered (the instance is hung) or
    /// the stream is gone.
    pub fn ping(&self, nonce: u64) -> bool {
        if self.unanswered_ping.swap(nonce, Ordering::Relaxed) != 0 {
            return false;
        }
        // A full queue means calls are waiting anyway: the ping can wait for the next round.
        !matches!(self.outbox.try_send(SessionEvent::Ping(nonce)), Err(mpsc::error::TrySendError::Closed(_)))
    }

    /// Takes the instance's answer to a ping.
    pub fn pong(&self, nonce: u64) {
        let _ = self.unanswered_ping.compare_exchange(nonce, 0, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Tells the instance the server is draining.
    pub(super) fn drain(&self, deadline_unix_ms: i64) {
        let _ = self.outbox.try_send(SessionEvent::Drain(deadline_unix_ms));
    }

    /// True when every message queued for the instance went out on its stream.
    pub(super) fn sent_all(&self) -> bool {
        self.outbox.capacity() == self.outbox.max_capacity()
    }

    /// True once the instance went away.
    pub fn is_closed(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Calls sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// Keeps the in-flight count right, and cancels a call abandoned before its answer.
struct InFlight<'a> {
    session: &'a Session,
    call_id: u64,
    done: bool,
}

impl InFlight<'_> {
    fn finish(mut self) {
        self.done = true;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.session.in_flight.fetch_sub(1, Ordering::Relaxed);
        if !self.done && self.session.pending.lock().expect("pending lock").remove(&self.call_id).is_some() {
            let _ = self.session.outbox.try_send(SessionEvent::Cancel(self.call_id));
        }
    }
}
