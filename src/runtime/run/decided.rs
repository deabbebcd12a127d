//! What a hook's answer changed, for the run's record: a replacement names what it replaced, a
//! dropped chunk says so, an answer that changes nothing is `continue`.

use crate::domain::{Chunk, HookDecision, Message};
use crate::processor::{ApiErrorOutcome, InputOutcome, LlmRequestOutcome, StepOverrides, ToolResultOutcome};

/// A hook's answer, read for the record.
pub(super) trait Decided {
    /// The decision it stands for, when it is more than `continue`.
    fn decision(&self) -> Option<HookDecision>;
}

/// `Replaced` naming the parts that are set, or `None` when none is (asked for every stream
/// chunk: the names are written straight into the one string).
fn replaced(parts: &[(&str, bool)]) -> Option<HookDecision> {
    let mut what = String::new();
    for (name, _) in parts.iter().filter(|(_, set)| *set) {
        if !what.is_empty() {
            what.push_str(", ");
        }
        what.push_str(name);
    }
    (!what.is_empty()).then_some(HookDecision::Replaced { what })
}

impl Decided for InputOutcome {
    fn decision(&self) -> Option<HookDecision> {
        match self {
            InputOutcome::Unchanged => None,
            InputOutcome::Messages(_) => replaced(&[("messages", true)]),
            InputOutcome::MessagesAndSystem { .. } => {
                replaced(&[("messages", true), ("system messages", true)])
            }
        }
    }
}

impl Decided for StepOverrides {
    fn decision(&self) -> Option<HookDecision> {
        replaced(&[
            ("model", self.model.is_some()),
            ("tools", self.tools.is_some()),
            ("tool_choice", self.tool_choice.is_some()),
            ("active_tools", self.active_tools.is_some()),
            ("messages", self.messages.is_some()),
            ("system_messages", self.system_messages.is_some()),
            ("model_settings", self.model_settings.is_some()),
        ])
    }
}

impl Decided for LlmRequestOutcome {
    fn decision(&self) -> Option<HookDecision> {
        replaced(&[("prompt", self.prompt.is_some()), ("answer", self.response.is_some())])
    }
}

impl Decided for ToolResultOutcome {
    fn decision(&self) -> Option<HookDecision> {
        replaced(&[("result", self.result.is_some()), ("messages", self.messages.is_some())])
    }
}

/// `processOutputStep` and `processOutputResult`: `Some` replaces the messages.
impl Decided for Option<Vec<Message>> {
    fn decision(&self) -> Option<HookDecision> {
        replaced(&[("messages", self.is_some())])
    }
}

/// A retry request is the abort's business; an error processor's answer changes nothing else.
impl Decided for ApiErrorOutcome {
    fn decision(&self) -> Option<HookDecision> {
        None
    }
}

/// `processLLMResponse` answers nothing.
impl Decided for () {
    fn decision(&self) -> Option<HookDecision> {
        None
    }
}

/// A window's answer and the chunks released at a stream's end: what goes on in their place.
impl Decided for Vec<Chunk> {
    fn decision(&self) -> Option<HookDecision> {
        None
    }
}

/// `processOutputStream`'s answer against the chunk it was given.
pub(super) fn stream_decision(given: Option<&Chunk>, answer: &Option<Chunk>) -> Option<HookDecision> {
    match answer {
        None => Some(HookDecision::Dropped),
        Some(chunk) => replaced(&[("chunk", given.is_some_and(|given| given != chunk))]),
    }
}
