//! A [`Session`]: one connected instance of a remote processor — the calls it has in flight and
//! the channel its calls go out on — and the [`RemotePool`] of all sessions by processor id.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::call::{RemoteCall, RemoteReply};
use super::tool_call::{ToolReply, ToolRequest, ToolSpec};
use crate::processor::{Hook, HookSet, StreamWindow};

/// What the server sends on a session's stream.
#[derive(Debug)]
pub enum SessionEvent {
    /// A hook call.
    Call(Box<RemoteCall>),
    /// A tool call.
    Tool(Box<ToolRequest>),
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
    /// How many calls it takes at once (0: no limit).
    pub max_concurrency: usize,
    /// The tools it executes.
    pub tools: Vec<ToolSpec>,
}

/// An instance's answer to a call or a tool call.
#[derive(Debug)]
pub enum Answer {
    /// To a hook call.
    Hook(RemoteReply),
    /// To a tool call.
    Tool(ToolReply),
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
            tools: spec.tools,
            permits: (spec.max_concurrency > 0).then(|| Arc::new(Semaphore::new(spec.max_concurrency))),
            max_concurrency: spec.max_concurrency,
            outbox,
            pending: Mutex::new(HashMap::new()),
            next_call_id: AtomicU64::new(1),
            in_flight: AtomicUsize::new(0),
            connected_at: crate::runtime::now_millis(),
            answered: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency_micros_total: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            unanswered_ping: AtomicU64::new(0),
            ended: CancellationToken::new(),
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
    pub async fn call(&self, call: RemoteCall) -> Result<RemoteReply, CallFailure> {
        let answer =
            self.request(|call_id| SessionEvent::Call(Box::new(RemoteCall { call_id, ..call }))).await;
        match answer {
            Ok(Answer::Hook(reply)) => {
                if matches!(reply.outcome, super::RemoteOutcome::Failure(_)) {
                    self.record_error();
                }
                Ok(reply)
            }
            Ok(Answer::Tool(_)) => Err(self.mismatched()),
            Err(failure) => Err(failure),
        }
    }

    /// Sends a tool call and waits for its answer, like [`Session::call`].
    pub async fn call_tool(&self, request: ToolRequest) -> Result<ToolReply, CallFailure> {
        let answer =
            self.request(|call_id| SessionEvent::Tool(Box::new(ToolRequest { call_id, ..request }))).await;
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
    pub fn observe(&self, mut call: RemoteCall) {
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
    fn drain(&self, deadline_unix_ms: i64) {
        let _ = self.outbox.try_send(SessionEvent::Drain(deadline_unix_ms));
    }

    /// True when every message queued for the instance went out on its stream.
    fn sent_all(&self) -> bool {
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

/// Why a processor may not connect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Tokens are required and none was given.
    #[error("a processor token is required (send `authorization: Bearer <token>`)")]
    MissingToken,
    /// The token is not one of the configured tokens.
    #[error("invalid processor token")]
    InvalidToken,
    /// The token may not register as this processor id.
    #[error("this token may not register as processor `{0}`")]
    NotAllowed(String),
}

/// Every connected session, by processor id, the processor ids the config names, and the
/// tokens that may register them.
#[derive(Default)]
pub struct RemotePool {
    sessions: Mutex<HashMap<String, Vec<Arc<Session>>>>,
    expected: Mutex<HashSet<String>>,
    /// Token → the processor ids it may register as.
    tokens: Mutex<Vec<(String, HashSet<String>)>>,
    /// Rotates the choice among equally loaded instances, so sequential runs spread too.
    rotation: AtomicUsize,
    /// Set once the server drains: no new calls, no new sessions.
    draining: AtomicBool,
    timing: Mutex<PoolTiming>,
}

/// How often sessions are checked, and how long a drain waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolTiming {
    /// The server pings every instance this often; one that has not answered the previous ping
    /// by the next is considered hung and dropped (its calls in flight fail over).
    pub ping_interval: Duration,
    /// On shutdown, how long calls in flight may take to be answered.
    pub drain_timeout: Duration,
}

impl Default for PoolTiming {
    fn default() -> PoolTiming {
        PoolTiming { ping_interval: Duration::from_secs(10), drain_timeout: Duration::from_secs(5) }
    }
}

impl std::fmt::Debug for RemotePool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens.
        formatter.debug_struct("RemotePool").field("expected", &self.expected).finish_non_exhaustive()
    }
}

/// Compares secrets in time independent of where they differ.
fn same_secret(left: &str, right: &str) -> bool {
    left.len() == right.len() && left.bytes().zip(right.bytes()).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
}

impl RemotePool {
    /// An empty pool.
    pub fn new() -> RemotePool {
        RemotePool::default()
    }

    /// Sets the ping interval and the drain timeout.
    pub fn set_timing(&self, timing: PoolTiming) {
        *self.timing.lock().expect("timing lock") = timing;
    }

    /// The ping interval and the drain timeout.
    pub fn timing(&self) -> PoolTiming {
        *self.timing.lock().expect("timing lock")
    }

    /// True once the server drains.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Stops sending new calls, tells every instance, waits for the calls in flight to be
    /// answered (up to the drain timeout), then ends every session. Calls not answered by then
    /// fail, and their runs apply their failure policy.
    pub async fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
        let timeout = self.timing().drain_timeout;
        let deadline = crate::runtime::now_millis() + i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        let sessions = self.all_sessions();
        for session in &sessions {
            session.drain(deadline);
        }
        // Calls in flight are answered, and the `Drain` messages go out before the streams end.
        let settled = async {
            while sessions.iter().any(|session| session.in_flight() > 0 || !session.sent_all()) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let _ = tokio::time::timeout(timeout, settled).await;
        for session in &sessions {
            self.unregister(session);
        }
    }

    /// Records that the config names this processor id: only such ids may connect.
    pub fn expect(&self, processor_id: &str) {
        self.expected.lock().expect("expected lock").insert(processor_id.to_owned());
    }

    /// Lets holders of `token` register as these processor ids. Once a token exists, every
    /// session needs one.
    pub fn allow_token(&self, token: String, processor_ids: impl IntoIterator<Item = String>) {
        self.tokens.lock().expect("tokens lock").push((token, processor_ids.into_iter().collect()));
    }

    /// Checks a session's token for a processor id.
    pub fn authorize(&self, token: Option<&str>, processor_id: &str) -> Result<(), AuthError> {
        let tokens = self.tokens.lock().expect("tokens lock");
        if tokens.is_empty() {
            return Ok(());
        }
        let token = token.ok_or(AuthError::MissingToken)?;
        let Some((_, allowed)) = tokens.iter().find(|(known, _)| same_secret(known, token)) else {
            return Err(AuthError::InvalidToken);
        };
        if allowed.contains(processor_id) {
            Ok(())
        } else {
            Err(AuthError::NotAllowed(processor_id.to_owned()))
        }
    }

    /// True when the config names this processor id.
    pub fn is_expected(&self, processor_id: &str) -> bool {
        self.expected.lock().expect("expected lock").contains(processor_id)
    }

    /// Adds a connected instance.
    pub fn register(&self, session: Arc<Session>) {
        self.sessions
            .lock()
            .expect("sessions lock")
            .entry(session.processor_id.clone())
            .or_default()
            .push(session);
    }

    /// Removes an instance that went away, failing its calls in flight.
    pub fn unregister(&self, session: &Arc<Session>) {
        if let Some(sessions) = self.sessions.lock().expect("sessions lock").get_mut(&session.processor_id) {
            sessions.retain(|other| !Arc::ptr_eq(other, session));
        }
        session.close();
    }

    /// Every connected instance, by processor id then connection time.
    pub fn all_sessions(&self) -> Vec<Arc<Session>> {
        let sessions = self.sessions.lock().expect("sessions lock");
        let mut all: Vec<Arc<Session>> = sessions.values().flatten().cloned().collect();
        all.sort_by(|a, b| (&a.processor_id, a.connected_at).cmp(&(&b.processor_id, b.connected_at)));
        all
    }

    /// The instances connected for a processor id.
    pub fn sessions(&self, processor_id: &str) -> Vec<Arc<Session>> {
        self.sessions.lock().expect("sessions lock").get(processor_id).cloned().unwrap_or_default()
    }

    /// The instance of `processor_id` implementing `hook` with the fewest calls in flight (ties
    /// taken in turn; instances below their `max_concurrency` first), skipping `excluded` (an
    /// instance that just failed). None while draining.
    pub fn pick(
        &self,
        processor_id: &str,
        hook: Hook,
        excluded: Option<&Arc<Session>>,
    ) -> Option<Arc<Session>> {
        self.pick_where(processor_id, excluded, |session| session.hooks.contains(hook))
    }

    /// Like [`RemotePool::pick`], for an instance executing tool `tool`.
    pub fn pick_tool(
        &self,
        processor_id: &str,
        tool: &str,
        excluded: Option<&Arc<Session>>,
    ) -> Option<Arc<Session>> {
        self.pick_where(processor_id, excluded, |session| session.tool(tool).is_some())
    }

    fn pick_where(
        &self,
        processor_id: &str,
        excluded: Option<&Arc<Session>>,
        serves: impl Fn(&Session) -> bool,
    ) -> Option<Arc<Session>> {
        if self.is_draining() {
            return None;
        }
        let candidates: Vec<Arc<Session>> = self
            .sessions(processor_id)
            .into_iter()
            .filter(|session| serves(session))
            .filter(|session| excluded.is_none_or(|excluded| !Arc::ptr_eq(session, excluded)))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let start = self.rotation.fetch_add(1, Ordering::Relaxed) % candidates.len();
        candidates
            .iter()
            .cycle()
            .skip(start)
            .take(candidates.len())
            .min_by_key(|session| (!session.has_capacity(), session.in_flight()))
            .cloned()
    }
}
