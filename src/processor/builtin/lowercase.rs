//! `lowercase`: lowercases the text of the run's input messages (the seed's basic input
//! processor example), returning the transformed array.

use std::sync::Arc;

use serde::Deserialize;

use crate::domain::{Hook, HookSet};
use crate::processor::{BuildError, HookError, InputArgs, InputOutcome, Processor, parse_options};

pub(super) const KIND: &str = "lowercase";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {}

/// Lowercases input text.
#[derive(Debug, Clone)]
pub struct Lowercase {
    id: String,
}

impl Lowercase {
    /// A lowercasing processor.
    pub fn new(id: impl Into<String>) -> Lowercase {
        Lowercase { id: id.into() }
    }

    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let Options {} = parse_options(options)?;
        Ok(Arc::new(Lowercase::new(id)))
    }
}

#[async_trait::async_trait]
impl Processor for Lowercase {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput])
    }

    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        let mut messages = args.messages;
        super::rewrite_texts(super::own_input_mut(&mut messages, args.message_list), str::to_lowercase);
        Ok(InputOutcome::Messages(messages))
    }
}
