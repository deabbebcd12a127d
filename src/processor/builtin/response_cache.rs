//! `response-cache`: whole model responses, cached in the store and keyed by the exact outgoing
//! call — the prompt as sent (after every earlier processor), the model, the tools on offer, the
//! tool choice, settings, provider options and output schema.
//!
//! processLLMRequest looks the call up and, on a hit, answers in the model's place (the run's
//! stream processors still see every chunk); processLLMResponse stores what the model answered,
//! for `ttl_seconds`. Entries are shared within a `scope`: the run's resource (the default — one
//! user's answer is never served to another; runs without a resource are not cached), its
//! thread, its agent, or everyone. Only answers that ended normally (`stop`, `tool-calls`) are
//! kept; a replayed step reports zero usage, since it spent nothing. The cache is an
//! optimisation: a store failure is reported and the run goes on to the model.
//! Each step is reported in a transient `data-response-cache` chunk.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::domain::{
    Chunk, DataChunk, FinishReason, Hook, HookSet, RunInfo, Usage, now_millis, thread_owner,
};
use crate::processor::{
    BuildError, HookContext, HookError, LlmRequestArgs, LlmRequestOutcome, LlmResponseArgs, Processor,
    ProcessorResources, parse_options,
};
use crate::storage::{CacheScope, Store};

pub(super) const KIND: &str = "response-cache";

/// The version of the key and entry layout: bumping it retires every older entry.
const FORMAT: u32 = 1;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Scope {
    #[default]
    Resource,
    Thread,
    Agent,
    Global,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default = "default_ttl_seconds")]
    ttl_seconds: u64,
    #[serde(default)]
    scope: Scope,
}

fn default_ttl_seconds() -> u64 {
    300
}

/// Caches model responses.
pub(super) struct ResponseCache {
    id: String,
    store: Arc<dyn Store>,
    ttl: Duration,
    scope: Scope,
}

impl ResponseCache {
    pub(super) fn from_options(
        id: &str,
        options: toml::Table,
        resources: &ProcessorResources,
    ) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        if options.ttl_seconds == 0 {
            return Err("`ttl_seconds` must be at least 1".to_owned().into());
        }
        let store = resources.store.clone().ok_or_else(|| {
            BuildError::Options("needs the server's store, and this server has none".to_owned())
        })?;
        Ok(Arc::new(ResponseCache {
            id: id.to_owned(),
            store,
            ttl: Duration::from_secs(options.ttl_seconds),
            scope: options.scope,
        }))
    }

    /// The run's cache scope; `None` when the run has no resource (thread) to scope by.
    fn scope_of(&self, run: &RunInfo) -> Option<CacheScope> {
        let owned = |id: &str| (!id.is_empty()).then(|| id.to_owned());
        match self.scope {
            Scope::Resource => owned(&run.resource_id).map(CacheScope::Resource),
            // A run without a resource keeps its thread under the thread's own id, as memory does.
            Scope::Thread => owned(&run.thread_id).map(|thread_id| CacheScope::Thread {
                resource_id: thread_owner(&thread_id, &run.resource_id).to_owned(),
                thread_id,
            }),
            Scope::Agent => Some(CacheScope::Agent(run.agent_id.clone())),
            Scope::Global => Some(CacheScope::Global),
        }
    }

    fn report(ctx: &mut HookContext<'_>, details: Value) {
        ctx.emit(DataChunk::new("response-cache", details).transient());
    }
}

/// The key of a model call: the call itself, whoever makes it (the scope says who shares).
fn key_of(args: &LlmRequestArgs<'_>) -> String {
    let step = args.step;
    let call = json!({
        "format": FORMAT,
        "model": step.model,
        "prompt": args.prompt,
        "tools": step.offered_tools(),
        "tool_choice": step.tool_choice,
        "settings": step.settings,
        "provider_options": step.provider_options,
        "structured_output": step.structured_output,
    });
    let digest = Sha256::digest(call.to_string().as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The chunks worth keeping — an answer that ended normally — with their usage zeroed.
fn cacheable(chunks: &[Chunk]) -> Option<Vec<Chunk>> {
    let ended_well = chunks.iter().any(|chunk| {
        matches!(chunk, Chunk::StepFinish { finish_reason: FinishReason::Stop | FinishReason::ToolCalls, .. })
    });
    let failed = chunks.iter().any(|chunk| matches!(chunk, Chunk::Error(_) | Chunk::Tripwire(_)));
    (ended_well && !failed).then(|| {
        chunks
            .iter()
            .map(|chunk| match chunk {
                Chunk::StepFinish { step, finish_reason, rejected, .. } => Chunk::StepFinish {
                    step: *step,
                    finish_reason: *finish_reason,
                    usage: Usage::default(),
                    rejected: rejected.clone(),
                },
                other => other.clone(),
            })
            .collect()
    })
}

#[async_trait::async_trait]
impl Processor for ResponseCache {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessLlmRequest, Hook::ProcessLlmResponse])
    }

    async fn process_llm_request(
        &self,
        mut args: LlmRequestArgs<'_>,
    ) -> Result<LlmRequestOutcome, HookError> {
        let Some(scope) = self.scope_of(args.ctx.run) else { return Ok(LlmRequestOutcome::default()) };
        let key = key_of(&args);
        let step = args.step_number;
        let found = self.store.cache_get(&scope, &key).await;
        args.ctx.state.insert("key".to_owned(), Value::String(key));
        let response =
            match found.map(|bytes| bytes.map(|bytes| serde_json::from_slice::<Vec<Chunk>>(&bytes))) {
                Ok(Some(Ok(chunks))) => chunks,
                Ok(None) => return Ok(LlmRequestOutcome::default()),
                Ok(Some(Err(error))) => {
                    Self::report(
                        &mut args.ctx,
                        json!({ "step": step, "hit": false, "error": error.to_string() }),
                    );
                    return Ok(LlmRequestOutcome::default());
                }
                Err(error) => {
                    Self::report(
                        &mut args.ctx,
                        json!({ "step": step, "hit": false, "error": error.to_string() }),
                    );
                    return Ok(LlmRequestOutcome::default());
                }
            };
        Self::report(&mut args.ctx, json!({ "step": step, "hit": true }));
        Ok(LlmRequestOutcome { prompt: None, response: Some(response) })
    }

    async fn process_llm_response(&self, mut args: LlmResponseArgs<'_>) -> Result<(), HookError> {
        let key = args.ctx.state.remove("key");
        let (Some(Value::String(key)), Some(scope)) = (key, self.scope_of(args.ctx.run)) else {
            return Ok(());
        };
        if args.from_cache {
            return Ok(());
        }
        let step = args.step_number;
        let Some(chunks) = cacheable(args.chunks) else {
            Self::report(&mut args.ctx, json!({ "step": step, "hit": false, "stored": false }));
            return Ok(());
        };
        let bytes = serde_json::to_vec(&chunks).expect("chunks serialize");
        let expires_at = now_millis().saturating_add(i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX));
        let stored = self.store.cache_put(&scope, &key, bytes, expires_at).await;
        let details = match stored {
            Ok(()) => json!({ "step": step, "hit": false, "stored": true }),
            Err(error) => json!({ "step": step, "hit": false, "stored": false, "error": error.to_string() }),
        };
        Self::report(&mut args.ctx, details);
        Ok(())
    }
}
