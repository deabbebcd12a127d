//! A step's model call on the processor stream (protocol 2): [`StepInput`], [`ModelSettings`] and
//! tool definitions to and from protobuf, for `HookCall.step_input` and the step fields of
//! `Replacement`.

use serde_json::Value;

use super::pb;
use super::value::{from_struct, to_struct};
use crate::domain::{ModelSettings, StepInput, ToolChoice, ToolDefinition};

/// A tool choice as the wire spells it: `auto`, `none`, `required`, or a tool's name.
pub(super) fn tool_choice_to_pb(choice: &ToolChoice) -> String {
    match choice {
        ToolChoice::Auto => "auto".to_owned(),
        ToolChoice::None => "none".to_owned(),
        ToolChoice::Required => "required".to_owned(),
        ToolChoice::Tool(name) => name.clone(),
    }
}

/// The tool choice of a wire string (see [`tool_choice_to_pb`]).
pub(super) fn tool_choice_from_pb(choice: &str) -> ToolChoice {
    match choice {
        "auto" => ToolChoice::Auto,
        "none" => ToolChoice::None,
        "required" => ToolChoice::Required,
        tool => ToolChoice::Tool(tool.to_owned()),
    }
}

/// A JSON object as a `Struct`; anything else (which the domain never holds there) as none.
fn object_to_pb(value: &Value) -> Option<prost_types::Struct> {
    value.as_object().map(to_struct)
}

impl From<&StepInput> for pb::StepInput {
    fn from(step: &StepInput) -> pb::StepInput {
        pb::StepInput {
            model: step.model.clone(),
            tools: step.tools.iter().map(tool_to_pb).collect(),
            tool_choice: tool_choice_to_pb(&step.tool_choice),
            active_tools: step.active_tools.clone().map(|values| pb::StringList { values }),
            settings: Some(pb::ModelSettings::from(&step.settings)),
            provider_options: object_to_pb(&step.provider_options),
            structured_output: step.structured_output.as_ref().and_then(object_to_pb),
        }
    }
}

impl From<&ModelSettings> for pb::ModelSettings {
    fn from(settings: &ModelSettings) -> pb::ModelSettings {
        pb::ModelSettings {
            temperature: settings.temperature,
            max_tokens: settings.max_tokens,
            top_p: settings.top_p,
            stop: settings.stop.clone(),
            seed: settings.seed,
        }
    }
}

impl From<pb::ModelSettings> for ModelSettings {
    fn from(settings: pb::ModelSettings) -> ModelSettings {
        ModelSettings {
            temperature: settings.temperature,
            max_tokens: settings.max_tokens,
            top_p: settings.top_p,
            stop: settings.stop,
            seed: settings.seed,
        }
    }
}

fn tool_to_pb(tool: &ToolDefinition) -> pb::ToolSpec {
    pb::ToolSpec {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters: object_to_pb(&tool.parameters),
    }
}

/// Tool definitions a processor gave; each must be named. The error names the field.
pub(super) fn tools_from_pb(list: pb::ToolSpecList, field: &str) -> Result<Vec<ToolDefinition>, String> {
    list.tools
        .into_iter()
        .enumerate()
        .map(|(index, spec)| {
            if spec.name.is_empty() {
                return Err(format!("{field}[{index}].name is required"));
            }
            let parameters = spec.parameters.map_or_else(
                || serde_json::json!({ "type": "object" }),
                |fields| Value::Object(from_struct(fields)),
            );
            Ok(ToolDefinition { name: spec.name, description: spec.description, parameters })
        })
        .collect()
}
