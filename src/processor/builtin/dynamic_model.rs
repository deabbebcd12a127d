//! `dynamic-model`: the seed's `DynamicModelProcessor`. Picks each step's model — by the run's
//! `request_context` (a client's tier, a tenant's contract), or by the step (a fast model first,
//! a stronger one after tool calls) — and can take the tools away after a number of steps to make
//! the model finish.

use std::sync::Arc;

use serde::Deserialize;

use crate::domain::{Hook, HookSet, StepResult, ToolChoice};
use crate::model::ModelError;
use crate::processor::{
    BuildError, HookError, InputStepArgs, Processor, ProcessorResources, StepOverrides, parse_options,
};

pub(super) const KIND: &str = "dynamic-model";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextRule {
    /// The `request_context` key.
    key: String,
    /// The value it must have.
    value: String,
    /// The model for every step of a matching run.
    model: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Rules on the run's `request_context`; the first that matches picks the model of every step.
    #[serde(default)]
    by_context: Vec<ContextRule>,
    /// The model of step 0, when no context rule matched.
    #[serde(default)]
    first_step: Option<String>,
    /// The model of a step that follows one with tool calls, when no context rule matched.
    #[serde(default)]
    after_tool_calls: Option<String>,
    /// From this step number on, no tools are offered (`tool_choice = none`).
    #[serde(default)]
    no_tools_after_step: Option<u32>,
}

/// Switches models per run and per step.
pub(super) struct DynamicModel {
    id: String,
    options: Options,
}

impl DynamicModel {
    pub(super) fn from_options(
        id: &str,
        options: toml::Table,
        resources: &ProcessorResources,
    ) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        let named = options
            .by_context
            .iter()
            .enumerate()
            .map(|(index, rule)| (format!("by_context[{index}].model"), &rule.model))
            .chain(options.first_step.iter().map(|model| ("first_step".to_owned(), model)))
            .chain(options.after_tool_calls.iter().map(|model| ("after_tool_calls".to_owned(), model)));
        for (field, model) in named {
            match resources.models.resolve(model, None) {
                Ok(_) | Err(ModelError::MissingScript) => {}
                Err(error) => return Err(BuildError::Options(format!("`{field}`: {error}"))),
            }
        }
        if options.by_context.is_empty()
            && options.first_step.is_none()
            && options.after_tool_calls.is_none()
            && options.no_tools_after_step.is_none()
        {
            return Err(BuildError::Options(
                "set at least one of `by_context`, `first_step`, `after_tool_calls`, `no_tools_after_step`"
                    .to_owned(),
            ));
        }
        Ok(Arc::new(DynamicModel { id: id.to_owned(), options }))
    }

    fn model_for(&self, args: &InputStepArgs<'_>) -> Option<String> {
        let context = &args.ctx.run.request_context;
        let by_context = self
            .options
            .by_context
            .iter()
            .find(|rule| context.get(&rule.key).is_some_and(|value| *value == rule.value));
        if let Some(rule) = by_context {
            return Some(rule.model.clone());
        }
        if args.step_number == 0 {
            return self.options.first_step.clone();
        }
        let after_tools = args.steps.last().is_some_and(|last: &StepResult| !last.tool_calls.is_empty());
        if after_tools { self.options.after_tool_calls.clone() } else { None }
    }
}

#[async_trait::async_trait]
impl Processor for DynamicModel {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInputStep])
    }

    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        let tools_off = self.options.no_tools_after_step.is_some_and(|limit| args.step_number >= limit);
        Ok(StepOverrides {
            model: self.model_for(&args),
            tool_choice: tools_off.then_some(ToolChoice::None),
            ..StepOverrides::default()
        })
    }
}
