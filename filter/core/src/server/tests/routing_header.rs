use super::*;

fn routed() -> Server {
    let config = CONFIG.replacen('{', r#"{"routing": {"cluster_header": "x-switchblade-cluster"},"#, 1);
    Server::from_config_bytes(config.as_bytes()).unwrap()
}

#[test]
fn a_request_that_carries_it_is_refused_on_every_path() {
    let server = routed();
    for (path, content_type) in [
        ("/mcp", "application/json"),
        ("/pkg.S/M", "text/plain"),
        ("/mcp?x", "application/json"),
    ] {
        let mut observed = Observations::default();
        let mut asked = Vec::new();
        let refusal = server
            .refuse_routing_header(
                path,
                |name| {
                    asked.push(name.to_owned());
                    true
                },
                &mut observed,
            )
            .unwrap();
        assert_eq!(asked, ["x-switchblade-cluster"]);
        assert_eq!(refusal.status, 403);
        assert!(
            refusal.header_pairs().contains(&("content-type", content_type)),
            "{path}: {refusal:?}"
        );
        assert!(refusal.header_pairs().contains(&("grpc-status", "7")), "{refusal:?}");
        let text = String::from_utf8_lossy(&refusal.body);
        assert!(
            text.contains("Forbidden: the x-switchblade-cluster header is reserved"),
            "{text}"
        );
        assert_eq!(observed.refusal(), Some(Refusal::RoutingHeader));
    }
}

#[test]
fn a_request_without_it_and_a_server_without_routing_pass() {
    let mut observed = Observations::default();
    assert!(routed().refuse_routing_header("/x", |_| false, &mut observed).is_none());
    let mut asked = false;
    assert!(server()
        .refuse_routing_header(
            "/x",
            |_| {
                asked = true;
                true
            },
            &mut observed
        )
        .is_none());
    assert!(!asked, "no header to look for without `routing`");
    assert_eq!(observed.refusal(), None);
}
