//! The tools of a step: each call executed, its result through `processToolResult`, then
//! streamed and added to the message list.

use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument as _;

use super::{Closing, Run, RunStop, guarded, stop};
use crate::domain::{
    Chunk, Hook, Message, MessageList, MessageSource, Part, ReconcileScope, Role, ToolCall, ToolResult,
};
use crate::processor::ToolResultArgs;
use crate::telemetry::spans;
use crate::tool::{ToolCallInfo, ToolError};

impl Run {
    /// Runs one tool call, then `processToolResult`, then streams the (rewritten) result.
    pub(super) async fn run_tool(
        &mut self,
        step_number: u32,
        call: &ToolCall,
        offered_tools: &[crate::domain::ToolDefinition],
    ) -> Result<(), RunStop> {
        let offered = offered_tools.iter().any(|tool| tool.name == call.tool_name);
        let run_tool = self.run_tools.iter().find(|tool| tool.definition().name == call.tool_name);
        let outcome = match run_tool.or_else(|| self.runtime.tools.get(&call.tool_name)) {
            Some(tool) if offered => {
                let info = ToolCallInfo {
                    run_id: &self.info.run_id,
                    agent_id: &self.info.agent_id,
                    tool_call_id: &call.tool_call_id,
                    trace_context: &self.info.trace_context,
                };
                let span = spans::tool(&call.tool_name, &call.tool_call_id);
                let started = std::time::Instant::now();
                let outcome = tool.execute(call.args.clone(), info).instrument(span.clone()).await;
                if let Err(error) = &outcome {
                    spans::failed(&span, &error.to_string());
                }
                let error = outcome.as_ref().err().map(ToString::to_string);
                self.recorder.tool(&call.tool_name, step_number, started, error);
                outcome
            }
            _ => Err(ToolError::UnknownTool(call.tool_name.clone())),
        };
        let (result, is_error) = match outcome {
            Ok(result) => (result, false),
            Err(error) => (Value::String(error.to_string()), true),
        };
        self.add_response(Message::new(
            Role::Tool,
            vec![Part::ToolResult(ToolResult {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                result,
                is_error,
            })],
        ));

        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessToolResult) {
            let args = ToolResultArgs {
                ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
                tool_name: &call.tool_name,
                tool_call_id: &call.tool_call_id,
                args: &call.args,
                result: stored_tool_result(&self.list, &call.tool_call_id),
                is_error,
                messages: self.list.snapshot(ReconcileScope::All),
                system_messages: self.list.system_messages().to_vec(),
                tagged_system_messages: self.list.tagged_system_messages().clone(),
                message_list: &mut self.list,
                step_number,
                steps: &self.steps,
            };
            let outcome = guarded(
                &self.recorder,
                processor.id(),
                Hook::ProcessToolResult,
                processor.process_tool_result(args),
            )
            .await
            .map_err(|error| stop(processor.as_ref(), Hook::ProcessToolResult, error))?;
            if let Some(messages) = outcome.messages {
                self.check_replaced(processor.as_ref(), Hook::ProcessToolResult, &messages)?;
                self.list.reconcile(ReconcileScope::All, messages, MessageSource::Response);
            }
            if let Some(result) = outcome.result {
                self.list.update_tool_result(&call.tool_call_id, result);
            }
            self.flush_emitted(Closing::All).await?;
        }

        let processed = ToolResult {
            tool_call_id: call.tool_call_id.clone(),
            tool_name: call.tool_name.clone(),
            result: stored_tool_result(&self.list, &call.tool_call_id),
            is_error,
        };
        self.steps.last_mut().expect("the step was recorded").tool_results.push(processed.clone());
        self.emit(Chunk::ToolResult(processed)).await
    }
}

/// The result of a tool call as the message list holds it (`null` if a processor removed it).
fn stored_tool_result(list: &MessageList, tool_call_id: &str) -> Value {
    list.tool_result(tool_call_id).map(|stored| stored.result.clone()).unwrap_or(Value::Null)
}
