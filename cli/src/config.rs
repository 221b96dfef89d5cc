//! `switchblade config`: the plugin configuration that exposes the services described by
//! `.proto` files, a descriptor set or a server's reflection, printed as bare JSON or in the
//! wiring of one of the flavours (see [`crate::formats`]).

use base64::Engine;
use prost::Message;
use serde_json::{json, Map, Value};
use switchblade_core::config::parse_selector;
use switchblade_core::server::Server;

use crate::formats::{self, Authentication, Format, Wiring};
use crate::{descriptor_sets, protos, reflection, Output};

mod args;

pub use args::{ConfigArgs, DiscoveryArg};

/// The configuration in the chosen format, with what was left out on standard error.
pub fn run(args: &ConfigArgs) -> Result<Output, String> {
    let descriptor_set = descriptors(args)?;
    let mut plugin = plugin_config(args, &descriptor_set)?;
    if args.format == Format::Module {
        // The module forwards a lone tools/call through the router when this is set; the
        // route that matches it is part of what `--format module` prints.
        plugin.insert("routing".into(), json!({"cluster_header": formats::ROUTING_HEADER}));
        // The module reads the token payload from filter state, where the bootstrap's
        // set_filter_state copies it (it cannot read jwt_authn's metadata object).
        if let Some(Value::Object(authorization)) = plugin.get_mut("authorization") {
            authorization.insert(
                "token_payload".into(),
                json!({"filter_state": formats::MODULE_TOKEN_PAYLOAD}),
            );
        }
    }
    let text = serde_json::to_string_pretty(&plugin).map_err(|error| error.to_string())?;
    // The filter's own checks, so a configuration printed here is one Envoy will accept.
    let server = Server::from_config_bytes(text.as_bytes())
        .map_err(|error| format!("the configuration would be refused: {error}"))?;
    let authentication = authentication(args, &server)?;
    let mut task_notes = Vec::new();
    if server.catalog().tools().any(|tool| tool.task.is_some()) {
        plugin.insert("tasks".into(), json!({"keys": [fresh_task_key()?]}));
        task_notes.push(
            "the services have task tools: tasks.keys holds a fresh random key that signs their task ids; \
             give every Envoy the same key (the same configuration), and keep it as secret as a credential"
                .to_owned(),
        );
    }
    let text = serde_json::to_string_pretty(&plugin).map_err(|error| error.to_string())?;
    let wiring = Wiring {
        plugin: &plugin,
        plugin_json: &text,
        wasm: &args.wasm,
        image: &args.image,
        authentication: authentication.as_ref(),
    };
    let mut notes = skipped_methods(args, &descriptor_set)?;
    if authentication.is_some() && matches!(args.format, Format::Istio | Format::EnvoyGateway) {
        notes.push(
            "--resource: this format carries the filter's authorization, not the token check; \
             configure the mesh's JWT authentication for the issuer, with the resource as the audience, \
             and have it leave the payload where `authorization.token_payload` says"
                .to_owned(),
        );
    }
    notes.extend(task_notes);
    if args.descriptor_set.is_some() && descriptor_sets::services_lack_comments(&descriptor_set) {
        notes.push(format!(
            "the descriptor set has no comments, so the tools have no descriptions; build it with them \
             (`buf build` keeps them; `{}`)",
            descriptor_sets::PROTOC_COMMAND
        ));
    }
    Ok(Output {
        stdout: formats::render(args.format, &wiring)?,
        notes,
        failed: false,
    })
}

/// What the bootstrap needs to check tokens, for an authenticated configuration.
fn authentication(args: &ConfigArgs, server: &Server) -> Result<Option<Authentication>, String> {
    let (Some(issuer), Some(resource)) = (
        args.authorization_servers.first(),
        server.access().and_then(|policy| policy.protected_resource()),
    ) else {
        return Ok(None);
    };
    let jwks_uri =
        match (&args.jwks_uri, args.format) {
            (Some(uri), _) => uri.clone(),
            (None, Format::Envoy | Format::Module) => {
                return Err(format!(
                "--resource with --format {}: give --jwks-uri, where jwt_authn fetches the signing keys of {issuer} \
                 (the `jwks_uri` of its /.well-known/openid-configuration or /.well-known/oauth-authorization-server)",
                if args.format == Format::Envoy { "envoy" } else { "module" }
            ))
            }
            (None, _) => String::new(),
        };
    Ok(Some(Authentication {
        issuer: issuer.clone(),
        audience: resource.resource().to_owned(),
        jwks_uri,
        metadata_url: resource.metadata_url().to_owned(),
    }))
}

/// The `authorization` section of an authenticated configuration: the rules the --scope flags
/// make, the protected resource metadata, and the caller's claims for the upstream.
fn authorization_section(args: &ConfigArgs) -> Option<Value> {
    let resource = args.resource.as_ref()?;
    let mut rules = Map::new();
    for (target, scope) in &args.scopes {
        if let Value::Array(scopes) = rules.entry(target.clone()).or_insert_with(|| json!([])) {
            if !scopes.contains(&json!(scope)) {
                scopes.push(json!(scope));
            }
        }
    }
    let unlisted = if rules.is_empty() { "allow" } else { "deny" };
    let mut section = json!({
        "rules": rules,
        "unlisted": unlisted,
        "resource_metadata": {"resource": resource, "authorization_servers": args.authorization_servers},
    });
    if !args.caller_metadata.is_empty() {
        let metadata: Map<String, Value> = args
            .caller_metadata
            .iter()
            // Header names are case-insensitive, and the filter takes them in lowercase.
            .map(|(name, claim)| (name.to_ascii_lowercase(), json!(claim)))
            .collect();
        section["caller_metadata"] = Value::Object(metadata);
    }
    Some(section)
}

/// 32 random bytes in base64: a key for `tasks.keys`.
fn fresh_task_key() -> Result<String, String> {
    let mut key = [0; 32];
    getrandom::fill(&mut key).map_err(|error| format!("cannot make a key for tasks.keys: {error}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(key))
}

/// The encoded descriptor set of the configuration, from whichever source the arguments name.
pub fn descriptors(args: &ConfigArgs) -> Result<Vec<u8>, String> {
    if let Some(path) = &args.descriptor_set {
        return descriptor_sets::read(path);
    }
    if let Some(address) = &args.reflect {
        let target = reflection::Target {
            address: address.clone(),
            tls: args.reflect_tls,
            ca: args.reflect_ca.clone(),
        };
        let services: Vec<String> = args.services.iter().map(|(service, _)| service.clone()).collect();
        return reflection::fetch(&target, &services).and_then(descriptor_sets::encode);
    }
    protos::compile(&args.protos, &args.includes)
}

/// The plugin configuration the arguments describe (checked by the filter afterwards).
pub fn plugin_config(args: &ConfigArgs, descriptor_set: &[u8]) -> Result<Map<String, Value>, String> {
    let owner_of = |selector: &str| parse_selector(selector).map(|(service, _)| service.to_owned());
    let is_service = |name: &str| args.services.iter().any(|(service, _)| service == name);
    let mut services = Map::new();
    for (service, cluster) in &args.services {
        if services.contains_key(service) {
            return Err(format!("--service {service} is given twice; give each service once"));
        }
        let selected: Vec<&String> = args
            .methods
            .iter()
            .filter(|selector| owner_of(selector).as_deref() == Some(service))
            .collect();
        let mut entry = json!({"cluster": cluster});
        if !selected.is_empty() {
            entry["expose"] = json!("selected");
            entry["methods"] = json!(selected);
        } else if args.streaming {
            entry["streaming"] = json!(true);
        }
        services.insert(service.clone(), entry);
    }
    let selectors = args
        .methods
        .iter()
        .map(|selector| ("--method", selector))
        .chain(args.tool_names.iter().map(|(selector, _)| ("--tool-name", selector)));
    for (flag, selector) in selectors {
        if !owner_of(selector).is_some_and(|owner| is_service(&owner)) {
            return Err(format!(
                "{flag} {selector}: not a method of any --service (write package.Service/Method)"
            ));
        }
    }
    let mut tools = Map::new();
    for (selector, name) in &args.tool_names {
        tools.insert(selector.clone(), json!({"name": name}));
    }
    for timeout in &args.timeouts {
        match &timeout.target {
            None => services
                .values_mut()
                .for_each(|service| service["timeout_ms"] = json!(timeout.ms)),
            Some(service) if is_service(service) => {
                if let Some(entry) = services.get_mut(service) {
                    entry["timeout_ms"] = json!(timeout.ms);
                }
            }
            Some(selector) if owner_of(selector).is_some_and(|owner| is_service(&owner)) => {
                let entry = tools.entry(selector.clone()).or_insert_with(|| json!({}));
                entry["timeout_ms"] = json!(timeout.ms);
            }
            Some(other) => {
                return Err(format!(
                    "--timeout-ms {other}=…: names no --service and no method of one"
                ))
            }
        }
    }
    for entry in &args.metadata {
        let metadata = match &entry.target {
            service if is_service(service) => services.get_mut(service),
            selector if owner_of(selector).is_some_and(|owner| is_service(&owner)) => {
                Some(tools.entry(selector.clone()).or_insert_with(|| json!({})))
            }
            other => return Err(format!("--metadata {other}:…: names no --service and no method of one")),
        };
        if let Some(Value::Object(target)) = metadata {
            let map = target.entry("metadata").or_insert_with(|| json!({}));
            if map.get(&entry.name).is_some() {
                return Err(format!(
                    "--metadata {}:{}: given twice; give each name once per target",
                    entry.target, entry.name
                ));
            }
            map[&entry.name] = json!(entry.value);
        }
    }
    let mut config = Map::new();
    if args.discovery == DiscoveryArg::Search {
        config.insert("discovery".into(), json!("search"));
    }
    config.insert(
        "descriptor_set".into(),
        json!(base64::engine::general_purpose::STANDARD.encode(descriptor_set)),
    );
    config.insert("services".into(), Value::Object(services));
    if !tools.is_empty() {
        config.insert("tools".into(), Value::Object(tools));
    }
    if !args.forward_headers.is_empty() {
        // Header names are case-insensitive, and the filter takes them in lowercase.
        let lowercase: Vec<String> = args
            .forward_headers
            .iter()
            .map(|name| name.to_ascii_lowercase())
            .collect();
        config.insert("forward_headers".into(), json!(lowercase));
    }
    if !args.allowed_origins.is_empty() {
        config.insert("allowed_origins".into(), json!(args.allowed_origins));
    }
    if let Some(authorization) = authorization_section(args) {
        config.insert("authorization".into(), authorization);
    }
    Ok(config)
}

/// One line per streaming method of a service exposed whole without `--streaming`: the filter
/// skips them, and a person should not have to find that out from `tools/list`.
fn skipped_methods(args: &ConfigArgs, descriptor_set: &[u8]) -> Result<Vec<String>, String> {
    if args.streaming {
        return Ok(Vec::new());
    }
    let set = prost_types::FileDescriptorSet::decode(descriptor_set).map_err(|error| error.to_string())?;
    let mut notes = Vec::new();
    for (service_name, _) in &args.services {
        let exposed_whole = !args
            .methods
            .iter()
            .any(|selector| parse_selector(selector).is_some_and(|(owner, _)| owner == service_name));
        if !exposed_whole {
            continue;
        }
        for file in &set.file {
            for service in &file.service {
                let full_name = match file.package() {
                    "" => service.name().to_owned(),
                    package => format!("{package}.{}", service.name()),
                };
                if &full_name != service_name {
                    continue;
                }
                for method in &service.method {
                    let kind = match (method.client_streaming(), method.server_streaming()) {
                        (false, false) => continue,
                        (true, false) => "client-streaming",
                        (false, true) => "server-streaming",
                        (true, true) => "bidirectional-streaming",
                    };
                    notes.push(format!(
                        "skipped {full_name}/{}: a {kind} method (add --streaming to expose streaming methods)",
                        method.name()
                    ));
                }
            }
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests;
