//! The [`RemotePool`]: every connected session by processor id, the processor ids the config
//! names, the tokens that may register them, and the choice of instance for each call.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::session::Session;
use crate::domain::{Hook, HookSet};

/// Why a processor may not connect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
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
    /// The processor ids a run cannot do without (some hook fails closed): a starting server is
    /// not ready until each has an instance.
    needed: Mutex<HashSet<String>>,
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
    /// How long a new session may take to say `Hello`.
    pub hello_timeout: Duration,
    /// Sessions that may be waiting to say `Hello` at once.
    pub max_pending_hellos: usize,
}

impl Default for PoolTiming {
    fn default() -> PoolTiming {
        PoolTiming {
            ping_interval: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(5),
            hello_timeout: Duration::from_secs(10),
            max_pending_hellos: 64,
        }
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
        let deadline = crate::domain::now_millis() + i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
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

    /// Checks a session's token before it says anything: when tokens are configured, only a
    /// known token may even begin a session.
    pub fn authenticate(&self, token: Option<&str>) -> Result<(), TokenError> {
        self.with_grant(token, |_| Ok(()))
    }

    /// Checks a session's token for a processor id.
    pub fn authorize(&self, token: Option<&str>, processor_id: &str) -> Result<(), TokenError> {
        self.with_grant(token, |allowed| match allowed.contains(processor_id) {
            true => Ok(()),
            false => Err(TokenError::NotAllowed(processor_id.to_owned())),
        })
    }

    /// `check` on the processor ids the token may register as; `Ok` without it when no tokens
    /// are configured, an error when the token is missing or unknown.
    fn with_grant(
        &self,
        token: Option<&str>,
        check: impl FnOnce(&HashSet<String>) -> Result<(), TokenError>,
    ) -> Result<(), TokenError> {
        let tokens = self.tokens.lock().expect("tokens lock");
        if tokens.is_empty() {
            return Ok(());
        }
        let token = token.ok_or(TokenError::MissingToken)?;
        match tokens.iter().find(|(known, _)| same_secret(known, token)) {
            Some((_, allowed)) => check(allowed),
            None => Err(TokenError::InvalidToken),
        }
    }

    /// Marks `processor_id` as one a run cannot do without (a hook of its fails closed).
    pub fn need(&self, processor_id: &str) {
        self.needed.lock().expect("needed lock").insert(processor_id.to_owned());
    }

    /// The processor ids runs cannot do without that have no instance connected, sorted.
    pub fn missing(&self) -> Vec<String> {
        let sessions = self.sessions.lock().expect("sessions lock");
        let mut missing: Vec<String> = self
            .needed
            .lock()
            .expect("needed lock")
            .iter()
            .filter(|id| sessions.get(*id).is_none_or(Vec::is_empty))
            .cloned()
            .collect();
        missing.sort();
        missing
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

    /// The hooks the connected instances of `processor_id` implement, observed ones included;
    /// `None` while none is connected.
    pub fn hooks_served(&self, processor_id: &str) -> Option<HookSet> {
        let sessions = self.sessions.lock().expect("sessions lock");
        let connected = sessions.get(processor_id).filter(|sessions| !sessions.is_empty())?;
        Some(connected.iter().fold(HookSet::empty(), |hooks, session| hooks.union(session.hooks)))
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
