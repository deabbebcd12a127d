//! Who the console answers: a request whose `Host` is not one of the console's own names is
//! refused (a page on another site that rebinds its DNS name to this address sends its own name,
//! and learns nothing), and on a server without API keys the calls that change state — running
//! an agent, writing or deleting memory — are refused unless the operator opts in.

use axum::http::{HeaderMap, header};

use super::ConsoleError;
use crate::config::ConsoleConfig;

/// The names the console answers to, and whether it may change state without a key.
#[derive(Debug, Clone, Default)]
pub struct ConsoleAccess {
    /// `[console] hosts`, lower-cased, without a trailing dot.
    hosts: Vec<String>,
    /// True when the server has no API keys and `[console] allow_unauthenticated_writes` is off.
    writes_refused: bool,
}

impl ConsoleAccess {
    /// What `[console]` allows, on a server without API keys when `open`.
    pub fn from_config(console: &ConsoleConfig, open: bool) -> ConsoleAccess {
        ConsoleAccess::new(&console.hosts, open && !console.allow_unauthenticated_writes)
    }

    fn new(hosts: &[String], writes_refused: bool) -> ConsoleAccess {
        let hosts = hosts.iter().map(|host| normalised(host)).collect();
        ConsoleAccess { hosts, writes_refused }
    }

    /// `Ok` when the request's `Host` names this console: an IP address, `localhost`, or one of
    /// `[console] hosts` (any port).
    pub(super) fn check_host(&self, headers: &HeaderMap) -> Result<(), ConsoleError> {
        let host = headers.get(header::HOST).and_then(|value| value.to_str().ok()).unwrap_or_default();
        let name = normalised(without_port(host));
        let known =
            name.parse::<std::net::IpAddr>().is_ok() || name == "localhost" || self.hosts.contains(&name);
        if known { Ok(()) } else { Err(ConsoleError::UnknownHost(host.to_owned())) }
    }

    /// `Ok` unless `method` changes state and this console may not change state without a key.
    pub(super) fn check_write(&self, service: &str, method: &str) -> Result<(), ConsoleError> {
        if self.writes_refused && changes_state(method) {
            return Err(ConsoleError::WriteWithoutKey(format!("{service}/{method}")));
        }
        Ok(())
    }
}

/// Whether a method changes state (or spends a model's tokens): everything but reads, so a method
/// added later counts as a write until it is named a read.
fn changes_state(method: &str) -> bool {
    !["List", "Get", "Watch", "Search"].iter().any(|read| method.starts_with(read))
}

/// A host name as compared: lower case, no trailing dot, an IPv6 literal without its brackets.
fn normalised(host: &str) -> String {
    let host = host.trim().trim_end_matches('.');
    let host = host.strip_prefix('[').and_then(|inner| inner.strip_suffix(']')).unwrap_or(host);
    host.to_ascii_lowercase()
}

/// `host` without a `:port`.
fn without_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        return rest.split_once(']').map_or(host, |(inner, _)| &host[..inner.len() + 2]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|byte| byte.is_ascii_digit()) => name,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn host(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(value).unwrap());
        headers
    }

    /// IP addresses (v4 and bracketed v6, with or without a port), `localhost` and the configured
    /// names pass; any other name, and a request without `Host`, does not.
    #[test]
    fn only_addresses_localhost_and_configured_names_pass() {
        let access = ConsoleAccess::new(&["Console.Example.com.".to_owned()], false);
        for good in
            ["127.0.0.1:8080", "10.0.0.7", "[::1]:8080", "[::1]", "localhost:8080", "console.example.com"]
        {
            assert!(access.check_host(&host(good)).is_ok(), "{good}");
        }
        for bad in
            ["attacker.example", "attacker.example:8080", "localhost.attacker.example", "127.0.0.1.nip.io"]
        {
            assert!(access.check_host(&host(bad)).is_err(), "{bad}");
        }
        assert!(access.check_host(&HeaderMap::new()).is_err());
    }

    /// Reads are always allowed; writes only when the console may change state without a key.
    #[test]
    fn writes_without_a_key_are_refused_on_request() {
        let refusing = ConsoleAccess::new(&[], true);
        for read in ["ListRuns", "GetRun", "WatchRuns", "SearchMessages", "GetStats"] {
            assert!(refusing.check_write("agentwire.v1.X", read).is_ok(), "{read}");
        }
        for write in ["Generate", "Stream", "DeleteResource", "UpdateWorkingMemory", "CreateThread"] {
            assert!(refusing.check_write("agentwire.v1.X", write).is_err(), "{write}");
        }
        assert!(ConsoleAccess::new(&[], false).check_write("agentwire.v1.X", "DeleteResource").is_ok());
    }
}
