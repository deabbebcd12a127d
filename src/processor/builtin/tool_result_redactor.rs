//! `tool-result-redactor`: the seed's `RedactToolResult`. Replaces the values of named fields,
//! at any depth of a tool's JSON result, before the model, the stream or memory see it — e.g.
//! `ssn` and `email` of a customer lookup. A result that is serialized JSON is redacted inside.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::{Hook, HookSet};
use crate::processor::{BuildError, HookError, Processor, ToolResultArgs, ToolResultOutcome, parse_options};

pub(super) const KIND: &str = "tool-result-redactor";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The field names whose values are replaced, wherever they occur in the result.
    fields: Vec<String>,
    /// Only these tools' results (default: every tool's).
    #[serde(default)]
    tools: Option<Vec<String>>,
    /// What a redacted value becomes.
    #[serde(default = "default_replacement")]
    replacement: String,
    /// Match field names ignoring ASCII case (default true: `SSN`, `ssn` and `Ssn` alike).
    #[serde(default = "super::yes")]
    ignore_case: bool,
}

fn default_replacement() -> String {
    "[REDACTED]".to_owned()
}

/// Redacts named fields of tool results.
#[derive(Debug)]
pub(super) struct ToolResultRedactor {
    id: String,
    fields: BTreeSet<String>,
    tools: Option<BTreeSet<String>>,
    replacement: Value,
    ignore_case: bool,
}

impl ToolResultRedactor {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let Options { fields, tools, replacement, ignore_case } = parse_options(options)?;
        if fields.is_empty() {
            return Err(BuildError::Options("`fields` must name at least one field".to_owned()));
        }
        let fold = |field: String| if ignore_case { field.to_ascii_lowercase() } else { field };
        Ok(Arc::new(ToolResultRedactor {
            id: id.to_owned(),
            fields: fields.into_iter().map(fold).collect(),
            tools: tools.map(|tools| tools.into_iter().collect()),
            replacement: json!(replacement),
            ignore_case,
        }))
    }

    fn is_redacted(&self, key: &str) -> bool {
        if self.ignore_case {
            self.fields.contains(&key.to_ascii_lowercase())
        } else {
            self.fields.contains(key)
        }
    }

    /// Replaces the named fields' values in `value`; the count of fields replaced.
    fn redact(&self, value: &mut Value) -> usize {
        match value {
            Value::Object(object) => object
                .iter_mut()
                .map(|(key, field)| {
                    if self.is_redacted(key) {
                        *field = self.replacement.clone();
                        1
                    } else {
                        self.redact(field)
                    }
                })
                .sum(),
            Value::Array(items) => items.iter_mut().map(|item| self.redact(item)).sum(),
            // A tool that answers with serialized JSON is redacted inside it.
            Value::String(text) if text.trim_start().starts_with(['{', '[']) => {
                let Ok(mut inner) = serde_json::from_str::<Value>(text) else { return 0 };
                let redacted = self.redact(&mut inner);
                if redacted > 0 {
                    *text = inner.to_string();
                }
                redacted
            }
            _ => 0,
        }
    }
}

#[async_trait::async_trait]
impl Processor for ToolResultRedactor {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessToolResult])
    }

    async fn process_tool_result(&self, args: ToolResultArgs<'_>) -> Result<ToolResultOutcome, HookError> {
        if self.tools.as_ref().is_some_and(|tools| !tools.contains(args.tool_name)) {
            return Ok(ToolResultOutcome::default());
        }
        let mut result = args.result;
        let redacted = self.redact(&mut result);
        Ok(ToolResultOutcome { result: (redacted > 0).then_some(result), ..ToolResultOutcome::default() })
    }
}
