//! `pass-through`: takes part in the hooks it is given and changes nothing — what the runtime's
//! hook machinery costs on its own (`agentwire bench` measures with it), or a placeholder.

use std::sync::Arc;

use serde::Deserialize;

use crate::domain::{Hook, HookSet};
use crate::processor::{BuildError, Processor, parse_options};

pub(super) const KIND: &str = "pass-through";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Hook names; default all nine.
    #[serde(default)]
    hooks: Option<Vec<String>>,
}

/// Changes nothing, at the hooks it is given (the trait's defaults).
pub(super) struct PassThrough {
    id: String,
    hooks: HookSet,
}

impl PassThrough {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        let hooks = match options.hooks {
            None => Hook::ALL.to_vec(),
            Some(names) => names
                .iter()
                .enumerate()
                .map(|(index, name)| {
                    Hook::from_name(name).ok_or_else(|| format!("`hooks[{index}]`: unknown hook `{name}`"))
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Arc::new(PassThrough { id: id.to_owned(), hooks: HookSet::of(&hooks) }))
    }
}

#[async_trait::async_trait]
impl Processor for PassThrough {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        self.hooks
    }
}
