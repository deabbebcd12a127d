//! Structured output: a JSON schema the run's final answer must follow. The schema goes to the
//! model with every step (providers with a native JSON mode use it); the final text is parsed and
//! validated, and the object is returned with the result — or the run fails saying why.

use std::sync::Arc;

use serde_json::Value;

/// A checked JSON schema.
#[derive(Clone)]
pub struct OutputSchema {
    schema: Value,
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_tuple("OutputSchema").field(&self.schema).finish()
    }
}

impl OutputSchema {
    /// Compiles `schema`; the error says why it is not a valid JSON schema.
    pub fn new(schema: Value) -> Result<OutputSchema, String> {
        if !schema.is_object() {
            return Err("must be a JSON schema object".to_owned());
        }
        let validator = jsonschema::validator_for(&schema)
            .map_err(|error| format!("not a valid JSON schema: {error}"))?;
        Ok(OutputSchema { schema, validator: Arc::new(validator) })
    }

    /// The schema itself.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The object in a final answer: its JSON (inside a Markdown code fence, if the model put it
    /// in one), checked against the schema.
    pub fn object_of(&self, text: &str) -> Result<Value, String> {
        let json = unfenced(text.trim());
        let object: Value =
            serde_json::from_str(json).map_err(|error| format!("the answer is not JSON ({error})"))?;
        let problems: Vec<String> = self
            .validator
            .iter_errors(&object)
            .map(|error| format!("{error} at `{}`", error.instance_path()))
            .collect();
        if problems.is_empty() {
            Ok(object)
        } else {
            Err(format!("the answer does not follow the output schema: {}", problems.join("; ")))
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

    #[test]
    fn objects_are_parsed_unfenced_and_checked() {
        let schema = OutputSchema::new(json!({
            "type": "object", "properties": { "n": { "type": "integer" } }, "required": ["n"],
        }))
        .unwrap();
        assert_eq!(schema.object_of("{\"n\": 3}").unwrap(), json!({ "n": 3 }));
        assert_eq!(schema.object_of("```json\n{\"n\": 4}\n```").unwrap(), json!({ "n": 4 }));
        assert!(schema.object_of("{\"n\": \"x\"}").unwrap_err().contains("/n"));
        assert!(schema.object_of("three").unwrap_err().contains("not JSON"));
        assert!(OutputSchema::new(json!({ "type": 5 })).is_err());
    }
}
