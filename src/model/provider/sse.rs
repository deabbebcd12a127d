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
}

impl SseParser {
    /// Adds bytes; returns the events they complete.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some((end, separator)) = block_end(&self.buffer) {
            let block: Vec<u8> = self.buffer.drain(..end + separator).take(end).collect();
            if let Some(event) = parse_block(&String::from_utf8_lossy(&block)) {
                events.push(event);
            }
        }
        events
    }

    /// The last event, when the stream ended without a blank line after it.
    pub(super) fn finish(&mut self) -> Option<SseEvent> {
        let rest = std::mem::take(&mut self.buffer);
        parse_block(&String::from_utf8_lossy(&rest))
    }
}

/// Where the first event block ends, and the length of the blank line that ends it.
fn block_end(buffer: &[u8]) -> Option<(usize, usize)> {
    (0..buffer.len()).find_map(|index| {
        let rest = &buffer[index..];
        if rest.starts_with(b"\r\n\r\n") {
            Some((index, 4))
        } else if rest.starts_with(b"\n\n") {
            Some((index, 2))
        } else {
            None
        }
    })
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
}
