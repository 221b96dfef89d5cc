use super::*;

fn modern_headers(method: &str, name: Option<&str>) -> McpHeaders {
    McpHeaders {
        protocol_version: Some(MODERN_VERSION.into()),
        mcp_method: Some(method.into()),
        mcp_name: name.map(Into::into),
        ..McpHeaders::default()
    }
}

fn params(extra: Value) -> Map<String, Value> {
    let mut params = json!({"_meta": {PROTOCOL_VERSION_META: MODERN_VERSION, CLIENT_CAPABILITIES_META: {}}});
    if let (Value::Object(params), Value::Object(extra)) = (&mut params, extra) {
        params.extend(extra);
    }
    params.as_object().unwrap().clone()
}

#[test]
fn era_follows_the_version_header() {
    assert_eq!(Era::of(Some("2025-06-18"), false).unwrap(), Era::Legacy("2025-06-18"));
    assert_eq!(Era::of(Some("2026-07-28"), false).unwrap(), Era::Modern);
    assert_eq!(Era::of(None, false).unwrap(), Era::Legacy("2025-03-26"));
    assert_eq!(Era::of(None, true).unwrap(), Era::Modern);
    assert_eq!(
        Era::of(Some("2025-11-25"), true).unwrap(),
        Era::Modern,
        "the ladder reports the mismatch"
    );
    let error = Era::of(Some("1999-01-01"), false).unwrap_err();
    assert_eq!(error.code, UNSUPPORTED_PROTOCOL_VERSION);
    assert_eq!(
        *error.data.unwrap(),
        json!({"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"], "requested": "1999-01-01"})
    );
}

#[test]
fn status_codes_follow_the_reference_table() {
    assert_eq!(Era::Modern.error_status(crate::jsonrpc::METHOD_NOT_FOUND), 404);
    assert_eq!(Era::Modern.error_status(INVALID_PARAMS), 400);
    assert_eq!(Era::Modern.error_status(HEADER_MISMATCH), 400);
    assert_eq!(Era::Modern.error_status(-32603), 200);
    assert_eq!(
        Era::Legacy("2025-11-25").error_status(crate::jsonrpc::METHOD_NOT_FOUND),
        200
    );
    assert_eq!(Era::Legacy("2025-11-25").error_status(INVALID_PARAMS), 200);
    assert_eq!(Era::Legacy("2025-11-25").error_status(crate::jsonrpc::PARSE_ERROR), 400);
}

#[test]
fn modern_request_passes_when_headers_agree() {
    let headers = modern_headers("tools/call", Some("GetUser"));
    check_modern_request(&json!(1), "tools/call", &params(json!({"name": "GetUser"})), &headers).unwrap();
    let encoded = modern_headers("tools/call", Some("=?base64?SGVsbG8sIOS4lueVjA==?="));
    check_modern_request(
        &json!(1),
        "tools/call",
        &params(json!({"name": "Hello, 世界"})),
        &encoded,
    )
    .unwrap();
}

#[test]
fn modern_request_needs_the_envelope() {
    let headers = modern_headers("tools/list", None);
    let error = check_modern_request(&json!(1), "tools/list", &Map::new(), &headers).unwrap_err();
    assert_eq!(error.code, INVALID_PARAMS);
    let without_capabilities = json!({"_meta": {PROTOCOL_VERSION_META: MODERN_VERSION}});
    let error = check_modern_request(
        &json!(1),
        "tools/list",
        without_capabilities.as_object().unwrap(),
        &headers,
    )
    .unwrap_err();
    assert_eq!(
        error.message,
        format!("Invalid params: params._meta is missing {CLIENT_CAPABILITIES_META}")
    );
}

#[test]
fn modern_request_refuses_disagreeing_or_missing_headers() {
    let call = params(json!({"name": "GetUser"}));
    let cases = [
        (
            McpHeaders {
                protocol_version: None,
                ..modern_headers("tools/call", Some("GetUser"))
            },
            "MCP-Protocol-Version header is missing",
        ),
        (
            McpHeaders {
                protocol_version: Some("2025-11-25".into()),
                ..modern_headers("tools/call", Some("GetUser"))
            },
            "does not match params._meta",
        ),
        (
            modern_headers("tools/list", Some("GetUser")),
            "Mcp-Method header \"tools/list\" does not match",
        ),
        (
            McpHeaders {
                mcp_method: None,
                ..modern_headers("tools/call", Some("GetUser"))
            },
            "Mcp-Method header is missing",
        ),
        (modern_headers("tools/call", None), "Mcp-Name header is missing"),
        (
            modern_headers("tools/call", Some("DropTables")),
            "Mcp-Name header \"DropTables\" does not match body name \"GetUser\"",
        ),
        (modern_headers("tools/call", Some("=?base64?!!!?=")), "malformed"),
        (
            McpHeaders {
                duplicated: Some("mcp-name"),
                ..modern_headers("tools/call", Some("GetUser"))
            },
            "mcp-name header appears more than once",
        ),
    ];
    for (headers, expected) in cases {
        let error = check_modern_request(&json!(7), "tools/call", &call, &headers).unwrap_err();
        assert_eq!((error.code, error.id.clone()), (HEADER_MISMATCH, json!(7)));
        assert!(error.message.contains(expected), "{} !~ {expected}", error.message);
    }
}

#[test]
fn modern_request_with_another_version_in_both_places_is_unsupported() {
    let mut call = params(json!({}));
    call.insert(
        "_meta".into(),
        json!({PROTOCOL_VERSION_META: "2099-01-01", CLIENT_CAPABILITIES_META: {}}),
    );
    let headers = McpHeaders {
        protocol_version: Some("2099-01-01".into()),
        ..modern_headers("tools/list", None)
    };
    let error = check_modern_request(&json!(3), "tools/list", &call, &headers).unwrap_err();
    assert_eq!((error.code, error.id), (UNSUPPORTED_PROTOCOL_VERSION, json!(3)));
}

#[test]
fn header_values_decode_like_sep_2243() {
    let decoded = |value| decode_header_value(value).map(Cow::into_owned);
    assert_eq!(decoded("us-west1"), Ok("us-west1".into()));
    assert_eq!(decoded("=?base64?IHBhZGRlZCA=?="), Ok(" padded ".into()));
    assert_eq!(decoded("=?base64?SGVsbG8sIOS4lueVjA==?="), Ok("Hello, 世界".into()));
    assert_eq!(decoded("=?base64?bGluZTEKbGluZTI=?="), Ok("line1\nline2".into()));
    assert_eq!(
        decoded("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        Ok("=?base64?literal?=".into())
    );
    assert_eq!(decoded("=?base64?not base64?="), Err(HeaderValueError::Malformed));
    assert_eq!(
        decoded("=?base64?SGl=?="),
        Err(HeaderValueError::Malformed),
        "non-canonical padding bits"
    );
    assert_eq!(
        decoded("=?base64?/w==?="),
        Err(HeaderValueError::Malformed),
        "not UTF-8"
    );
    assert_eq!(decoded("=?base64?literal?="), Err(HeaderValueError::Malformed));
}

/// A value that can be sent plain has one spelling: its encoded alias would slip past a rule
/// on the header in front of the filter (Envoy's RBAC), so it is refused.
#[test]
fn a_value_that_can_be_sent_plain_is_refused_encoded() {
    for (encoded, plain) in [
        ("=?base64?Q2F0YWxvZ1NlcnZpY2VfR2V0SXRlbQ==?=", "CatalogService_GetItem"),
        ("=?base64?SGk=?=", "Hi"),
        ("=?base64?YSBi?=", "a b"),
        ("=?base64??=", ""),
    ] {
        assert_eq!(
            decode_header_value(encoded),
            Err(HeaderValueError::NeedlessEncoding(plain.into())),
            "{encoded}"
        );
    }
    for plain in [" padded", "trailing\t", "caf\u{e9}", "bell\u{7}", "=?base64?x?="] {
        assert!(!can_be_plain(plain), "{plain:?} needs the sentinel form");
    }
    assert_eq!(decode_header_value("caf\u{e9}"), Err(HeaderValueError::NotPlain));
    let headers = modern_headers("tools/call", Some("=?base64?R2V0VXNlcg==?="));
    let error =
        check_modern_request(&json!(1), "tools/call", &params(json!({"name": "GetUser"})), &headers).unwrap_err();
    assert_eq!(error.code, HEADER_MISMATCH);
    assert_eq!(
        error.message,
        "Header mismatch: the Mcp-Name header encodes \"GetUser\" as =?base64?...?=, which is only for values that cannot be sent plain; send Mcp-Name: GetUser"
    );
}

proptest::proptest! {
    /// Every value has one accepted spelling: plain where it can be, else the sentinel form,
    /// and the other spelling is refused.
    #[test]
    fn every_value_has_exactly_one_spelling(value in "\\PC{0,40}|[ -~]{0,40}") {
        let encoded = format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(&value));
        let plain_ok = decode_header_value(&value).ok().map(Cow::into_owned);
        let encoded_ok = decode_header_value(&encoded).ok().map(Cow::into_owned);
        match can_be_plain(&value) {
            true => {
                proptest::prop_assert_eq!(plain_ok, Some(value.clone()));
                proptest::prop_assert_eq!(encoded_ok, None);
            }
            false => {
                proptest::prop_assert_eq!(encoded_ok, Some(value.clone()));
                proptest::prop_assert!(plain_ok.as_deref() != Some(value.as_str()));
            }
        }
    }
}
