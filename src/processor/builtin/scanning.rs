//! The processor behind `pii-detector`, `regex-filter` and `system-prompt-scrubber`: a
//! [`Scanner`] applied to the input (processInput) and to the answer as it streams
//! (processOutputStream, holding back only the tail that could still grow into a match), with a
//! strategy — block, warn or redact.

use serde_json::json;

use super::scan::{Redaction, Scanner, Strategy, add_kinds, kinds, pass, redact, release};
use crate::domain::{Chunk, Hook, HookSet, MessageList, Part, Warning};
use crate::processor::{
    Abort, HookContext, HookError, InputArgs, InputOutcome, OutputStreamArgs, OutputStreamEndArgs, Processor,
};

/// Where a scanning processor gets the scanner for a run: one for every run (any [`Scanner`]), or
/// one made from what the run holds (its system prompt).
pub(super) trait ScannerFor: Send + Sync {
    /// Calls `scan` with the scanner of the run whose list this is.
    fn with_scanner<R>(&self, list: &MessageList, scan: impl FnOnce(&dyn Scanner) -> R) -> R;

    /// False when the input is not scanned (only the answer).
    fn scans_input(&self) -> bool {
        true
    }
}

impl<S: Scanner> ScannerFor for S {
    fn with_scanner<R>(&self, _list: &MessageList, scan: impl FnOnce(&dyn Scanner) -> R) -> R {
        scan(self)
    }
}

/// A scanning processor.
pub(super) struct Scanning<S> {
    pub(super) id: String,
    /// Names the reports (`data-<report>`) and tripwires.
    pub(super) report: &'static str,
    pub(super) scanner: S,
    pub(super) strategy: Strategy,
    pub(super) redaction: Redaction,
}

impl<S: ScannerFor> Scanning<S> {
    /// Applies the strategy to findings of `hook`: an abort for `block`, else a transient report.
    fn act(&self, ctx: &mut HookContext<'_>, hook: Hook, found: Vec<String>) -> Result<(), HookError> {
        if found.is_empty() {
            return Ok(());
        }
        let details = json!({ "hook": hook.name(), "found": found, "strategy": self.strategy_name() });
        let reason = format!("{} detected in {}: {}", self.report, hook.name(), found.join(", "));
        if self.strategy == Strategy::Block {
            return Err(Abort::new(reason).metadata(details).into());
        }
        ctx.warn(Warning::new(self.report, reason, details));
        Ok(())
    }

    fn strategy_name(&self) -> &'static str {
        match self.strategy {
            Strategy::Block => "block",
            Strategy::Warn => "warn",
            Strategy::Redact => "redact",
        }
    }

    /// A text as it goes out: redacted unless the strategy only warns.
    fn rewrite(&self, text: &str, findings: &[super::scan::Finding]) -> String {
        if self.strategy == Strategy::Redact {
            redact(text, findings, self.redaction)
        } else {
            text.to_owned()
        }
    }
}

#[async_trait::async_trait]
impl<S: ScannerFor + 'static> Processor for Scanning<S> {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        if self.scanner.scans_input() {
            HookSet::of(&[Hook::ProcessInput, Hook::ProcessOutputStream])
        } else {
            HookSet::of(&[Hook::ProcessOutputStream])
        }
    }

    async fn process_input(&self, mut args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        if !self.scanner.scans_input() {
            // Not one of this processor's hooks (see `hooks`): it behaves as the trait's default.
            args.ctx.note_default();
            return Ok(InputOutcome::Unchanged);
        }
        let mut found = Vec::new();
        let mut changed = false;
        let list = &*args.message_list;
        self.scanner.with_scanner(list, |scanner| {
            for message in super::own_input_mut(&mut args.messages, list) {
                for part in &mut message.parts {
                    if let Part::Text { text } = part {
                        let findings = scanner.findings(text);
                        if !findings.is_empty() {
                            add_kinds(&mut found, &findings);
                            *text = self.rewrite(text, &findings);
                            changed |= self.strategy == Strategy::Redact;
                        }
                    }
                }
            }
        });
        self.act(&mut args.ctx, Hook::ProcessInput, found)?;
        Ok(if changed { InputOutcome::Messages(args.messages) } else { InputOutcome::Unchanged })
    }

    async fn process_output_stream(
        &self,
        mut args: OutputStreamArgs<'_>,
    ) -> Result<Option<Chunk>, HookError> {
        let Chunk::TextDelta { id, text } = &args.part else { return Ok(Some(args.part)) };
        let passage =
            self.scanner.with_scanner(args.message_list, |scanner| pass(scanner, args.ctx.state, id, text));
        self.act(&mut args.ctx, Hook::ProcessOutputStream, kinds(&passage.findings))?;
        if passage.settled.is_empty() {
            return Ok(None); // all of it may still be part of a match: held
        }
        Ok(Some(Chunk::TextDelta { id: id.clone(), text: self.rewrite(&passage.settled, &passage.findings) }))
    }

    async fn process_output_stream_end(
        &self,
        mut args: OutputStreamEndArgs<'_>,
    ) -> Result<Vec<Chunk>, HookError> {
        let mut out = Vec::new();
        let held = self.scanner.with_scanner(args.message_list, |scanner| release(scanner, args.ctx.state));
        for (id, passage) in held {
            self.act(&mut args.ctx, Hook::ProcessOutputStream, kinds(&passage.findings))?;
            out.push(Chunk::TextDelta { id, text: self.rewrite(&passage.settled, &passage.findings) });
        }
        Ok(out)
    }
}
