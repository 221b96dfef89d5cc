//! Tool search (`discovery: search`): a catalog of any size behind two tools. The search tool
//! (`search_tools` unless renamed) takes a request in words (and, optionally, a service and a
//! kind) and answers with the best-matching tools' definitions, ranked over what the
//! descriptors say ([`index`]); the call tool (`call_tool`) calls a tool it found, checked at
//! the gate exactly as a listed tool's call is. What an agent reads before its first call stays
//! the same whatever the catalog's size.

pub mod index;
mod vocabulary;
pub mod words;

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::catalog::{Catalog, Tool};
use crate::config::DiscoveryTools;
use index::{Document, Index, Source};
use words::Words;

/// How many tools a search answers with, unless it asks for another number (at most
/// [`MAX_RESULTS`]).
pub const DEFAULT_RESULTS: usize = 5;
pub const MAX_RESULTS: usize = 20;
/// The longest query read, in bytes: a request in words, not a document.
pub const MAX_QUERY_BYTES: usize = 1000;
/// How deep the input schema's objects are read for field names.
const SCHEMA_DEPTH: usize = 3;

/// The search over one catalog, built with it.
#[derive(Debug)]
pub struct ToolSearch {
    words: Words,
    index: Index,
    /// The two tools' names.
    names: DiscoveryTools,
    /// The two tools' definitions, as `tools/list` shows them.
    definitions: Vec<Box<RawValue>>,
}

/// A search's arguments, checked.
#[derive(Debug, PartialEq)]
pub struct Query<'a> {
    pub text: &'a str,
    pub service: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub limit: usize,
}

impl ToolSearch {
    /// The search over `catalog`'s tools, in its order, behind tools of these `names`.
    pub fn build(catalog: &Catalog, names: &DiscoveryTools) -> Self {
        let words = Words::default();
        let read: Vec<ToolWords> = catalog.tools().map(|tool| tool_words(&words, tool)).collect();
        let common = common_messages(&read);
        let documents = read.into_iter().map(|tool| tool.document(&common)).collect();
        ToolSearch {
            index: Index::new(documents),
            definitions: definitions(names),
            names: names.clone(),
            words,
        }
    }

    /// The two tools' names.
    pub fn names(&self) -> &DiscoveryTools {
        &self.names
    }

    /// The definitions `tools/list` shows in search mode.
    pub fn definitions(&self) -> impl Iterator<Item = &RawValue> {
        self.definitions.iter().map(AsRef::as_ref)
    }

    /// The tools that best match `query`, best first, among those `visible` lets the caller
    /// see: their definitions, as a `structuredContent` object's JSON text.
    pub fn answer(&self, catalog: &Catalog, query: &Query<'_>, visible: impl Fn(&Tool) -> bool) -> String {
        let admits = |number: usize| {
            catalog.tool_at(number).is_some_and(|tool| {
                visible(tool)
                    && query.service.is_none_or(|service| names_service(tool, service))
                    && query.kind.is_none_or(|kind| tool.kind.label() == kind)
            })
        };
        let found: Vec<&Tool> = self
            .index
            .best(&self.words, query.text, query.limit, admits)
            .into_iter()
            .filter_map(|(number, _)| catalog.tool_at(number).map(AsRef::as_ref))
            .collect();
        let mut json = String::from(r#"{"tools":["#);
        for (position, tool) in found.iter().enumerate() {
            if position > 0 {
                json.push(',');
            }
            json.push_str(tool.definition.get());
        }
        json.push_str("]}");
        json
    }

    /// The stems held and the entries of their lists.
    pub fn size(&self) -> (usize, usize) {
        self.index.size()
    }
}

/// Whether `service` names the tool's service: its full name, or its own name, in any case.
fn names_service(tool: &Tool, service: &str) -> bool {
    let full = tool.service_name();
    let short = full.rsplit('.').next().unwrap_or(full);
    full.eq_ignore_ascii_case(service) || short.eq_ignore_ascii_case(service)
}

impl<'a> Query<'a> {
    /// A search's arguments, or what is wrong with them (as an argument error's words).
    pub fn read(arguments: &'a Value) -> Result<Self, String> {
        let Some(arguments) = arguments.as_object() else {
            return Err("the arguments must be an object".into());
        };
        if let Some(unknown) = arguments
            .keys()
            .find(|key| !["query", "service", "kind", "limit"].contains(&key.as_str()))
        {
            return Err(format!(
                "unknown argument `{unknown}`; a search takes query, service, kind and limit"
            ));
        }
        let text = match arguments.get("query") {
            Some(Value::String(text)) if !text.trim().is_empty() => text.as_str(),
            Some(Value::String(_)) | None => {
                return Err("`query` is required: say in words what the tool should do".into())
            }
            Some(_) => return Err("`query` must be a string".into()),
        };
        if text.len() > MAX_QUERY_BYTES {
            return Err(format!(
                "`query` has {} bytes; a query is at most {MAX_QUERY_BYTES}",
                text.len()
            ));
        }
        let text_argument = |name: &str| match arguments.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.as_str())),
            Some(_) => Err(format!("`{name}` must be a string")),
        };
        let service = text_argument("service")?;
        let kind = text_argument("kind")?;
        if let Some(kind) = kind.filter(|kind| !KINDS.contains(kind)) {
            return Err(format!("`kind` {kind:?} is not one of {}", KINDS.join(", ")));
        }
        let limit = match arguments.get("limit") {
            None | Some(Value::Null) => DEFAULT_RESULTS,
            Some(limit) => match limit.as_u64().and_then(|limit| usize::try_from(limit).ok()) {
                Some(limit) if (1..=MAX_RESULTS).contains(&limit) => limit,
                _ => return Err(format!("`limit` must be a whole number from 1 to {MAX_RESULTS}")),
            },
        };
        Ok(Query {
            text,
            service,
            kind,
            limit,
        })
    }
}

/// The kinds a search can keep to, as [`crate::streams::CallKind::label`] writes them.
const KINDS: [&str; 4] = [
    "unary",
    "server-streaming",
    "client-streaming",
    "bidirectional-streaming",
];

/// A tool's words as read from its definition, before the catalog is read whole: its own (its
/// names, title, description, the request's fields and the output's), and apart from them those
/// of each message its request carries, known by [`message_identity`].
struct ToolWords {
    own: Document,
    carried: Vec<(u64, Document)>,
}

impl ToolWords {
    /// The tool's document: its own words, and those of the messages it carries but for the
    /// `common` ones.
    fn document(self, common: &HashSet<u64>) -> Document {
        let ToolWords { mut own, carried } = self;
        for (_, words) in carried.into_iter().filter(|(message, _)| !common.contains(message)) {
            own.absorb(words);
        }
        own
    }
}

/// The messages more than half the catalog's tools carry in their requests, when it has tools
/// to tell apart (Gitaly's `Repository`). Their fields and comments would be in most tools and
/// tell none from another, and the words they bring would lose their weight for the few tools
/// whose job they name: a `Repository`'s comments speak of searching, objects, projects and
/// paths.
fn common_messages(tools: &[ToolWords]) -> HashSet<u64> {
    let mut carriers: HashMap<u64, usize> = HashMap::new();
    for tool in tools {
        let mut messages: Vec<u64> = tool.carried.iter().map(|(message, _)| *message).collect();
        messages.sort_unstable();
        messages.dedup();
        for message in messages {
            *carriers.entry(message).or_default() += 1;
        }
    }
    carriers
        .into_iter()
        .filter(|&(_, count)| count > 1 && count * 2 > tools.len())
        .map(|(message, _)| message)
        .collect()
}

/// A message as every tool's schema writes it, whatever the comment of the field that holds
/// it: the hash of its fields (their names, comments and schemas).
fn message_identity(fields: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    fields.hash(&mut hasher);
    hasher.finish()
}

/// A tool's words, from its definition (what an agent would read) and its method's names.
fn tool_words(words: &Words, tool: &Tool) -> ToolWords {
    let mut own = Document::default();
    let mut carried = Vec::new();
    own.add(words, Source::Name, tool.method_name());
    if !tool.name.contains(tool.method_name()) {
        own.add(words, Source::Name, &tool.name);
    }
    let service = tool.method.parent_service();
    own.add(words, Source::Service, service.name());
    own.add(words, Source::Package, service.package_name());
    let definition = tool.definition_value();
    if let Some(title) = definition.get("title").and_then(Value::as_str) {
        own.add(words, Source::Title, title);
    }
    if let Some(description) = definition.get("description").and_then(Value::as_str) {
        own.add(words, Source::Description, description);
    }
    if let Some(input) = definition.get("inputSchema") {
        let input_words = SchemaWords {
            names: Source::InputField,
            text: Source::InputText,
        };
        input_words.read(words, &mut own, &mut carried, input, SCHEMA_DEPTH);
        if let Some(Value::Object(definitions)) = input.get("$defs") {
            for schema in definitions.values() {
                if let Some(fields) = schema.get("properties") {
                    input_words.carry(words, &mut carried, schema, fields, 1);
                }
            }
        }
    }
    if let Some(output) = definition.get("outputSchema") {
        let output_words = SchemaWords {
            names: Source::OutputField,
            text: Source::OutputField,
        };
        output_words.read(words, &mut own, &mut carried, output, 1);
    }
    ToolWords { own, carried }
}

/// The sources a JSON Schema's field names and comments are read as.
struct SchemaWords {
    names: Source,
    text: Source,
}

impl SchemaWords {
    /// The field names, comments and enum values of `schema`, `depth` objects deep, into
    /// `document`; the words of a message a field holds go to `carried`, apart, under its
    /// identity (the field's own name and comment stay in `document`).
    fn read(
        &self,
        words: &Words,
        document: &mut Document,
        carried: &mut Vec<(u64, Document)>,
        schema: &Value,
        depth: usize,
    ) {
        if depth == 0 {
            return;
        }
        if let Some(Value::Array(values)) = schema.get("enum") {
            for value in values.iter().filter_map(Value::as_str) {
                document.add(words, self.text, value);
            }
        }
        if let Some(items) = schema.get("items") {
            self.read(words, document, carried, items, depth);
        }
        for combined in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = schema.get(combined) {
                for option in options {
                    self.read(words, document, carried, option, depth);
                }
            }
        }
        let Some(Value::Object(properties)) = schema.get("properties") else {
            return;
        };
        for (name, property) in properties {
            document.add(words, self.names, name);
            if let Some(description) = property.get("description").and_then(Value::as_str) {
                document.add(words, self.text, description);
            }
            let held = property.get("items").unwrap_or(property);
            match held.get("properties") {
                Some(fields) if depth > 1 => self.carry(words, carried, held, fields, depth - 1),
                _ => self.read(words, document, carried, property, depth - 1),
            }
        }
    }

    /// The words of the message `schema` (whose fields are `fields`), `depth` objects deep,
    /// read apart and carried under its identity.
    fn carry(&self, words: &Words, carried: &mut Vec<(u64, Document)>, schema: &Value, fields: &Value, depth: usize) {
        let mut message = Document::default();
        self.read(words, &mut message, carried, schema, depth);
        carried.push((message_identity(fields), message));
    }
}

/// The two tools' definitions.
fn definitions(names: &DiscoveryTools) -> Vec<Box<RawValue>> {
    let DiscoveryTools { search, call } = names;
    let search = json!({
        "name": search,
        "title": "Search the tools",
        "description": format!("Finds the tools for a task among every tool this server offers. Say in words what you want to do \
            (\"delete keys in a range\", \"list the containers of a namespace\"); the answer lists the best-matching tools, \
            best first, each with its name, description and inputSchema. Then call one with {call}."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_BYTES,
                          "description": "What the tool should do, in words."},
                "service": {"type": "string",
                            "description": "Only tools of this gRPC service (its full name or its own name, e.g. \"KV\")."},
                "kind": {"type": "string", "enum": KINDS,
                         "description": "Only tools of this kind of method."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": DEFAULT_RESULTS,
                          "description": "How many tools to answer with."}
            },
            "required": ["query"],
            "additionalProperties": false
        },
        "outputSchema": {
            "type": "object",
            "properties": {"tools": {"type": "array", "items": {"type": "object"},
                                     "description": "The tools found, best first, as tools/list would show them."}},
            "required": ["tools"]
        },
        "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
    });
    let call = json!({
        "name": call,
        "title": "Call a tool",
        "description": format!("Calls a tool that {} found, with its arguments (which must match the tool's \
            inputSchema). The result is the tool's own.", names.search),
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "description": format!("The tool's name, as {} gave it.", names.search)},
                "arguments": {"type": "object", "description": "The tool's arguments."}
            },
            "required": ["name"],
            "additionalProperties": false
        }
    });
    // A `Value` always writes as JSON text.
    [search, call]
        .iter()
        .filter_map(|definition| serde_json::value::to_raw_value(definition).ok())
        .collect()
}

/// The arguments of a call tool's call: the tool's name and its arguments.
pub fn called<'a>(arguments: &'a Value, names: &DiscoveryTools) -> Result<(&'a str, Option<&'a Value>), String> {
    let Some(arguments) = arguments.as_object() else {
        return Err("the arguments must be an object".into());
    };
    if let Some(unknown) = arguments
        .keys()
        .find(|key| !["name", "arguments"].contains(&key.as_str()))
    {
        return Err(format!(
            "unknown argument `{unknown}`; {} takes name and arguments",
            names.call
        ));
    }
    match arguments.get("name") {
        Some(Value::String(name)) if !name.is_empty() => Ok((name, arguments.get("arguments"))),
        _ => Err(format!("`name` is required: the name of a tool {} found", names.search)),
    }
}

#[cfg(test)]
mod tests;
