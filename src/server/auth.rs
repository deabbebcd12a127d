//! Client authentication and tenancy: API keys from `[auth]`, each allowed some resources and
//! some agents. Every `AgentService` and `MemoryService` handler asks for the caller's
//! [`Access`] first, then checks each resource and agent it touches; a thread is checked by the
//! resource that owns it, never by the one the request claims.
//!
//! A key's rate limit is taken here too, once per call. Keys are kept as SHA-256 digests only. Without keys the server is open, and the command line
//! refuses to serve beyond loopback unless `allow_unauthenticated` says so.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use tonic::Request;

use super::limits::{Caller, LimitError, Rate};
use crate::config::{ApiKeyConfig, Config, ConfigError};
use crate::domain::{IdPatterns, ResourceAllowance, ResourceQuota};

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AuthError {
    /// No key, or not a known one.
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// The key went over a limit.
    #[error(transparent)]
    Limited(#[from] LimitError),
    /// The key is not an admin key, and the call is an operator's.
    #[error(
        "API key `{0}` may not see the server's operations: that takes an admin key ([[auth.keys]] admin = true)"
    )]
    NotAdmin(String),
    /// The key may not use this resource or agent.
    #[error("API key `{key}` may not use {what} `{id}`")]
    Forbidden {
        /// The key's name.
        key: String,
        /// `resource` or `agent`.
        what: &'static str,
        /// The resource or agent.
        id: String,
    },
}

/// What one key may use.
#[derive(Debug)]
pub(super) struct Grant {
    name: String,
    resources: IdPatterns,
    agents: IdPatterns,
    /// The agents whose instructions it may read.
    instructions: IdPatterns,
    /// May see the server's operations (`ListProcessors`).
    admin: bool,
    rate: Option<Rate>,
    /// Its own share of the run slots (`max_concurrent_runs`).
    runs_at_once: Option<usize>,
    /// What each resource it writes to may keep.
    quota: ResourceQuota,
    /// How many resources it may create.
    allowance: Option<ResourceAllowance>,
}

/// The keys the server accepts.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    by_digest: HashMap<[u8; 32], Arc<Grant>>,
    /// `[storage]`'s resource quota: an open server's, and a key's where it sets none.
    quota: ResourceQuota,
    /// `[storage] max_key_resources`: a key's where it sets none.
    max_key_resources: u64,
}

/// The file `keys_file` names.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    keys: Vec<ApiKeyConfig>,
}

impl Auth {
    /// The keys of `[auth]` (and of its `keys_file`); the error names the bad entry.
    pub fn from_config(config: &Config) -> Result<Auth, ConfigError> {
        let mut auth = Auth {
            quota: config.storage.resource_quota(),
            max_key_resources: config.storage.max_key_resources,
            ..Auth::default()
        };
        for (index, key) in config.auth.keys.iter().enumerate() {
            auth.add(key.get_ref()).map_err(|reason| {
                config.invalid_at(key.span().start, format!("auth.keys[{index}]: {reason}"))
            })?;
        }
        if let Some(file) = &config.auth.keys_file {
            let path = config.resolve(file);
            let source = std::fs::read_to_string(&path)
                .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
            let keys: KeysFile = toml::from_str(&source)
                .map_err(|error| ConfigError::Parse(format!("{}: {error}", path.display())))?;
            for (index, key) in keys.keys.iter().enumerate() {
                auth.add(key).map_err(|reason| {
                    ConfigError::Parse(format!("{}: keys[{index}]: {reason}", path.display()))
                })?;
            }
        }
        Ok(auth)
    }

    fn add(&mut self, key: &ApiKeyConfig) -> Result<(), String> {
        let digest = match (&key.key, &key.key_env, &key.key_sha256) {
            (Some(key), None, None) => digest_of(key),
            (None, Some(variable), None) => {
                let value =
                    std::env::var(variable).map_err(|_| format!("`{variable}` (key_env) is not set"))?;
                digest_of(&value)
            }
            (None, None, Some(hex)) => parse_digest(hex).ok_or("key_sha256 must be 64 hex digits")?,
            _ => return Err("give exactly one of `key`, `key_env`, `key_sha256`".to_owned()),
        };
        if key.resources.is_empty() {
            return Err("`resources` must name at least one resource (or `*`)".to_owned());
        }
        let rate = key.rate_per_second.map(|rate| Rate::new(rate, key.burst)).transpose()?;
        if rate.is_none() && key.burst.is_some() {
            return Err("`burst` needs a `rate_per_second`".to_owned());
        }
        let grant = Grant {
            name: key.name.clone(),
            resources: IdPatterns::new(key.resources.clone()),
            agents: IdPatterns::new(key.agents.clone()),
            instructions: IdPatterns::new(key.instructions.clone()),
            admin: key.admin,
            rate,
            runs_at_once: key.max_concurrent_runs,
            quota: key.resource_quota(self.quota),
            allowance: key.resource_allowance(self.max_key_resources),
        };
        if self.by_digest.insert(digest, Arc::new(grant)).is_some() {
            return Err(format!("key `{}` is the same key as another entry", key.name));
        }
        Ok(())
    }

    /// True when no keys are configured: every caller may use everything.
    pub fn is_open(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// The caller's access, from its `authorization: Bearer` or `x-api-key` metadata.
    pub(super) fn access<T>(&self, request: &Request<T>) -> Result<Access, AuthError> {
        if self.is_open() {
            return Ok(Access::Open(self.quota));
        }
        let metadata = request.metadata();
        let presented = match metadata.get("authorization") {
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|value| value.strip_prefix("Bearer "))
                .ok_or(AuthError::Unauthenticated("the authorization header must be `Bearer <key>`"))?,
            None => metadata
                .get("x-api-key")
                .and_then(|value| value.to_str().ok())
                .ok_or(AuthError::Unauthenticated("an API key is required (authorization: Bearer <key>)"))?,
        };
        let grant = self
            .by_digest
            .get(&digest_of(presented.trim()))
            .ok_or(AuthError::Unauthenticated("unknown API key"))?;
        if let Some(rate) = &grant.rate {
            rate.take(&grant.name)?;
        }
        Ok(Access::Key(Arc::clone(grant)))
    }
}

fn digest_of(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0; 32];
    for (index, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(digest)
}

/// What the caller of one request may use.
#[derive(Debug, Clone)]
pub(super) enum Access {
    /// No keys are configured; resources keep `[storage]`'s quota.
    Open(ResourceQuota),
    /// A key's grant.
    Key(Arc<Grant>),
}

impl Access {
    /// `Ok` when the caller may use resource `id`.
    pub(super) fn resource(&self, id: &str) -> Result<(), AuthError> {
        self.check("resource", id, |grant| &grant.resources)
    }

    /// `Ok` when the caller may call agent `id`.
    pub(super) fn agent(&self, id: &str) -> Result<(), AuthError> {
        self.check("agent", id, |grant| &grant.agents)
    }

    /// `Ok` when the caller may see the server's operations: an admin key, or anyone on an open
    /// server.
    pub(super) fn admin(&self) -> Result<(), AuthError> {
        match self {
            Access::Open(_) => Ok(()),
            Access::Key(grant) if grant.admin => Ok(()),
            Access::Key(grant) => Err(AuthError::NotAdmin(grant.name.clone())),
        }
    }

    /// The agents whose runs the caller may see: `None` for every agent (an operator: an admin
    /// key, or anyone on an open server), else its key's `agents`.
    pub(super) fn agent_scope(&self) -> Option<IdPatterns> {
        match self {
            Access::Key(grant) if !grant.admin => Some(grant.agents.clone()),
            _ => None,
        }
    }

    /// Who holds this call's run slot: its key, or without keys the connection from `peer`.
    pub(super) fn caller(&self, peer: Option<std::net::SocketAddr>) -> Caller {
        match self {
            Access::Key(grant) => Caller::Key { name: grant.name.clone(), share: grant.runs_at_once },
            Access::Open(_) => Caller::Connection(peer),
        }
    }

    /// The caller's key, by name (empty on an open server).
    pub(super) fn key_name(&self) -> &str {
        match self {
            Access::Open(_) => "",
            Access::Key(grant) => &grant.name,
        }
    }

    /// What each resource the caller writes to may keep.
    pub(super) fn quota(&self) -> ResourceQuota {
        match self {
            Access::Open(quota) => *quota,
            Access::Key(grant) => grant.quota,
        }
    }

    /// How many resources the caller may create: a key's allowance, if it has one.
    pub(super) fn allowance(&self) -> Option<&ResourceAllowance> {
        match self {
            Access::Open(_) => None,
            Access::Key(grant) => grant.allowance.as_ref(),
        }
    }

    /// True when the caller may see agent `id` (listing agents).
    pub(super) fn sees_agent(&self, id: &str) -> bool {
        self.agent(id).is_ok()
    }

    /// True when the caller may read the agent's instructions: only a key that is allowed to
    /// (`instructions`), never an open server's anonymous caller.
    pub(super) fn reads_instructions(&self, id: &str) -> bool {
        match self {
            Access::Open(_) => false,
            Access::Key(grant) => grant.instructions.allows(id),
        }
    }

    /// True when the caller may read how agent `id`'s processors are configured: an operator
    /// (admin key, open server) or a key that may read its instructions.
    pub(super) fn reads_configuration(&self, id: &str) -> bool {
        self.admin().is_ok() || self.reads_instructions(id)
    }

    fn check(
        &self,
        what: &'static str,
        id: &str,
        patterns: impl Fn(&Grant) -> &IdPatterns,
    ) -> Result<(), AuthError> {
        match self {
            Access::Open(_) => Ok(()),
            Access::Key(grant) if patterns(grant).allows(id) => Ok(()),
            Access::Key(grant) => {
                Err(AuthError::Forbidden { key: grant.name.clone(), what, id: id.to_owned() })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `key_sha256` digests parse from hex, and malformed ones are refused.
    #[test]
    fn digests_parse_from_hex() {
        let hex: String = digest_of("k").iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(parse_digest(&hex), Some(digest_of("k")));
        assert_eq!(parse_digest("abc"), None);
    }
}
