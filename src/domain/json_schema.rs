//! A checked JSON schema: the run's output schema (structured output: the schema goes to the
//! model with every step, and the final text is parsed and validated), and a remote tool's
//! argument schema (arguments are checked before every call).

use std::sync::Arc;

use serde_json::Value;

/// Why a schema does not compile, or a value does not follow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The schema is not an object, as output and argument schemas must be.
    #[error("must be a JSON schema object")]
    NotAnObject,
    /// The schema does not compile.
    #[error("not a valid JSON schema: {0}")]
    Invalid(String),
    /// A value does not follow the schema: each problem, with where it is.
    #[error("{}", .0.join("; "))]
    Mismatch(Vec<String>),
    /// A final answer is not JSON.
    #[error("the answer is not JSON ({0})")]
    AnswerNotJson(String),
    /// A final answer's JSON does not follow the output schema.
    #[error("the answer does not follow the output schema: {}", .0.join("; "))]
    AnswerMismatch(Vec<String>),
}

/// A checked JSON schema.
#[derive(Clone)]
pub struct JsonSchema {
    schema: Value,
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for JsonSchema {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_tuple("JsonSchema").field(&self.schema).finish()
    }
}

impl JsonSchema {
    /// Compiles `schema`, which must be an object (as output and argument schemas are); the error
    /// says why it is not a valid JSON schema.
    pub fn new(schema: Value) -> Result<JsonSchema, SchemaError> {
        if !schema.is_object() {
            return Err(SchemaError::NotAnObject);
        }
        JsonSchema::compile(schema)
    }

    /// Compiles any JSON schema, booleans included.
    pub fn compile(schema: Value) -> Result<JsonSchema, SchemaError> {
        let validator =
            jsonschema::validator_for(&schema).map_err(|error| SchemaError::Invalid(error.to_string()))?;
        Ok(JsonSchema { schema, validator: Arc::new(validator) })
    }

    /// The schema itself.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Checks a value; the error lists each problem with where it is.
    pub fn check(&self, value: &Value) -> Result<(), SchemaError> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(value)
            .map(|error| format!("{error} at `{}`", error.instance_path()))
            .collect();
        if problems.is_empty() { Ok(()) } else { Err(SchemaError::Mismatch(problems)) }
    }

    /// The object in a final answer: its JSON (inside a Markdown code fence, if the model put it
    /// in one), checked against the schema.
    pub fn object_of(&self, text: &str) -> Result<Value, SchemaError> {
        let json = unfenced(text.trim());
        let object: Value =
            serde_json::from_str(json).map_err(|error| SchemaError::AnswerNotJson(error.to_string()))?;
        match self.check(&object) {
            Err(SchemaError::Mismatch(problems)) => Err(SchemaError::AnswerMismatch(problems)),
            checked => checked.map(|()| object),
        }
    }
}

/// The inside of a ```` ```json ```` fence, or the text as it is.
fn unfenced(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.strip_suffix("```").unwrap_or(body).trim()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// An answer's JSON is read from a code fence or bare, checked against the schema, and a bad one
    /// says why.
    #[test]
    fn objects_are_parsed_unfenced_and_checked() {
        let schema = JsonSchema::new(json!({
            "type": "object", "properties": { "n": { "type": "integer" } }, "required": ["n"],
        }))
        .unwrap();
        assert_eq!(schema.object_of("{\"n\": 3}").unwrap(), json!({ "n": 3 }));
        assert_eq!(schema.object_of("```json\n{\"n\": 4}\n```").unwrap(), json!({ "n": 4 }));
        assert!(schema.object_of("{\"n\": \"x\"}").unwrap_err().to_string().contains("/n"));
        assert!(schema.object_of("three").unwrap_err().to_string().contains("not JSON"));
        assert!(JsonSchema::new(json!({ "type": 5 })).is_err());
    }
}
