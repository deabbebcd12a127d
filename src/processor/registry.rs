//! Building processors from config: each *kind* (`content-filter`, `lowercase`, ...) has a
//! factory that turns an id and a table of options into a processor. The built-in kinds register
//! themselves (`ProcessorRegistry::with_builtins`, in `builtin/mod.rs`).
//!
//! Embedders register their own kinds next to the built-ins, so their processors can be named in
//! `agentwire.toml` like any other. Kinds may borrow the runtime's [`ProcessorResources`]: its
//! models (the judges name any configured provider) and its store (`response-cache`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::{Processor, hook_check};
use crate::model::ModelRegistry;
use crate::storage::Store;

/// What the runtime lends the processors it builds.
#[derive(Debug, Clone, Default)]
pub struct ProcessorResources {
    /// The models, with the config's providers.
    pub models: ModelRegistry,
    /// The store, when the server has one.
    pub store: Option<Arc<dyn Store>>,
}

/// Why a processor could not be built from config. The config reports it at the definition's line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// No kind of this name is registered. The config is at fault.
    #[error("unknown processor kind `{kind}` (known kinds: {known})")]
    UnknownKind {
        /// The kind asked for.
        kind: String,
        /// The registered kinds, comma-separated.
        known: String,
    },
    /// The kind's options are wrong, or what it needs is missing; the message names the option.
    #[error("{0}")]
    Options(String),
    /// The processor implements hooks that its `hooks()` leaves out. The processor's code is at
    /// fault (see `hook_check`).
    #[error(
        "processor kind `{kind}` implements {hooks} but does not list it in `hooks()`, so the runtime would never call it"
    )]
    UnlistedHooks {
        /// The kind.
        kind: String,
        /// The hooks it implements and does not list, comma-separated.
        hooks: String,
    },
}

impl From<String> for BuildError {
    fn from(reason: String) -> BuildError {
        BuildError::Options(reason)
    }
}

/// Makes a processor of one kind from its id, its options and the runtime's resources. The error
/// names the bad option.
pub type ProcessorFactory = Arc<
    dyn Fn(&str, toml::Table, &ProcessorResources) -> Result<Arc<dyn Processor>, BuildError> + Send + Sync,
>;

/// Processor kinds by name.
#[derive(Clone, Default)]
pub struct ProcessorRegistry {
    factories: BTreeMap<String, ProcessorFactory>,
    resources: ProcessorResources,
}

impl fmt::Debug for ProcessorRegistry {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_list().entries(self.factories.keys()).finish()
    }
}

impl ProcessorRegistry {
    /// Adds a kind, replacing any kind of the same name.
    pub fn register(&mut self, kind: &str, factory: ProcessorFactory) {
        self.factories.insert(kind.to_owned(), factory);
    }

    /// Adds a kind from a function of its id and options.
    pub fn register_fn<F>(&mut self, kind: &str, factory: F)
    where
        F: Fn(&str, toml::Table) -> Result<Arc<dyn Processor>, BuildError> + Send + Sync + 'static,
    {
        self.register(kind, Arc::new(move |id: &str, options, _: &ProcessorResources| factory(id, options)));
    }

    /// Adds a kind whose processors use the runtime's models or store.
    pub fn register_with_resources<F>(&mut self, kind: &str, factory: F)
    where
        F: Fn(&str, toml::Table, &ProcessorResources) -> Result<Arc<dyn Processor>, BuildError>
            + Send
            + Sync
            + 'static,
    {
        self.register(kind, Arc::new(factory));
    }

    /// What factories are lent (by default the built-in models and no store; the runtime sets
    /// its own).
    pub fn set_resources(&mut self, resources: ProcessorResources) {
        self.resources = resources;
    }

    /// Builds a processor of `kind`. `Err` names the unknown kind or the bad option.
    pub fn build(
        &self,
        kind: &str,
        id: &str,
        options: toml::Table,
    ) -> Result<Arc<dyn Processor>, BuildError> {
        let Some(factory) = self.factories.get(kind) else {
            let known: Vec<&str> = self.kinds().collect();
            return Err(BuildError::UnknownKind { kind: kind.to_owned(), known: known.join(", ") });
        };
        let processor = factory(id, options, &self.resources)?;
        match hook_check::unlisted_hooks(processor.as_ref()).as_slice() {
            [] => Ok(processor),
            unlisted => {
                let names: Vec<&str> = unlisted.iter().map(|hook| hook.name()).collect();
                Err(BuildError::UnlistedHooks { kind: kind.to_owned(), hooks: names.join(", ") })
            }
        }
    }

    /// True when `kind` is registered.
    pub fn has_kind(&self, kind: &str) -> bool {
        self.factories.contains_key(kind)
    }

    /// The registered kinds, sorted.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }
}

/// Deserializes a kind's options, naming unknown or malformed keys in the error. For factories.
pub fn parse_options<T: serde::de::DeserializeOwned>(options: toml::Table) -> Result<T, BuildError> {
    toml::Value::Table(options)
        .try_into()
        .map_err(|error: toml::de::Error| BuildError::Options(error.message().to_owned()))
}
