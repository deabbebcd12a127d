//! Protobuf ⇄ domain. Incoming messages are checked here, and every error names its field.

use super::pb;
use super::value::{from_proto, from_struct, to_proto, to_struct};
use crate::domain::{
    Chunk, DataChunk, MAX_ID_BYTES, Message, Part, ResourceQuota, Role, RunFailure, StepResult, ToolCall,
    ToolResult, TraceContext, Tripwire, Usage, now_millis,
};
use crate::runtime::{Agent, RunError, RunRequest, RunResult};

impl TryFrom<pb::RunRequest> for RunRequest {
    type Error = RunError;

    fn try_from(request: pb::RunRequest) -> Result<RunRequest, RunError> {
        id_fits("agent_id", &request.agent_id)?;
        id_fits("thread_id", &request.thread_id)?;
        id_fits("resource_id", &request.resource_id)?;
        if !request.text.is_empty() && !request.messages.is_empty() {
            return Err(RunError::invalid("text", "give `text` or `messages`, not both"));
        }
        let messages = if request.text.is_empty() {
            request
                .messages
                .into_iter()
                .enumerate()
                .map(|(index, message)| message_from_pb(message, &format!("messages[{index}]")))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            vec![Message::new(Role::User, vec![Part::text(request.text)])]
        };
        Ok(RunRequest {
            agent_id: request.agent_id,
            messages,
            thread_id: request.thread_id,
            resource_id: request.resource_id,
            request_context: request.request_context.into_iter().collect(),
            input_processors: request.input_processors.map(|list| list.names),
            output_processors: request.output_processors.map(|list| list.names),
            error_processors: request.error_processors.map(|list| list.names),
            max_processor_retries: request.max_processor_retries,
            max_steps: request.max_steps,
            output_schema: request.output_schema.map(|schema| serde_json::Value::Object(from_struct(schema))),
            trace_context: TraceContext::new(),
            // The caller's API key decides it: `AgentServiceImpl::authorized_run` sets it.
            quota: ResourceQuota::UNLIMITED,
            allowance: None,
            key_name: String::new(),
        })
    }
}

/// `Ok` when an id the client gave fits [`MAX_ID_BYTES`]; the error names the field.
pub(super) fn id_fits(field: &str, id: &str) -> Result<(), RunError> {
    if id.len() > MAX_ID_BYTES {
        return Err(RunError::invalid(
            field,
            format!("{} bytes is longer than an id may be ({MAX_ID_BYTES} bytes)", id.len()),
        ));
    }
    Ok(())
}

/// A client's message; `field` names it in errors (`messages[2]`).
pub(super) fn message_from_pb(message: pb::Message, field: &str) -> Result<Message, RunError> {
    let Some(role) = Role::parse(&message.role) else {
        let reason = format!("unknown role `{}`: expected user, assistant, tool or system", message.role);
        return Err(RunError::invalid(format!("{field}.role"), reason));
    };
    if message.parts.is_empty() {
        return Err(RunError::invalid(format!("{field}.parts"), "must hold at least one part"));
    }
    let parts = message
        .parts
        .into_iter()
        .enumerate()
        .map(|(index, part)| part_from_pb(part, &format!("{field}.parts[{index}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut converted = Message::new(role, parts);
    id_fits(&format!("{field}.id"), &message.id)?;
    if !message.id.is_empty() {
        converted.id = message.id;
    }
    if message.created_at > 0 {
        converted.created_at = message.created_at;
    }
    converted.metadata = message.metadata.map(from_struct).unwrap_or_default();
    Ok(converted)
}

fn part_from_pb(part: pb::Part, field: &str) -> Result<Part, RunError> {
    use pb::part::Part as Kind;
    let Some(kind) = part.part else {
        return Err(RunError::invalid(
            field,
            "must set one of text, reasoning, tool_call, tool_result, file, data",
        ));
    };
    let converted = match kind {
        Kind::Text(text) => Part::Text { text: text.text },
        Kind::Reasoning(reasoning) => Part::Reasoning { text: reasoning.text },
        Kind::ToolCall(call) => {
            if call.tool_call_id.is_empty() || call.tool_name.is_empty() {
                return Err(RunError::invalid(
                    format!("{field}.tool_call"),
                    "needs tool_call_id and tool_name",
                ));
            }
            Part::ToolCall(ToolCall {
                tool_call_id: call.tool_call_id,
                tool_name: call.tool_name,
                args: call.args.map(from_proto).unwrap_or_default(),
            })
        }
        Kind::ToolResult(result) => {
            if result.tool_call_id.is_empty() {
                return Err(RunError::invalid(format!("{field}.tool_result.tool_call_id"), "is required"));
            }
            Part::ToolResult(ToolResult {
                tool_call_id: result.tool_call_id,
                tool_name: result.tool_name,
                result: result.result.map(from_proto).unwrap_or_default(),
                is_error: result.is_error,
            })
        }
        Kind::File(file) => {
            if file.data.is_empty() == file.url.is_empty() {
                return Err(RunError::invalid(format!("{field}.file"), "needs exactly one of data or url"));
            }
            Part::File {
                media_type: file.media_type,
                data: file.data,
                url: file.url,
                filename: file.filename,
            }
        }
        Kind::Data(data) => {
            if !data.r#type.starts_with(crate::domain::DATA_PREFIX) {
                return Err(RunError::invalid(format!("{field}.data.type"), "must start with `data-`"));
            }
            Part::Data {
                name: data.r#type,
                data: data.data.map(from_proto).unwrap_or_default(),
                id: (!data.id.is_empty()).then_some(data.id),
            }
        }
    };
    Ok(converted)
}

impl From<Message> for pb::Message {
    fn from(message: Message) -> pb::Message {
        pb::Message {
            id: message.id,
            thread_id: message.thread_id,
            resource_id: message.resource_id,
            role: message.role.as_str().to_owned(),
            parts: message.parts.into_iter().map(pb::Part::from).collect(),
            created_at: if message.created_at > 0 { message.created_at } else { now_millis() },
            metadata: Some(to_struct(&message.metadata)),
        }
    }
}

impl From<Part> for pb::Part {
    fn from(part: Part) -> pb::Part {
        use pb::part::Part as Kind;
        let kind = match part {
            Part::Text { text } => Kind::Text(pb::TextPart { text }),
            Part::Reasoning { text } => Kind::Reasoning(pb::ReasoningPart { text }),
            Part::ToolCall(call) => Kind::ToolCall(call.into()),
            Part::ToolResult(result) => Kind::ToolResult(result.into()),
            Part::File { media_type, data, url, filename } => {
                Kind::File(pb::FilePart { media_type, data, url, filename })
            }
            Part::Data { name, data, id } => Kind::Data(pb::DataPart {
                r#type: name,
                data: Some(to_proto(&data)),
                id: id.unwrap_or_default(),
            }),
        };
        pb::Part { part: Some(kind) }
    }
}

impl From<ToolCall> for pb::ToolCallPart {
    fn from(call: ToolCall) -> pb::ToolCallPart {
        pb::ToolCallPart {
            tool_call_id: call.tool_call_id,
            tool_name: call.tool_name,
            args: Some(to_proto(&call.args)),
        }
    }
}

impl From<ToolResult> for pb::ToolResultPart {
    fn from(result: ToolResult) -> pb::ToolResultPart {
        pb::ToolResultPart {
            tool_call_id: result.tool_call_id,
            tool_name: result.tool_name,
            result: Some(to_proto(&result.result)),
            is_error: result.is_error,
        }
    }
}

impl From<Usage> for pb::Usage {
    fn from(usage: Usage) -> pb::Usage {
        pb::Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens(),
        }
    }
}

impl From<Tripwire> for pb::Tripwire {
    fn from(tripwire: Tripwire) -> pb::Tripwire {
        pb::Tripwire {
            reason: tripwire.reason,
            retry: tripwire.retry,
            metadata: Some(to_proto(&tripwire.metadata)),
            processor_id: tripwire.processor_id,
        }
    }
}

impl From<RunFailure> for pb::ErrorPayload {
    fn from(failure: RunFailure) -> pb::ErrorPayload {
        pb::ErrorPayload {
            message: failure.message,
            source: failure.source.as_str().to_owned(),
            origin: failure.origin,
        }
    }
}

/// A chunk of run `run_id` on the wire.
pub(super) fn chunk_to_pb(run_id: &str, chunk: Chunk) -> pb::Chunk {
    use pb::chunk::Payload;
    let chunk_type = chunk.type_name().to_owned();
    let payload = match chunk {
        Chunk::Start { agent_id, thread_id, resource_id } => {
            Payload::Start(pb::StartPayload { agent_id, thread_id, resource_id })
        }
        Chunk::StepStart { step, message_id, model } => {
            Payload::StepStart(pb::StepStartPayload { step, message_id, model })
        }
        Chunk::TextDelta { id, text } => Payload::TextDelta(pb::DeltaPayload { id, text }),
        Chunk::ReasoningDelta { id, text } => Payload::ReasoningDelta(pb::DeltaPayload { id, text }),
        Chunk::ToolCall(call) => Payload::ToolCall(call.into()),
        Chunk::ToolResult(result) => Payload::ToolResult(result.into()),
        Chunk::StepFinish { step, finish_reason, usage, rejected } => {
            Payload::StepFinish(pb::StepFinishPayload {
                step,
                finish_reason: finish_reason.as_str().to_owned(),
                usage: Some(usage.into()),
                rejected: rejected.map(pb::Tripwire::from),
            })
        }
        Chunk::Data(data) => Payload::Data(data_payload(data)),
        Chunk::Tripwire(tripwire) => Payload::Tripwire(tripwire.into()),
        Chunk::Error(failure) => Payload::Error(failure.into()),
        Chunk::Finish { finish_reason, usage, text, object } => Payload::Finish(pb::FinishPayload {
            finish_reason: finish_reason.as_str().to_owned(),
            usage: Some(usage.into()),
            text,
            object: object.as_ref().map(to_proto),
        }),
    };
    pb::Chunk { run_id: run_id.to_owned(), r#type: chunk_type, payload: Some(payload) }
}

fn data_payload(data: DataChunk) -> pb::DataPayload {
    pb::DataPayload {
        data: Some(to_proto(&data.data)),
        id: data.id.unwrap_or_default(),
        transient: data.transient,
    }
}

impl From<StepResult> for pb::StepResult {
    fn from(step: StepResult) -> pb::StepResult {
        pb::StepResult {
            step: step.step,
            text: step.text,
            reasoning: step.reasoning,
            finish_reason: step.finish_reason.as_str().to_owned(),
            usage: Some(step.usage.into()),
            tool_calls: step.tool_calls.into_iter().map(pb::ToolCallPart::from).collect(),
            tool_results: step.tool_results.into_iter().map(pb::ToolResultPart::from).collect(),
            tripwire: step.tripwire.map(pb::Tripwire::from),
            model: step.model,
        }
    }
}

impl From<RunResult> for pb::GenerateResponse {
    fn from(result: RunResult) -> pb::GenerateResponse {
        let run_id = result.run_id;
        let data = result.data.into_iter().map(|data| chunk_to_pb(&run_id, Chunk::Data(data))).collect();
        pb::GenerateResponse {
            text: result.text,
            object: result.object.as_ref().map(to_proto),
            finish_reason: result.finish_reason.as_str().to_owned(),
            usage: Some(result.usage.into()),
            steps: result.steps.into_iter().map(pb::StepResult::from).collect(),
            tripwire: result.tripwire.map(pb::Tripwire::from),
            error: result.error.map(pb::ErrorPayload::from),
            messages: result.messages.into_iter().map(pb::Message::from).collect(),
            data,
            skipped_processors: result
                .skipped
                .into_iter()
                .map(|skipped| pb::SkippedProcessor {
                    processor_id: skipped.processor_id,
                    hook: skipped.hook,
                    cause: skipped.cause,
                })
                .collect(),
            run_id,
        }
    }
}

impl From<&Agent> for pb::Agent {
    fn from(agent: &Agent) -> pb::Agent {
        let names = |processors: &[crate::runtime::NamedProcessor]| {
            processors.iter().map(|named| named.name.clone()).collect()
        };
        pb::Agent {
            id: agent.id.clone(),
            name: agent.name.clone(),
            instructions: agent.instructions.clone(),
            model: agent.model.clone(),
            input_processors: names(&agent.input_processors),
            output_processors: names(&agent.output_processors),
            error_processors: names(&agent.error_processors),
            tools: agent.tools.iter().map(|tool| tool.definition().name).collect(),
            max_steps: agent.max_steps,
            max_processor_retries: agent.max_processor_retries,
            pipeline: agent.pipeline().into_iter().map(pipeline_to_pb).collect(),
        }
    }
}

fn pipeline_to_pb(entry: crate::runtime::PipelineEntry) -> pb::PipelineProcessor {
    let options = match serde_json::to_value(&entry.options) {
        Ok(serde_json::Value::Object(options)) => options,
        _ => serde_json::Map::new(),
    };
    pb::PipelineProcessor {
        stage: entry.stage.name().to_owned(),
        id: entry.id,
        kind: entry.kind,
        options: Some(super::value::to_struct(&options)),
        automatic: entry.automatic,
        hooks: entry.hooks.iter().map(|hook| hook.name().to_owned()).collect(),
    }
}
