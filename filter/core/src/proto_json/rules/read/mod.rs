//! Reading `buf.validate` options into [`FieldRules`] and [`MessageRules`], once per
//! configuration (the gate keeps them; input schemas are written from the gate's). Options
//! are read by name ([`super::declared`]), so protovalidate's published `validate.proto` and
//! Switchblade's shorter one (`proto/buf/validate/validate.proto`) read the same. A rule that
//! cannot be enforced as written is refused here, at load, naming the field.

mod families;

use std::collections::HashMap;

use prost_reflect::{
    DescriptorPool, DynamicMessage, ExtensionDescriptor, FieldDescriptor, MessageDescriptor, Value as ProtoValue,
};

use super::cel::CelRule;
use super::declared::Declared;
use super::family::{Family, Target};
use super::field::{FamilyRules, FieldRules, Ignore};
use super::message::{Exclusive, MessageRules};

/// The rules of every message of a pool that has any, by full name; or the first rule that
/// cannot be enforced as written (a pattern that does not compile, `string` rules on an
/// `int32` field), named with its field.
pub fn pool_rules(pool: &DescriptorPool) -> Result<HashMap<String, MessageRules>, String> {
    let mut all = HashMap::new();
    let Some(options) = Options::of(pool) else {
        return Ok(all);
    };
    for message in pool.all_messages() {
        let rules = message_rules(&options, &message)?;
        if !rules.is_empty() {
            all.insert(message.full_name().to_owned(), rules);
        }
    }
    Ok(all)
}

/// The three `buf.validate` extensions, when the pool declares them.
struct Options {
    field: ExtensionDescriptor,
    oneof: Option<ExtensionDescriptor>,
    message: Option<ExtensionDescriptor>,
}

impl Options {
    fn of(pool: &DescriptorPool) -> Option<Options> {
        Some(Options {
            field: pool.get_extension_by_name("buf.validate.field")?,
            oneof: pool.get_extension_by_name("buf.validate.oneof"),
            message: pool.get_extension_by_name("buf.validate.message"),
        })
    }
}

/// An option's value: a message, as protovalidate declares each of the three.
fn declared<'a>(value: &'a ProtoValue, extension: &ExtensionDescriptor) -> Result<&'a DynamicMessage, String> {
    value.as_message().ok_or_else(|| {
        format!(
            "the option `{}` is not a message, as protovalidate declares it",
            extension.full_name()
        )
    })
}

/// The rules `message`, its oneofs and its fields declare.
fn message_rules(options: &Options, message: &MessageDescriptor) -> Result<MessageRules, String> {
    let mut rules = MessageRules::default();
    for field in message.fields() {
        if let Some(read) = declared_field_rules(options, &field)? {
            if read.is_enforced() || !read.cel.is_empty() {
                rules.fields.push((field, read));
            }
        }
    }
    if let Some(extension) = &options.oneof {
        for oneof in message.oneofs().filter(|oneof| !oneof.is_synthetic()) {
            let oneof_options = oneof.options();
            if !oneof_options.has_extension(extension) {
                continue;
            }
            let value = oneof_options.get_extension(extension);
            let required = declared(&value, extension)
                .and_then(|declared| declared.flag("required"))
                .map_err(|problem| format!("the buf.validate rules of oneof {}: {problem}", oneof.full_name()))?;
            if required {
                rules.exclusive.push(Exclusive {
                    fields: oneof.fields().collect(),
                    required: true,
                    oneof: Some(oneof.name().to_owned()),
                });
            }
        }
    }
    if let Some(extension) = &options.message {
        let message_options = message.options();
        if message_options.has_extension(extension) {
            let value = message_options.get_extension(extension);
            let in_message =
                |problem: String| format!("the buf.validate rules of message {}: {problem}", message.full_name());
            let declared = declared(&value, extension).map_err(in_message)?;
            for group in declared.messages("oneof").map_err(in_message)? {
                rules.exclusive.push(message_oneof(&group, message)?);
            }
            rules.cel = cel_rules(declared).map_err(in_message)?;
        }
    }
    Ok(rules)
}

/// A message `oneof` rule: at most one of the fields it names (exactly one if `required`).
/// Its own errors name the message already.
fn message_oneof(group: &DynamicMessage, message: &MessageDescriptor) -> Result<Exclusive, String> {
    let in_message = |problem: String| format!("the buf.validate rules of message {}: {problem}", message.full_name());
    let mut fields = Vec::new();
    for name in group.strings("fields").map_err(in_message)? {
        let field = message.get_field_by_name(&name).ok_or_else(|| {
            format!(
                "the buf.validate oneof rule of message {} names `{name}`, which is not one of its fields",
                message.full_name()
            )
        })?;
        fields.push(field);
    }
    if fields.is_empty() {
        return Err(format!(
            "a buf.validate oneof rule of message {} names no fields",
            message.full_name()
        ));
    }
    Ok(Exclusive {
        fields,
        required: group.flag("required").map_err(in_message)?,
        oneof: None,
    })
}

/// The rules of a field that declares any.
fn declared_field_rules(options: &Options, field: &FieldDescriptor) -> Result<Option<FieldRules>, String> {
    let field_options = field.options();
    if !field_options.has_extension(&options.field) {
        return Ok(None);
    }
    let in_field = |problem: String| format!("the buf.validate rules of field {}: {problem}", field.full_name());
    let value = field_options.get_extension(&options.field);
    let declared = declared(&value, &options.field).map_err(in_field)?;
    field_rules(declared, field, Target::Field).map(Some).map_err(in_field)
}

/// A `FieldRules` declared for `target` of `field`; or why it cannot be enforced as written.
fn field_rules(declared: &DynamicMessage, field: &FieldDescriptor, target: Target) -> Result<FieldRules, String> {
    let required = declared.flag("required")?;
    let ignore = match declared.enum_number("ignore")? {
        None => Ignore::Never,
        Some(number) => Ignore::from_number(number).ok_or_else(|| {
            format!(
                "`ignore` is {number}, which is none of protovalidate's `buf.validate.Ignore` values \
                 (IGNORE_IF_ZERO_VALUE = 1, IGNORE_ALWAYS = 3)"
            )
        })?,
    };
    let mut rules = FieldRules {
        required,
        ignore,
        cel: cel_rules(declared)?,
        ..FieldRules::default()
    };
    // The set member of the `type` oneof names the family.
    let Some(member) = declared
        .fields()
        .map(|(member, _)| member)
        .find(|member| member.containing_oneof().is_some_and(|oneof| oneof.name() == "type"))
    else {
        return Ok(rules);
    };
    let Some(family_rules) = declared.message(member.name())? else {
        return Ok(rules);
    };
    let Some(family) = Family::of(field, target) else {
        return Err(format!(
            "`{}` rules on a message field, which takes only `required`, `ignore` and `cel`",
            member.name()
        ));
    };
    if Family::named(member.name()) != Some(family) {
        return Err(format!(
            "`{}` rules on a field that takes `{family}` rules",
            member.name()
        ));
    }
    // Predefined rules are the family's extensions; their CEL is not read.
    for (extension, _) in family_rules.extensions() {
        rules.cel.push(CelRule::new(
            extension.full_name().to_owned(),
            "a predefined rule".to_owned(),
            String::new(),
        )?);
    }
    rules.family = Some(FamilyRules {
        family,
        rules: families::rules_of(family, &family_rules, &target.kind(field))?,
    });
    let nested = |name: &str, target: Target| -> Result<Option<Box<FieldRules>>, String> {
        match family_rules.message(name)? {
            Some(declared) => field_rules(&declared, field, target)
                .map(|read| Some(Box::new(read)))
                .map_err(|problem| format!("{name}: {problem}")),
            None => Ok(None),
        }
    };
    match family {
        Family::Repeated => rules.items = nested("items", Target::Element)?,
        Family::Map => {
            rules.keys = nested("keys", Target::Key)?;
            rules.items = nested("values", Target::Element)?;
        }
        _ => {}
    }
    Ok(rules)
}

/// `cel` and `cel_expression`, as declared.
fn cel_rules(declared: &DynamicMessage) -> Result<Vec<CelRule>, String> {
    let mut rules = Vec::new();
    for rule in declared.messages("cel")? {
        // Each part left out is empty: a rule may have no id, no message.
        let [id, message, expression] = ["id", "message", "expression"].map(|name| rule.text(name));
        rules.push(CelRule::new(
            id?.unwrap_or_default(),
            message?.unwrap_or_default(),
            expression?.unwrap_or_default(),
        )?);
    }
    for expression in declared.strings("cel_expression")? {
        rules.push(CelRule::new(String::new(), String::new(), expression)?);
    }
    Ok(rules)
}
