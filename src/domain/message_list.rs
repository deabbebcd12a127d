//! The live message list of a run: every message with where it came from, and the system
//! messages in an untagged bucket (what processors see and may replace) and tagged buckets
//! (memory context, retry feedback) that survive step resets.
//!
//! Processors that return a message array instead of mutating the list are *reconciled*: within
//! the hook's scope, messages missing from the array are removed, known ids are replaced in
//! place keeping their source, new ids are added, and `system` messages move to the untagged
//! bucket (Mastra's `applyMessagesToMessageList`).

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::message::{Message, Part, Role, ToolResult};

/// Where a message of the list came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageSource {
    /// Loaded by a memory processor.
    Memory,
    /// Sent by the client in this run.
    Input,
    /// Produced in this run by the model or its tools.
    Response,
    /// Added by a processor for this run's prompt only (a hidden signal, such as the prefill
    /// repair's `continue`): the model sees it, it is never stored.
    Signal,
}

/// Which messages a reconcile may delete: the hook's view of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileScope {
    /// The remembered messages and this run's input (`processInput`). Deleting a remembered
    /// message drops it from this run's prompt only: memory never saves what it loaded.
    Input,
    /// Only this run's response (`processOutputResult`).
    Response,
    /// Everything (`processInputStep`, `processOutputStep`, `processToolResult`, `processAPIError`).
    All,
}

#[derive(Debug, Clone)]
struct Entry {
    message: Message,
    source: MessageSource,
}

/// The conversation of one run.
#[derive(Debug, Clone, Default)]
pub struct MessageList {
    /// Ordered by `created_at`, remembered messages before this run's at the same time (two
    /// runs can fall in one millisecond); other ties keep insertion order.
    entries: Vec<Entry>,
    /// The untagged system messages: the agent's instructions and what processors put there.
    system: Vec<String>,
    /// Tagged system messages (`memory`, `processor-retry-feedback`, ...), by tag.
    tagged_system: BTreeMap<String, Vec<String>>,
}

impl MessageList {
    /// An empty list.
    pub fn new() -> MessageList {
        MessageList::default()
    }

    /// Adds a message, keeping the list ordered by creation time. A message whose id is already
    /// in the list replaces it in place and keeps the older source. System messages go to the
    /// untagged system bucket.
    pub fn add(&mut self, message: Message, source: MessageSource) {
        if message.role == Role::System {
            self.add_system(message.text());
            return;
        }
        if let Some(entry) = self.entries.iter_mut().find(|entry| entry.message.id == message.id) {
            entry.message = message;
            return;
        }
        let key = order_key(&message, source);
        let position = self.entries.partition_point(|entry| order_key(&entry.message, entry.source) <= key);
        self.entries.insert(position, Entry { message, source });
    }

    /// Removes the messages with these ids.
    pub fn remove_by_ids(&mut self, ids: &[String]) {
        let ids: HashSet<&str> = ids.iter().map(String::as_str).collect();
        self.entries.retain(|entry| !ids.contains(entry.message.id.as_str()));
    }

    /// Every message, in order.
    pub fn all(&self) -> impl Iterator<Item = &Message> {
        self.entries.iter().map(|entry| &entry.message)
    }

    /// The messages of one source, in order.
    pub fn from_source(&self, source: MessageSource) -> impl Iterator<Item = &Message> {
        self.entries.iter().filter(move |entry| entry.source == source).map(|entry| &entry.message)
    }

    /// Clones of the messages in a reconcile scope, in order.
    pub fn snapshot(&self, scope: ReconcileScope) -> Vec<Message> {
        self.entries
            .iter()
            .filter(|entry| in_scope(entry.source, scope))
            .map(|entry| entry.message.clone())
            .collect()
    }

    /// Where the message with this id came from.
    pub fn source_of(&self, id: &str) -> Option<MessageSource> {
        self.entries.iter().find(|entry| entry.message.id == id).map(|entry| entry.source)
    }

    /// True when the message with this id was loaded by memory (not this run's own).
    pub fn is_remembered(&self, id: &str) -> bool {
        self.source_of(id) == Some(MessageSource::Memory)
    }

    /// The tagged system messages (memory context, retry feedback), by tag.
    pub fn tagged_system_messages(&self) -> &BTreeMap<String, Vec<String>> {
        &self.tagged_system
    }

    /// The message with this id.
    pub fn get(&self, id: &str) -> Option<&Message> {
        self.all().find(|message| message.id == id)
    }

    /// The message with this id, to edit in place.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Message> {
        self.entries.iter_mut().map(|entry| &mut entry.message).find(|message| message.id == id)
    }

    /// Number of messages (system messages excluded).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the list holds no message (system messages excluded).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The untagged system messages: what processors see as `systemMessages`.
    pub fn system_messages(&self) -> &[String] {
        &self.system
    }

    /// Replaces the untagged system messages; tagged buckets stay.
    pub fn replace_system_messages(&mut self, system: Vec<String>) {
        self.system = system;
    }

    /// Adds an untagged system message unless the same text is already there.
    pub fn add_system(&mut self, text: String) {
        if !self.system.contains(&text) {
            self.system.push(text);
        }
    }

    /// Adds a system message under a tag unless the same text is already there.
    pub fn add_tagged_system(&mut self, tag: &str, text: String) {
        let bucket = self.tagged_system.entry(tag.to_owned()).or_default();
        if !bucket.contains(&text) {
            bucket.push(text);
        }
    }

    /// Removes every system message of a tag.
    pub fn clear_tagged_system(&mut self, tag: &str) {
        self.tagged_system.remove(tag);
    }

    /// All system messages that reach the model: untagged first, then each tag in name order.
    pub fn all_system_messages(&self) -> Vec<String> {
        let tagged = self.tagged_system.values().flatten();
        self.system.iter().chain(tagged).cloned().collect()
    }

    /// The result of a tool call, if the list holds it.
    pub fn tool_result(&self, tool_call_id: &str) -> Option<&ToolResult> {
        self.all().flat_map(|message| &message.parts).find_map(|part| match part {
            Part::ToolResult(stored) if stored.tool_call_id == tool_call_id => Some(stored),
            _ => None,
        })
    }

    /// Replaces the result of a tool call in the tool message that holds it. Returns false when
    /// no such result is in the list.
    pub fn update_tool_result(&mut self, tool_call_id: &str, result: Value) -> bool {
        let stored =
            self.entries.iter_mut().flat_map(|entry| &mut entry.message.parts).find_map(|part| match part {
                Part::ToolResult(stored) if stored.tool_call_id == tool_call_id => Some(stored),
                _ => None,
            });
        match stored {
            Some(stored) => {
                stored.result = result;
                true
            }
            None => false,
        }
    }

    /// The run's own messages, input first then response — what a run adds to a thread.
    pub fn run_messages(&self) -> impl Iterator<Item = &Message> {
        self.from_source(MessageSource::Input).chain(self.from_source(MessageSource::Response))
    }

    /// Applies a message array returned by a processor to the list (see the module docs).
    /// `default_source` is the source of messages the list did not know.
    pub fn reconcile(
        &mut self,
        scope: ReconcileScope,
        returned: Vec<Message>,
        default_source: MessageSource,
    ) {
        let kept: HashSet<&str> = returned.iter().map(|message| message.id.as_str()).collect();
        let deleted: Vec<String> = self
            .entries
            .iter()
            .filter(|entry| in_scope(entry.source, scope))
            .map(|entry| entry.message.id.clone())
            .filter(|id| !kept.contains(id.as_str()))
            .collect();
        self.remove_by_ids(&deleted);
        for message in returned {
            self.add(message, default_source);
        }
    }
}

/// Where a message goes in the list: by creation time, then remembered before this run's.
fn order_key(message: &Message, source: MessageSource) -> (i64, bool) {
    (message.created_at, source != MessageSource::Memory)
}

fn in_scope(source: MessageSource, scope: ReconcileScope) -> bool {
    match scope {
        ReconcileScope::All => true,
        ReconcileScope::Input => matches!(source, MessageSource::Input | MessageSource::Memory),
        ReconcileScope::Response => source == MessageSource::Response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str, created_at: i64) -> Message {
        let mut message = Message::new(Role::User, vec![Part::text(text)]);
        message.created_at = created_at;
        message
    }

    /// Returning an array deletes what is missing in scope only (processInput's scope: the
    /// remembered messages and the input), keeps each known message's source, and moves system
    /// messages.
    #[test]
    fn reconcile_deletes_missing_in_scope_and_moves_system_messages() {
        let mut list = MessageList::new();
        let remembered = user("old", 1);
        let dropped = user("older", 0);
        let first = user("a", 2);
        let second = user("b", 3);
        let answer = user("response", 4);
        list.add(dropped, MessageSource::Memory);
        list.add(remembered.clone(), MessageSource::Memory);
        list.add(first.clone(), MessageSource::Input);
        list.add(second, MessageSource::Input);
        list.add(answer.clone(), MessageSource::Response);
        let system = Message::new(Role::System, vec![Part::text("be brief")]);
        let returned = vec![remembered.clone(), first.clone(), system];
        list.reconcile(ReconcileScope::Input, returned, MessageSource::Input);
        let ids: Vec<&str> = list.all().map(|message| message.id.as_str()).collect();
        assert_eq!(ids, vec![remembered.id.as_str(), first.id.as_str(), answer.id.as_str()]);
        assert!(list.is_remembered(&remembered.id), "a known message keeps its source");
        assert_eq!(list.system_messages(), ["be brief".to_owned()]);
    }

    /// Messages stay ordered by creation time whatever the insertion order.
    #[test]
    fn add_keeps_creation_order() {
        let mut list = MessageList::new();
        list.add(user("late", 5), MessageSource::Input);
        list.add(user("early", 1), MessageSource::Memory);
        let texts: Vec<String> = list.all().map(Message::text).collect();
        assert_eq!(texts, ["early", "late"]);
    }

    /// History loaded after the input, in the same millisecond as it, still comes before it:
    /// a run that follows another within a millisecond sees its history first.
    #[test]
    fn remembered_messages_precede_the_input_of_the_same_millisecond() {
        let mut list = MessageList::new();
        list.add(user("three", 7), MessageSource::Input);
        list.add(user("two", 7), MessageSource::Memory);
        list.add(user("echo: two", 7), MessageSource::Memory);
        list.add(user("echo: three", 7), MessageSource::Response);
        let texts: Vec<String> = list.all().map(Message::text).collect();
        assert_eq!(texts, ["two", "echo: two", "three", "echo: three"]);
    }
}
