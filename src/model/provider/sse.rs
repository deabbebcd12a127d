//! Server-sent events: splits a byte stream into events (`event:` and `data:` fields), across
//! arbitrary chunk boundaries.

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct SseEvent {
    /// The `event:` field, empty when absent.
    pub(super) event: String,
    /// The `data:` lines, joined with `\n`.
    pub(super) data: String,
}

/// Collects bytes and hands out whole events.
#[derive(Debug, Default)]
pub(super) struct SseParser {
    buffer: Vec<u8>,
    /// How far `buffer` is known to hold no blank line: a long event arriving in many pieces is
    /// scanned once, not once a piece.
    scanned: usize,
}

impl SseParser {
    /// Adds bytes; returns the events they complete.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some((end, next)) = block_end(&self.buffer, start, self.scanned.max(start)) {
            if let Some(event) = parse_block(&String::from_utf8_lossy(&self.buffer[start..end])) {
                events.push(event);
            }
            start = next;
        }
        self.buffer.drain(..start);
        // The last line break may begin a blank line the next bytes complete.
        self.scanned = self.buffer.len().saturating_sub(2);
        events
    }

    /// The last event, when the stream ended without a blank line after it.
    pub(super) fn finish(&mut self) -> Option<SseEvent> {
        let rest = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        parse_block(&String::from_utf8_lossy(&rest))
    }
}

/// The first event block of `buffer` from `start` (scanning from `from`): where its text ends,
/// and where the next block starts (past the blank line, `\n\n` or `\r\n\r\n` or a mix).
fn block_end(buffer: &[u8], start: usize, from: usize) -> Option<(usize, usize)> {
    let mut at = from;
    loop {
        let newline = at + buffer[at..].iter().position(|&byte| byte == b'\n')?;
        let rest = &buffer[newline + 1..];
        let blank = if rest.starts_with(b"\n") {
            Some(1)
        } else if rest.starts_with(b"\r\n") {
            Some(2)
        } else {
            None
        };
        if let Some(blank) = blank {
            let end = if newline > start && buffer[newline - 1] == b'\r' { newline - 1 } else { newline };
            return Some((end, newline + 1 + blank));
        }
        at = newline + 1;
    }
}

fn parse_block(block: &str) -> Option<SseEvent> {
    let mut event = SseEvent::default();
    let mut data_lines = Vec::new();
    for line in block.lines() {
        if line.starts_with(':') {
            continue; // a comment (keep-alive)
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => event.event = value.to_owned(),
            "data" => data_lines.push(value),
            _ => {}
        }
    }
    if data_lines.is_empty() {
        return None;
    }
    event.data = data_lines.join("\n");
    Some(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SSE events split across network chunks and any line ending come out whole and in order.
    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let mut parser = SseParser::default();
        assert!(parser.feed(b"event: ping\ndata: {\"a\"").is_empty());
        let events = parser.feed(b":1}\n\n: keep-alive\n\ndata: one\r\ndata: two\r\n\r\ndata: last");
        assert_eq!(
            events,
            [
                SseEvent { event: "ping".into(), data: "{\"a\":1}".into() },
                SseEvent { event: String::new(), data: "one\ntwo".into() },
            ]
        );
        assert_eq!(parser.finish(), Some(SseEvent { event: String::new(), data: "last".into() }));
    }

    /// A blank line split between two pieces (`\n` | `\n`, `\r\n` | `\r\n`) still ends its event,
    /// and a long event fed a byte at a time comes out once, whole.
    #[test]
    fn a_blank_line_split_across_pieces_ends_the_event() {
        let mut parser = SseParser::default();
        assert!(parser.feed(b"data: a\n").is_empty());
        assert_eq!(parser.feed(b"\ndata: b\r\n"), [SseEvent { event: String::new(), data: "a".into() }]);
        assert_eq!(parser.feed(b"\r\n"), [SseEvent { event: String::new(), data: "b".into() }]);
        let long = format!("data: {}\n\n", "x".repeat(5000));
        let mut events = Vec::new();
        for byte in long.as_bytes() {
            events.extend(parser.feed(std::slice::from_ref(byte)));
        }
        assert_eq!(events, [SseEvent { event: String::new(), data: "x".repeat(5000) }]);
    }
}
