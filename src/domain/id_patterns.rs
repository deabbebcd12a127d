//! Which ids a grant covers: exact ids, `prefix*`, or `*` — the one matching rule of API keys'
//! `resources`, `agents` and `instructions`, and of a run listing scoped to a key's agents.

use serde::{Deserialize, Serialize};

/// Ids by pattern: `alice` (exactly), `tenant-a/*` (by prefix), `*` (all). No pattern: no id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdPatterns(Vec<String>);

impl IdPatterns {
    /// The patterns as written.
    pub fn new(patterns: Vec<String>) -> IdPatterns {
        IdPatterns(patterns)
    }

    /// Whether `id` is covered.
    pub fn allows(&self, id: &str) -> bool {
        self.0.iter().any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => id.starts_with(prefix),
            None => pattern == id,
        })
    }

    /// The exact ids and the prefixes (`*` is the empty prefix), for a store that filters itself.
    pub fn exact_and_prefixes(&self) -> (Vec<&str>, Vec<&str>) {
        let (prefixes, exact): (Vec<&String>, Vec<&String>) =
            self.0.iter().partition(|pattern| pattern.ends_with('*'));
        (
            exact.into_iter().map(String::as_str).collect(),
            prefixes.into_iter().map(|pattern| &pattern[..pattern.len() - 1]).collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Patterns match ids exactly, by `prefix*`, or all with `*`; none match nothing.
    #[test]
    fn patterns_match_exactly_by_prefix_or_all() {
        let patterns = IdPatterns::new(vec!["alice".into(), "tenant-a/*".into()]);
        assert!(patterns.allows("alice") && patterns.allows("tenant-a/u1"));
        assert!(
            !patterns.allows("alice2") && !patterns.allows("tenant-b/u1") && !patterns.allows("tenant-a")
        );
        assert!(IdPatterns::new(vec!["*".into()]).allows("anyone"));
        assert!(!IdPatterns::default().allows("anyone"));
        assert_eq!(patterns.exact_and_prefixes(), (vec!["alice"], vec!["tenant-a/"]));
    }
}
