//! JSON values ⇄ `google.protobuf.Value`, so tool arguments, results and metadata read as JSON
//! in `grpcurl` and every client.

use prost_types::value::Kind;
use serde_json::{Map, Number, Value};

/// A JSON value as a protobuf value.
pub fn to_proto(value: &Value) -> prost_types::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(flag) => Kind::BoolValue(*flag),
        Value::Number(number) => Kind::NumberValue(number.as_f64().unwrap_or(0.0)),
        Value::String(text) => Kind::StringValue(text.clone()),
        Value::Array(items) => {
            Kind::ListValue(prost_types::ListValue { values: items.iter().map(to_proto).collect() })
        }
        Value::Object(fields) => Kind::StructValue(to_struct(fields)),
    };
    prost_types::Value { kind: Some(kind) }
}

/// A JSON object as a protobuf struct.
pub fn to_struct(fields: &Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct { fields: fields.iter().map(|(key, value)| (key.clone(), to_proto(value))).collect() }
}

/// A protobuf value as JSON. Whole numbers become JSON integers.
pub fn from_proto(value: prost_types::Value) -> Value {
    match value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(flag)) => Value::Bool(flag),
        Some(Kind::NumberValue(number)) => number_from_f64(number),
        Some(Kind::StringValue(text)) => Value::String(text),
        Some(Kind::ListValue(list)) => Value::Array(list.values.into_iter().map(from_proto).collect()),
        Some(Kind::StructValue(fields)) => Value::Object(from_struct(fields)),
    }
}

/// A protobuf struct as a JSON object.
pub fn from_struct(fields: prost_types::Struct) -> Map<String, Value> {
    fields.fields.into_iter().map(|(key, value)| (key, from_proto(value))).collect()
}

fn number_from_f64(number: f64) -> Value {
    // The cast is exact when the round trip is: only then is the number a whole i64.
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    let whole = number as i64;
    #[allow(clippy::cast_precision_loss)]
    if number.fract() == 0.0 && whole as f64 == number {
        return Value::Number(whole.into());
    }
    Number::from_f64(number).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// JSON survives the trip through protobuf, whole numbers staying integers.
    #[test]
    fn json_round_trips() {
        let original = json!({ "a": [1, 2.5, "x", null, true], "b": { "c": -3 } });
        assert_eq!(from_proto(to_proto(&original)), original);
    }
}
