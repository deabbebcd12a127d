//! Remote-processor frames ⇄ domain: `HookCall` from a [`HookCall`], a [`HookResult`] from a
//! `HookResult`. A malformed result becomes a failure of that processor, never a panic.

use super::convert::{chunk_to_pb, message_from_pb};
use super::pb;
use super::step_convert::{tool_choice_from_pb, tools_from_pb};
use super::value::{from_proto, from_struct, to_proto, to_struct};
use crate::domain::{
    Chunk, DATA_PREFIX, DataChunk, Hook, Message, MessageSource, PromptMessage, ToolCall, ToolResult, Warning,
};
use crate::processor::Abort;
use crate::remote::{HookCall, HookResult, Outcome, Replacement, ToolInvocation, ToolOutput};
use crate::runtime::RunError;

impl From<Hook> for pb::Hook {
    fn from(hook: Hook) -> pb::Hook {
        match hook {
            Hook::ProcessInput => pb::Hook::ProcessInput,
            Hook::ProcessInputStep => pb::Hook::ProcessInputStep,
            Hook::ProcessLlmRequest => pb::Hook::ProcessLlmRequest,
            Hook::ProcessApiError => pb::Hook::ProcessApiError,
            Hook::ProcessOutputStream => pb::Hook::ProcessOutputStream,
            Hook::ProcessLlmResponse => pb::Hook::ProcessLlmResponse,
            Hook::ProcessOutputStep => pb::Hook::ProcessOutputStep,
            Hook::ProcessToolResult => pb::Hook::ProcessToolResult,
            Hook::ProcessOutputResult => pb::Hook::ProcessOutputResult,
        }
    }
}

/// The domain hook of a wire hook; `None` for `HOOK_UNSPECIFIED`.
pub(super) fn hook_from_pb(hook: pb::Hook) -> Option<Hook> {
    Hook::ALL.into_iter().find(|candidate| pb::Hook::from(*candidate) == hook)
}

/// A prompt message on the wire (a `Message` without ids).
pub(super) fn prompt_to_pb(message: &PromptMessage) -> pb::Message {
    pb::Message {
        role: message.role.as_str().to_owned(),
        parts: message.parts.iter().cloned().map(pb::Part::from).collect(),
        ..Default::default()
    }
}

impl From<HookCall> for pb::HookCall {
    fn from(call: HookCall) -> pb::HookCall {
        let run_id = call.run.run_id.clone();
        let args = call.args;
        let (error_status, error_message) = args.error.unwrap_or_default();
        pb::HookCall {
            call_id: call.call_id,
            run_id: call.run.run_id,
            agent_id: call.run.agent_id,
            thread_id: call.run.thread_id,
            resource_id: call.run.resource_id,
            hook: pb::Hook::from(call.hook).into(),
            step: call.step,
            deadline_unix_ms: call.deadline_unix_ms,
            retry_count: call.retry_count,
            state: Some(to_struct(&call.state)),
            request_context: call.run.request_context.into_iter().collect(),
            trace_context: call.trace_context,
            messages: args.messages.into_iter().map(pb::Message::from).collect(),
            system_messages: args.system_messages,
            part: args.part.map(|part| chunk_to_pb(&run_id, part)),
            model: args.model,
            text: args.text,
            finish_reason: args.finish_reason.map(|reason| reason.as_str().to_owned()).unwrap_or_default(),
            usage: args.usage.map(pb::Usage::from),
            tool_calls: args.tool_calls.into_iter().map(pb::ToolCallPart::from).collect(),
            tool_call: args.tool_call.map(pb::ToolCallPart::from),
            tool_result: args.tool_result.map(pb::ToolResultPart::from),
            error_status,
            error_message,
            prompt: args.prompt.iter().map(prompt_to_pb).collect(),
            chunks: args.chunks.into_iter().map(|chunk| chunk_to_pb(&run_id, chunk)).collect(),
            tools: args.tools,
            message_sources: args
                .message_sources
                .into_iter()
                .map(|source| pb::MessageSource::from(source).into())
                .collect(),
            tagged_system_messages: args
                .tagged_system_messages
                .into_iter()
                .map(|(tag, text)| pb::TaggedSystemMessage { tag, text })
                .collect(),
            steps: args.steps.into_iter().map(pb::StepResult::from).collect(),
            step_input: args.step_input.as_ref().map(pb::StepInput::from),
        }
    }
}

impl From<MessageSource> for pb::MessageSource {
    fn from(source: MessageSource) -> pb::MessageSource {
        match source {
            MessageSource::Memory => pb::MessageSource::Memory,
            MessageSource::Input => pb::MessageSource::Input,
            MessageSource::Response => pb::MessageSource::Response,
            MessageSource::Signal => pb::MessageSource::Signal,
        }
    }
}

impl From<ToolInvocation> for pb::ToolInvocation {
    fn from(request: ToolInvocation) -> pb::ToolInvocation {
        pb::ToolInvocation {
            call_id: request.call_id,
            run_id: request.run_id,
            agent_id: request.agent_id,
            tool_call_id: request.tool_call_id,
            tool_name: request.tool_name,
            args: Some(to_proto(&request.args)),
            deadline_unix_ms: request.deadline_unix_ms,
            trace_context: request.trace_context,
        }
    }
}

impl From<pb::ToolOutput> for ToolOutput {
    fn from(output: pb::ToolOutput) -> ToolOutput {
        let result = if output.error.is_empty() {
            Ok(output.result.map(from_proto).unwrap_or_default())
        } else {
            Err(output.error)
        };
        ToolOutput { result }
    }
}

/// A chunk a processor put in its result: only content chunks may be produced by processors.
fn chunk_from_pb(chunk: pb::Chunk, field: &str) -> Result<Chunk, String> {
    use pb::chunk::Payload;
    let chunk = match chunk.payload {
        Some(Payload::TextDelta(delta)) => Chunk::TextDelta { id: delta.id, text: delta.text },
        Some(Payload::ReasoningDelta(delta)) => Chunk::ReasoningDelta { id: delta.id, text: delta.text },
        Some(Payload::ToolCall(call)) => Chunk::ToolCall(ToolCall {
            tool_call_id: call.tool_call_id,
            tool_name: call.tool_name,
            args: call.args.map(from_proto).unwrap_or_default(),
        }),
        Some(Payload::ToolResult(result)) => Chunk::ToolResult(ToolResult {
            tool_call_id: result.tool_call_id,
            tool_name: result.tool_name,
            result: result.result.map(from_proto).unwrap_or_default(),
            is_error: result.is_error,
        }),
        Some(Payload::Data(data)) if chunk.r#type.starts_with(DATA_PREFIX) => Chunk::Data(DataChunk {
            name: chunk.r#type,
            data: data.data.map(from_proto).unwrap_or_default(),
            id: (!data.id.is_empty()).then_some(data.id),
            transient: data.transient,
        }),
        _ => {
            return Err(format!(
                "{field}: a processor may produce text, reasoning, tool and data-* chunks only"
            ));
        }
    };
    Ok(chunk)
}

fn messages_from_pb(list: pb::MessageList, field: &str) -> Result<Vec<Message>, String> {
    list.messages
        .into_iter()
        .enumerate()
        .map(|(index, message)| message_from_pb(message, &format!("{field}[{index}]")))
        .collect::<Result<_, RunError>>()
        .map_err(|error| error.to_string())
}

fn replacement_from_pb(replacement: pb::Replacement) -> Result<Replacement, String> {
    let prompt = match replacement.prompt {
        Some(prompt) => Some(
            messages_from_pb(prompt, "replace.prompt")?
                .into_iter()
                .map(|message| PromptMessage { role: message.role, parts: message.parts })
                .collect(),
        ),
        None => None,
    };
    Ok(Replacement {
        messages: replacement.messages.map(|list| messages_from_pb(list, "replace.messages")).transpose()?,
        system_messages: replacement.system_messages.map(|list| list.values),
        part: replacement.part.map(|part| chunk_from_pb(part, "replace.part")).transpose()?,
        tool_result: replacement.tool_result.map(from_proto),
        model: replacement.model,
        tool_choice: replacement.tool_choice.as_deref().map(tool_choice_from_pb),
        active_tools: replacement.active_tools.map(|list| list.values),
        prompt,
        parts: replacement
            .parts
            .map(|list| {
                list.chunks
                    .into_iter()
                    .enumerate()
                    .map(|(index, chunk)| chunk_from_pb(chunk, &format!("replace.parts[{index}]")))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?,
        add_tagged_system_messages: replacement
            .add_tagged_system_messages
            .into_iter()
            .enumerate()
            .map(|(index, tagged)| match tagged.tag.is_empty() {
                true => Err(format!("replace.add_tagged_system_messages[{index}].tag is required")),
                false => Ok((tagged.tag, tagged.text)),
            })
            .collect::<Result<_, _>>()?,
        clear_system_tags: replacement.clear_system_tags,
        response: replacement
            .response
            .map(|list| {
                list.chunks
                    .into_iter()
                    .enumerate()
                    .map(|(index, chunk)| chunk_from_pb(chunk, &format!("replace.response[{index}]")))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?,
        tools: replacement.tools.map(|list| tools_from_pb(list, "replace.tools")).transpose()?,
        model_settings: replacement.model_settings.map(Into::into),
        provider_options: replacement
            .provider_options
            .map(|fields| serde_json::Value::Object(from_struct(fields))),
        structured_output: replacement
            .structured_output
            .map(|fields| serde_json::Value::Object(from_struct(fields))),
    })
}

impl From<pb::HookResult> for HookResult {
    fn from(result: pb::HookResult) -> HookResult {
        use pb::hook_result::Outcome as Wire;
        let emitted: Result<Vec<DataChunk>, String> = result
            .emit
            .into_iter()
            .enumerate()
            .map(|(index, chunk)| match chunk_from_pb(chunk, &format!("emit[{index}]"))? {
                Chunk::Data(data) => Ok(data),
                _ => Err(format!("emit[{index}]: only data-* chunks may be emitted")),
            })
            .collect();
        let warnings: Result<Vec<Warning>, String> = result
            .warnings
            .into_iter()
            .enumerate()
            .map(|(index, warning)| warning_from_pb(warning, index))
            .collect();
        let valid = emitted.as_ref().map(|_| ()).and(warnings.as_ref().map(|_| ()));
        let outcome = match (result.outcome, &valid) {
            (_, Err(reason)) => Outcome::Failure(format!("malformed result: {reason}")),
            (None, _) => Outcome::Failure("malformed result: it sets no outcome".to_owned()),
            (Some(Wire::Continue(_)), _) => Outcome::Continue,
            (Some(Wire::Drop(_)), _) => Outcome::Drop,
            (Some(Wire::RetryApiCall(retry)), _) => match retry.messages {
                None => Outcome::RetryApiCall(None),
                Some(list) => match messages_from_pb(list, "retry_api_call.messages") {
                    Ok(messages) => Outcome::RetryApiCall(Some(messages)),
                    Err(reason) => Outcome::Failure(format!("malformed result: {reason}")),
                },
            },
            (Some(Wire::Failure(failure)), _) => Outcome::Failure(failure.message),
            (Some(Wire::Abort(abort)), _) => Outcome::Abort(Abort {
                reason: abort.reason,
                retry: abort.retry,
                metadata: abort.metadata.map(from_proto).unwrap_or_default(),
            }),
            (Some(Wire::Replace(replacement)), _) => match replacement_from_pb(replacement) {
                Ok(replacement) => Outcome::Replace(Box::new(replacement)),
                Err(reason) => Outcome::Failure(format!("malformed result: {reason}")),
            },
        };
        HookResult {
            state: result.state.map(from_struct),
            outcome,
            emitted: emitted.unwrap_or_default(),
            warnings: warnings.unwrap_or_default(),
        }
    }
}

/// Longest warning kind, in bytes.
const MAX_WARNING_KIND: usize = 64;

/// Longest warning message, in bytes.
const MAX_WARNING_MESSAGE: usize = 4096;

/// The warning at `index` of a result, its kind a `data-` chunk name's rest.
fn warning_from_pb(warning: pb::Warning, index: usize) -> Result<Warning, String> {
    let kind = &warning.kind;
    let well_formed =
        kind.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-');
    if kind.is_empty() || kind.len() > MAX_WARNING_KIND || !well_formed {
        return Err(format!(
            "warnings[{index}].kind must be 1 to {MAX_WARNING_KIND} lowercase letters, digits or dashes"
        ));
    }
    if warning.message.len() > MAX_WARNING_MESSAGE {
        return Err(format!("warnings[{index}].message is longer than {MAX_WARNING_MESSAGE} bytes"));
    }
    Ok(Warning {
        kind: warning.kind,
        message: warning.message,
        details: warning.details.map(from_proto).unwrap_or_default(),
    })
}
