//! What a run's model saw and its client got, for an agent with `[agents.record] content = true`:
//! each model call's prompt and the chunks delivered, consecutive text deltas of one text joined,
//! up to [`MAX_CONTENT_BYTES`] (the rest left out, and the record says so).

use crate::domain::{Chunk, Part, PromptMessage, PromptRecord, RunContent};

/// What one record keeps of a run's content at most, in bytes of text (other parts and chunks
/// counted by their JSON).
pub(super) const MAX_CONTENT_BYTES: usize = 1 << 20;

/// A run's content as it goes.
#[derive(Debug, Default)]
pub(super) struct ContentLog {
    content: RunContent,
    bytes: usize,
}

fn part_bytes(part: &Part) -> usize {
    match part {
        Part::Text { text } => text.len(),
        other => serde_json::to_vec(other).map_or(0, |json| json.len()),
    }
}

impl ContentLog {
    /// Counts `bytes` more; false (and truncated) when they do not fit.
    fn fits(&mut self, bytes: usize) -> bool {
        if self.content.truncated || self.bytes + bytes > MAX_CONTENT_BYTES {
            self.content.truncated = true;
            return false;
        }
        self.bytes += bytes;
        true
    }

    /// The prompt of the model call of `step`.
    pub(super) fn prompt(&mut self, step: u32, messages: &[PromptMessage]) {
        let bytes = messages.iter().flat_map(|message| &message.parts).map(part_bytes).sum();
        if self.fits(bytes) {
            self.content.prompts.push(PromptRecord { step, messages: messages.to_vec() });
        }
    }

    /// A chunk the client got.
    pub(super) fn chunk(&mut self, chunk: &Chunk) {
        let bytes = match chunk {
            Chunk::TextDelta { text, .. } => text.len(),
            other => serde_json::to_vec(other).map_or(0, |json| json.len()),
        };
        if !self.fits(bytes) {
            return;
        }
        if let (Chunk::TextDelta { id, text }, Some(Chunk::TextDelta { id: last_id, text: joined })) =
            (chunk, self.content.chunks.last_mut())
            && id == last_id
        {
            joined.push_str(text);
            return;
        }
        self.content.chunks.push(chunk.clone());
    }

    /// What was kept.
    pub(super) fn finish(self) -> RunContent {
        self.content
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;

    fn delta(id: &str, text: &str) -> Chunk {
        Chunk::TextDelta { id: id.into(), text: text.into() }
    }

    /// Deltas of one text are joined; a new text starts a new chunk; past the limit nothing more
    /// is kept and the content says it was truncated.
    #[test]
    fn deltas_join_and_the_log_stops_at_its_limit() {
        let mut log = ContentLog::default();
        log.prompt(0, &[PromptMessage { role: Role::User, parts: vec![Part::text("hi")] }]);
        for text in ["a", "b", "c"] {
            log.chunk(&delta("t1", text));
        }
        log.chunk(&delta("t2", "d"));
        log.chunk(&delta("t2", &"x".repeat(MAX_CONTENT_BYTES)));
        log.chunk(&delta("t2", "e"));
        let content = log.finish();
        assert_eq!(content.prompts.len(), 1);
        assert_eq!(content.chunks, [delta("t1", "abc"), delta("t2", "d")]);
        assert!(content.truncated);
    }
}
