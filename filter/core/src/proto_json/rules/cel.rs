//! CEL rules (`cel`, `cel_expression`, a message's `cel`, and predefined rule extensions): how
//! each is said in a schema, in a log line and in a refusal, and, with the `cel` cargo feature,
//! whether it holds ([`super::expressions`] compiles and evaluates them). Without the feature
//! they are only shown, and always hold.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value};

#[cfg(feature = "cel")]
use super::expressions::{self, Compiled, Outcome};

/// A CEL rule: enforced with the `cel` feature (when it has an expression), shown in any case.
#[derive(Debug, Clone)]
pub struct CelRule {
    pub id: String,
    pub message: String,
    pub expression: String,
    #[cfg(feature = "cel")]
    compiled: Option<Compiled>,
}

impl CelRule {
    /// A rule as declared; with the `cel` feature, compiled (or why it does not compile). A
    /// predefined rule has no expression here.
    pub fn new(id: String, message: String, expression: String) -> Result<CelRule, String> {
        #[cfg(feature = "cel")]
        let compiled = if expression.is_empty() {
            None
        } else {
            Some(expressions::compile(&expression)?)
        };
        Ok(CelRule {
            id,
            message,
            expression,
            #[cfg(feature = "cel")]
            compiled,
        })
    }

    /// Whether the gate checks this rule.
    pub fn is_enforced(&self) -> bool {
        cfg!(feature = "cel") && !self.expression.is_empty()
    }

    /// The rule in a schema's description.
    pub fn words(&self) -> String {
        let said = if self.message.is_empty() {
            String::new()
        } else {
            format!(": {}", self.message)
        };
        let id = if self.id.is_empty() {
            String::new()
        } else {
            format!(" `{}`", self.id)
        };
        match (self.expression.is_empty(), self.is_enforced()) {
            (true, _) => format!("Rule{id}{said} (not checked by the gateway)."),
            (false, true) => format!("Rule{id}{said} (CEL `{}`).", self.expression),
            (false, false) => format!(
                "Rule{id}{said} (CEL `{}`, not checked by the gateway).",
                self.expression
            ),
        }
    }

    /// The rule in a log line: its expression, or its name when it has none here.
    pub fn label(&self) -> &str {
        if self.expression.is_empty() {
            &self.id
        } else {
            &self.expression
        }
    }

    /// The rule in an error, as `string.min_len = 3` names a standard one.
    #[cfg(feature = "cel")]
    fn label_for_errors(&self) -> String {
        if self.id.is_empty() {
            format!("cel `{}`", self.expression)
        } else {
            format!("cel {}: `{}`", self.id, self.expression)
        }
    }

    /// Whether the rule holds for `this`; or the words of its violation. A rule that gives
    /// `true` or an empty string holds; `false` breaks it with its message, another string is
    /// the message itself.
    #[cfg(feature = "cel")]
    fn holds(&self, compiled: &Compiled, this: This) -> Result<(), String> {
        let label = self.label_for_errors();
        match expressions::evaluate(compiled, this) {
            Outcome::Holds => Ok(()),
            Outcome::Says(text) => Err(format!("{text} ({label})")),
            Outcome::Fails if self.message.is_empty() => Err(format!("does not hold ({label})")),
            Outcome::Fails => Err(format!("{} ({label})", self.message)),
            Outcome::Gives(other) => Err(format!("gives {other}, not a bool or a string ({label})")),
            Outcome::Error(error) => Err(format!("could not be evaluated: {error} ({label})")),
        }
    }
}

/// What a CEL rule reads as `this`: a CEL value with the `cel` feature; without it nothing is
/// built, since nothing reads it.
#[cfg(feature = "cel")]
pub type This = ::cel::Value;
#[cfg(not(feature = "cel"))]
pub type This = ();

/// Each of `rules` the gate checks holds for `this` (built once per rule, and only for rules
/// that are checked); or the words of the first that does not.
#[cfg(feature = "cel")]
pub fn all_hold(rules: &[CelRule], this: impl Fn() -> This) -> Result<(), String> {
    for rule in rules {
        if let Some(compiled) = &rule.compiled {
            rule.holds(compiled, this())?;
        }
    }
    Ok(())
}

#[cfg(not(feature = "cel"))]
pub fn all_hold(_rules: &[CelRule], _this: impl Fn() -> This) -> Result<(), String> {
    Ok(())
}

/// A field's value (a whole list or map, or a singular value), as `this`.
#[cfg(feature = "cel")]
pub fn this_field(field: &FieldDescriptor, value: &Value) -> This {
    expressions::field_value(field, value)
}

/// The default a field without presence holds when it is left out, as `this`.
#[cfg(feature = "cel")]
pub fn this_default(field: &FieldDescriptor) -> This {
    expressions::default_value(field)
}

/// One item of a list, or a map's key or value, as `this`.
#[cfg(feature = "cel")]
pub fn this_element(kind: &Kind, value: &Value) -> This {
    expressions::element_value(kind, value)
}

/// A message given as `object`, as `this`.
#[cfg(feature = "cel")]
pub fn this_message(message: &MessageDescriptor, object: &Map<String, Value>) -> This {
    expressions::message_value(message, object)
}

#[cfg(not(feature = "cel"))]
pub fn this_field(_field: &FieldDescriptor, _value: &Value) -> This {}

#[cfg(not(feature = "cel"))]
pub fn this_default(_field: &FieldDescriptor) -> This {}

#[cfg(not(feature = "cel"))]
pub fn this_element(_kind: &Kind, _value: &Value) -> This {}

#[cfg(not(feature = "cel"))]
pub fn this_message(_message: &MessageDescriptor, _object: &Map<String, Value>) -> This {}
