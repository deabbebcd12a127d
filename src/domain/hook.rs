//! The nine hooks and the set of hooks a processor implements.

use std::fmt;

/// One of the nine processor hooks, at its point in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// Once per run, before the loop, on the run's input messages.
    ProcessInput,
    /// At every step, before the prompt is built; may override the step's model, tools, settings.
    ProcessInputStep,
    /// At every step, on the outgoing prompt only; nothing it changes is kept.
    ProcessLlmRequest,
    /// When the model rejects a call; only error processors get it.
    ProcessApiError,
    /// On every chunk streamed to the client.
    ProcessOutputStream,
    /// At every step, after the model's stream completed, with its chunks.
    ProcessLlmResponse,
    /// After every model step, before its tools run.
    ProcessOutputStep,
    /// After every tool call, before its result reaches the messages and the stream.
    ProcessToolResult,
    /// Once, after the run completed.
    ProcessOutputResult,
}

impl Hook {
    /// Every hook, in the order of a run (and of the enum: `ALL[hook.index()] == hook`).
    pub const ALL: [Hook; 9] = [
        Hook::ProcessInput,
        Hook::ProcessInputStep,
        Hook::ProcessLlmRequest,
        Hook::ProcessApiError,
        Hook::ProcessOutputStream,
        Hook::ProcessLlmResponse,
        Hook::ProcessOutputStep,
        Hook::ProcessToolResult,
        Hook::ProcessOutputResult,
    ];

    /// The hook's name in the processor contract (`processInput`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Hook::ProcessInput => "processInput",
            Hook::ProcessInputStep => "processInputStep",
            Hook::ProcessLlmRequest => "processLLMRequest",
            Hook::ProcessLlmResponse => "processLLMResponse",
            Hook::ProcessApiError => "processAPIError",
            Hook::ProcessOutputStream => "processOutputStream",
            Hook::ProcessOutputStep => "processOutputStep",
            Hook::ProcessToolResult => "processToolResult",
            Hook::ProcessOutputResult => "processOutputResult",
        }
    }

    /// The hook with this contract name (`processInput`, ...).
    pub fn from_name(name: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|hook| hook.name() == name)
    }

    /// The hook's position in [`Hook::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// The hooks a processor implements. The runtime calls only these, so a processor costs nothing
/// at the hooks it does not implement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HookSet(u16);

impl HookSet {
    /// No hook.
    pub const fn empty() -> HookSet {
        HookSet(0)
    }

    /// Every hook.
    pub fn all() -> HookSet {
        HookSet::of(&Hook::ALL)
    }

    /// Exactly these hooks.
    pub fn of(hooks: &[Hook]) -> HookSet {
        HookSet(hooks.iter().fold(0, |bits, hook| bits | hook.bit()))
    }

    /// The hooks of either set.
    pub fn union(self, other: HookSet) -> HookSet {
        HookSet(self.0 | other.0)
    }

    /// True when the set holds `hook`.
    pub fn contains(self, hook: Hook) -> bool {
        self.0 & hook.bit() != 0
    }

    /// The hooks of the set, in run order.
    pub fn iter(self) -> impl Iterator<Item = Hook> {
        Hook::ALL.into_iter().filter(move |hook| self.contains(*hook))
    }
}

/// A hook is stored by its name (`processInput`).
impl serde::Serialize for Hook {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Hook {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Hook, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Hook::from_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown hook `{name}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `index` is the position in `ALL`, and names round-trip.
    #[test]
    fn index_and_names_are_consistent() {
        for (position, hook) in Hook::ALL.into_iter().enumerate() {
            assert_eq!(hook.index(), position);
            assert_eq!(Hook::from_name(hook.name()), Some(hook));
        }
        let set = HookSet::of(&[Hook::ProcessInput, Hook::ProcessOutputResult]);
        assert_eq!(set.iter().collect::<Vec<_>>(), [Hook::ProcessInput, Hook::ProcessOutputResult]);
    }
}
