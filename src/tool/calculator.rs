//! `calculator`: evaluates an arithmetic expression. Deterministic, so multi-step runs can be
//! tested and demonstrated offline.

use serde_json::{Value, json};

use super::{Tool, ToolError};
use crate::domain::ToolDefinition;

const NAME: &str = "calculator";

/// Evaluates `+ - * /`, parentheses and decimal numbers.
#[derive(Debug, Clone, Copy)]
pub struct Calculator;

#[async_trait::async_trait]
impl Tool for Calculator {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: NAME.to_owned(),
            description: "Evaluates an arithmetic expression with + - * / and parentheses".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": { "expression": { "type": "string", "description": "e.g. (2 + 3) * 4" } },
                "required": ["expression"],
            }),
        }
    }

    async fn execute(&self, args: Value, _call: super::ToolCallInfo<'_>) -> Result<Value, ToolError> {
        let Some(expression) = args.get("expression").and_then(Value::as_str) else {
            return Err(ToolError::InvalidArguments {
                tool: NAME.to_owned(),
                reason: "`expression` must be a string".to_owned(),
            });
        };
        let value =
            evaluate(expression).map_err(|reason| ToolError::Failed { tool: NAME.to_owned(), reason })?;
        Ok(json!({ "expression": expression, "value": value }))
    }
}

/// Evaluates an expression by recursive descent.
fn evaluate(expression: &str) -> Result<f64, String> {
    let tokens: Vec<char> = expression.chars().filter(|c| !c.is_whitespace()).collect();
    let mut parser = Parser { tokens: &tokens, position: 0 };
    let value = parser.sum()?;
    if parser.position != tokens.len() {
        return Err(format!("unexpected `{}` at position {}", tokens[parser.position], parser.position));
    }
    if !value.is_finite() {
        return Err("the result is not a finite number".to_owned());
    }
    Ok(value)
}

struct Parser<'a> {
    tokens: &'a [char],
    position: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.tokens.get(self.position).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut value = self.product()?;
        while let Some(operator @ ('+' | '-')) = self.peek() {
            self.position += 1;
            let right = self.product()?;
            value = if operator == '+' { value + right } else { value - right };
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut value = self.factor()?;
        while let Some(operator @ ('*' | '/')) = self.peek() {
            self.position += 1;
            let right = self.factor()?;
            value = if operator == '*' { value * right } else { value / right };
        }
        Ok(value)
    }

    fn factor(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('-') => {
                self.position += 1;
                Ok(-self.factor()?)
            }
            Some('(') => {
                self.position += 1;
                let value = self.sum()?;
                if self.peek() != Some(')') {
                    return Err("missing `)`".to_owned());
                }
                self.position += 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.position;
                while matches!(self.peek(), Some(c) if c.is_ascii_digit() || c == '.') {
                    self.position += 1;
                }
                let literal: String = self.tokens[start..self.position].iter().collect();
                literal.parse().map_err(|_| format!("bad number `{literal}`"))
            }
            Some(c) => Err(format!("unexpected `{c}` at position {}", self.position)),
            None => Err("unexpected end of expression".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::evaluate;

    /// Precedence, parentheses and unary minus follow arithmetic rules.
    #[test]
    fn evaluates_with_precedence() {
        assert_eq!(evaluate("2 + 3 * 4"), Ok(14.0));
        assert_eq!(evaluate("(2 + 3) * -4"), Ok(-20.0));
        assert!(evaluate("2 +").is_err());
        assert!(evaluate("1 / 0").is_err());
    }
}
