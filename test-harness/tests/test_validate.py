"""buf.validate rules at the gate, through a real Envoy: each rule family refuses what breaks
it with the rule, its limit and the value, in both protocol eras and through the official
Python SDK, and nothing refused reaches the upstream. The rules are in the input schema, as
keywords where JSON Schema has them and in words where it does not; CEL rules are shown, not
checked (and the load says so)."""

from __future__ import annotations

import asyncio

import jsonschema
import pytest
from mcp import Client

import filter_build
from mcp_client import Mcp
from processes import Envoy, Upstream, wait_until

SERVICE = "test.rules.v1.RulesService"
TOOL = "RulesService_PlaceOrder"
PREFIX = f"Invalid arguments for tool {TOOL}: "
SUFFIX = ". The request was not sent; fix the arguments to match the tool's inputSchema."
BASE = {"name": "ada", "phone": "+15551234"}

# An order that passes every rule. A 64-bit integer with number rules is offered as a JSON
# integer only (JSON Schema cannot compare decimal strings); answers write it as a string.
VALID = {
    **BASE,
    "email": "ada@example.com", "website": "https://example.com/a?b#c",
    "request_id": "8a9c1e0e-7b1f-4c1e-9f5e-0d2b6a3c4e5f", "host": "example.com", "client_ip": "::1",
    "sku": "SKU-1234", "tier": "pro", "endpoint": "example.com:443", "subnet": "10.0.0.0/8",
    "quantity": 100, "account": 14, "discount": 0.5, "port": 80, "weight": 1.5, "offset": -1,
    "batch": 20, "terms_accepted": True, "token": "AAECAw==", "raw_ip": "fwAAAQ==", "magic": "iVBORw==",
    "color": "COLOR_RED", "shade": "COLOR_GREEN", "tags": ["a", "b"], "limits": {"x": 0},
    "timeout": "30s", "not_before": "2001-01-01T00:00:00Z", "placed_at": "2020-01-01T00:00:00Z",
    "update_mask": "name,tags", "priority": 5, "ship_to": {"city": "Oslo", "country": "NO"}, "coupon": "C",
}

# One broken rule of each family, with the exact words of its refusal.
BROKEN = [
    ({"name": "ab"}, 'at `name`: must be at least 3 characters long (string.min_len = 3), got "ab"'),
    ({"name": "Ada"}, 'at `name`: must match the regular expression `^[a-z][a-z0-9_]*$` (string.pattern = "^[a-z][a-z0-9_]*$"), got "Ada"'),
    ({"email": "ada@"}, 'at `email`: must be an email address (string.email), got "ada@"'),
    ({"website": "example.com"}, 'at `website`: must be an absolute URI (string.uri), got "example.com"'),
    ({"request_id": "8a9c1e0e"}, 'at `request_id`: must be a UUID such as 8a9c1e0e-7b1f-4c1e-9f5e-0d2b6a3c4e5f (string.uuid), got "8a9c1e0e"'),
    ({"host": "-bad-.com"}, 'at `host`: must be a hostname (string.hostname), got "-bad-.com"'),
    ({"client_ip": "1.2.3"}, 'at `client_ip`: must be an IP address (string.ip), got "1.2.3"'),
    ({"endpoint": "example.com"}, 'at `endpoint`: must be a host (hostname or IP address) and port, such as example.com:443 (string.host_and_port), got "example.com"'),
    ({"subnet": "10.0.0.1/8"}, 'at `subnet`: must be an IPv4 prefix with no host bits set, such as 192.168.1.0/24 (string.ipv4_prefix), got "10.0.0.1/8"'),
    ({"sku": "SKU-12"}, 'at `sku`: must be exactly 8 characters long (string.len = 8), got "SKU-12"'),
    ({"sku": "ABC-1234"}, 'at `sku`: must start with "SKU-" (string.prefix = "SKU-"), got "ABC-1234"'),
    ({"tier": "gold"}, 'at `tier`: must be one of "free", "pro" (string.in = ["free", "pro"]), got "gold"'),
    ({"quantity": 0}, "at `quantity`: must be greater than 0 and less than or equal to 100 (int32.gt = 0, int32.lte = 100), got 0"),
    ({"account": "13"}, 'at `account`: must not be any of 0, 13 (int64.not_in = [0, 13]), got "13"'),
    ({"discount": 1}, "at `discount`: must be greater than or equal to 0 and less than 1 (double.gte = 0, double.lt = 1), got 1"),
    ({"port": 8080}, "at `port`: must be greater than 49151 or less than 1024 (uint32.gt = 49151, uint32.lt = 1024), got 8080"),
    ({"weight": "Infinity"}, 'at `weight`: must be a finite number (not NaN or an infinity) (float.finite), got "Infinity"'),
    ({"offset": 1}, "at `offset`: must be -1 (sint64.const = -1), got 1"),
    ({"batch": 30}, "at `batch`: must be one of 10, 20, 50 (fixed32.in = [10, 20, 50]), got 30"),
    ({"terms_accepted": False}, "at `terms_accepted`: must be true (bool.const = true), got false"),
    ({"token": "AAE="}, 'at `token`: must be at least 4 bytes long (bytes.min_len = 4), got "AAE="'),
    ({"raw_ip": "AAECAwQ="}, 'at `raw_ip`: must be the 4 bytes of an IPv4 address (bytes.ipv4), got "AAECAwQ="'),
    ({"magic": "AAAA"}, 'at `magic`: must start with "iVBORw==" (bytes.prefix = "iVBORw=="), got "AAAA"'),
    ({"color": "COLOR_BLUE"}, 'at `color`: must be one of "COLOR_RED", "COLOR_GREEN" (enum.in = ["COLOR_RED", "COLOR_GREEN"]), got "COLOR_BLUE"'),
    ({"shade": "COLOR_BLUE"}, 'at `shade`: must not be any of "COLOR_BLUE" (enum.not_in = ["COLOR_BLUE"]), got "COLOR_BLUE"'),
    ({"tags": ["a", "b", "a"]}, 'at `tags`: items must be unique (repeated.unique), got ["a","b","a"]'),
    ({"tags": ["a", "b", "c", "d"]}, 'at `tags`: must have at most 3 items (repeated.max_items = 3), got ["a","b","c","d"]'),
    ({"tags": ["a", ""]}, 'at `tags[1]`: must be at least 1 character long (string.min_len = 1), got ""'),
    ({"limits": {"a": 1, "b": 2, "c": 3}}, 'at `limits`: must have at most 2 pairs (map.max_pairs = 2), got {"a":1,"b":2,"c":3}'),
    ({"limits": {"A": 1}}, 'at `limits.A`: key: must match the regular expression `^[a-z]+$` (string.pattern = "^[a-z]+$"), got "A"'),
    ({"limits": {"a": -1}}, "at `limits.a`: must be greater than or equal to 0 (int32.gte = 0), got -1"),
    ({"timeout": "31s"}, 'at `timeout`: must be greater than "0s" and less than or equal to "30s" (duration.gt = "0s", duration.lte = "30s"), got "31s"'),
    ({"not_before": "1999-12-31T23:59:59Z"}, 'at `not_before`: must be greater than "2000-01-01T00:00:00Z" (timestamp.gt = "2000-01-01T00:00:00Z"), got "1999-12-31T23:59:59Z"'),
    ({"placed_at": "2999-01-01T00:00:00Z"}, 'at `placed_at`: must be in the past (timestamp.lt_now), got "2999-01-01T00:00:00Z"'),
    ({"update_mask": "name,color"}, 'at `update_mask`: may only hold the paths name, tags (or paths under them) (field_mask.in = ["name", "tags"]), got "name,color"'),
    ({"extra": {"@type": "type.googleapis.com/google.protobuf.Timestamp", "value": "2020-01-01T00:00:00Z"}},
     'at `extra`: must be a message of type type.googleapis.com/google.protobuf.Duration (any.in = ["type.googleapis.com/google.protobuf.Duration"]), got "@type": "type.googleapis.com/google.protobuf.Timestamp"'),
    ({"priority": 9}, "at `priority`: must be greater than or equal to 1 and less than or equal to 5 (int32.gte = 1, int32.lte = 5), got 9"),
    ({"ship_to": {"country": "NO"}}, 'at `ship_to.city`: must be at least 1 character long (string.min_len = 1), got nothing: a field left out holds its default, ""'),
    ({"coupon": "C", "gift_card": "G"}, "`coupon`, `gift_card` are all set; set at most one of the fields `coupon`, `gift_card` (message.oneof)"),
    ({"account_ids": ["7", 7]}, 'at `account_ids`: items must be unique (repeated.unique), got ["7",7]'),
    ({"blobs": ["AQI=", "AQI"]}, 'at `blobs`: items must be unique (repeated.unique), got ["AQI=","AQI"]'),
    ({"nickname": "a"}, 'at `nickname`: must be at least 2 characters long (string.min_len = 2), got "a"'),
    ({"phone": "555"}, 'at `phone`: must match the regular expression `^\\+[0-9]{6,15}$` (string.pattern = "^\\+[0-9]{6,15}$"), got "555"'),
]

# The fields whose broken rule above the input schema states too (the others are in words, or
# are formats Python's jsonschema checks only with extra packages).
SCHEMA_SAYS = {"name", "request_id", "tier", "quantity", "account", "discount", "port", "weight", "offset", "batch",
               "terms_accepted", "color", "shade", "tags", "limits", "priority", "ship_to", "nickname", "phone",
               "account_ids"}

# Rules a message as a whole breaks (the arguments replace BASE).
WHOLE = [
    ({"phone": "+15551234"}, "missing required field `name`"),
    ({"name": "ada"}, "one of `phone`, `pager` is required (oneof.required), got none"),
]


@pytest.fixture(scope="module")
def envoy(upstream: Upstream):
    proxy = Envoy(upstream, {"services": {SERVICE: {"cluster": "demo_grpc"}}}, name="envoy-validate").start()
    yield proxy
    proxy.stop()


@pytest.fixture
def mcp(envoy: Envoy, upstream: Upstream) -> Mcp:
    upstream.reset()
    return Mcp(envoy.mcp_url)


def call(mcp: Mcp, era: str, arguments: dict, tool: str = TOOL) -> dict:
    params = {"name": tool, "arguments": arguments}
    if era == "legacy":
        return mcp.call_tool(tool, arguments)
    body = mcp.modern("tools/call", params).json()
    assert "result" in body, body
    return body["result"]


def refusal(result: dict) -> str:
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    assert text.startswith(PREFIX) and text.endswith(SUFFIX), text
    return text[len(PREFIX):-len(SUFFIX)]


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_each_broken_rule_is_refused_with_its_words_and_never_sent(mcp: Mcp, upstream: Upstream, era: str) -> None:
    wrong = []
    for extra, expected in BROKEN:
        got = refusal(call(mcp, era, {**BASE, **extra}))
        if got != expected:
            wrong.append(f"{extra}:\n  got      {got}\n  expected {expected}")
    for arguments, expected in WHOLE:
        got = refusal(call(mcp, era, arguments))
        if got != expected:
            wrong.append(f"{arguments}:\n  got      {got}\n  expected {expected}")
    assert not wrong, "\n".join(wrong)
    assert upstream.total_calls() == 0


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_what_passes_every_rule_reaches_the_upstream_unchanged(mcp: Mcp, upstream: Upstream, era: str) -> None:
    result = call(mcp, era, VALID)
    assert result["isError"] is False, result
    echoed = result["structuredContent"]
    assert {key: echoed[key] for key in VALID} == {**VALID, "account": "14", "offset": "-1"}
    assert upstream.calls() == {f"/{SERVICE}/PlaceOrder": 1}


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_fields_left_out_hold_their_defaults_and_are_checked(mcp: Mcp, upstream: Upstream, era: str) -> None:
    tool = "RulesService_SetLevel"
    cases = [
        ({"items": ["x"], "color": "COLOR_RED"},
         "at `level`: must be greater than or equal to 1 (int32.gte = 1), got nothing: a field left out holds its default, 0"),
        ({"level": 1, "color": "COLOR_RED"},
         "at `items`: must have at least 1 item (repeated.min_items = 1), got nothing: a field left out is empty"),
        ({"level": 1, "items": ["x"], "color": "COLOR_UNSPECIFIED"},
         'at `color`: must be set to a value other than the default (required), got "COLOR_UNSPECIFIED"'),
    ]
    for arguments, expected in cases:
        text = call(mcp, era, arguments, tool)["content"][0]["text"]
        assert text == f"Invalid arguments for tool {tool}: {expected}{SUFFIX}"
    assert upstream.total_calls() == 0
    assert call(mcp, era, {"level": 1, "items": ["x"], "color": "COLOR_RED"}, tool)["isError"] is False
    assert upstream.total_calls() == 1


def test_the_input_schema_carries_the_rules_and_agrees_with_the_gate(mcp: Mcp) -> None:
    schema = mcp.tools()[TOOL]["inputSchema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    properties = schema["properties"]
    assert schema["required"] == ["name"]
    assert (properties["name"]["minLength"], properties["name"]["maxLength"]) == (3, 20)
    assert properties["email"]["format"] == "email"
    assert properties["quantity"]["exclusiveMinimum"] == 0 and properties["quantity"]["maximum"] == 100
    assert properties["tags"]["uniqueItems"] is True and properties["tags"]["maxItems"] == 3
    assert properties["color"]["enum"] == ["COLOR_RED", "COLOR_GREEN"]
    assert "Must start with \"SKU-\" (string.prefix = \"SKU-\")." in properties["sku"]["description"]
    assert "CEL `this != this.upperAscii()`, not checked by the gateway" in properties["note"]["description"]
    assert "Set exactly one of `phone`, `pager` (oneof.required)." in schema["description"]
    # The valid order fits the schema; every broken rule the schema can say is refused by it too.
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    validator.validate(VALID)
    for extra, _ in BROKEN:
        key = next(iter(extra))
        if key in SCHEMA_SAYS or extra == {"sku": "SKU-12"}:
            assert not validator.is_valid({**BASE, **extra}), extra


def test_without_the_cel_feature_cel_rules_pass_through_and_the_load_says_so(mcp: Mcp, upstream: Upstream, envoy: Envoy) -> None:
    # `note` must not be all capitals, in CEL: shown in the schema, not checked.
    assert mcp.call_tool(TOOL, {**BASE, "note": "HELLO"})["isError"] is False
    assert upstream.total_calls() == 1
    assert ("buf.validate CEL rules are shown in the tools' schemas but not checked by the gateway: "
            in envoy.logs())
    assert "test.rules.v1.Order.note (this != this.upperAscii())" in envoy.logs()


async def _sdk_call(url: str, mode: str, arguments: dict):
    async with Client(url, mode=mode) as client:
        return await client.call_tool(TOOL, arguments)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_python_sdk_gets_the_refusal_as_a_tool_error(envoy: Envoy, upstream: Upstream, mode: str) -> None:
    upstream.reset()
    result = asyncio.run(_sdk_call(envoy.mcp_url, mode, {**BASE, "quantity": 101}))
    assert result.is_error is True
    assert result.content[0].text == (
        PREFIX + "at `quantity`: must be greater than 0 and less than or equal to 100 (int32.gt = 0, int32.lte = 100), got 101" + SUFFIX
    )
    assert upstream.total_calls() == 0
    result = asyncio.run(_sdk_call(envoy.mcp_url, mode, {**BASE, "quantity": 100}))
    assert result.is_error is False and result.structured_content["quantity"] == 100


@pytest.mark.parametrize("api", ["full", "no-validate"])
def test_rules_read_through_live_reflection_are_enforced_the_same(envoy: Envoy, api: str) -> None:
    """Through reflection, from a server that serves buf/validate/validate.proto and from one
    that leaves it out (the filter then takes its own copy)."""
    server = Upstream(args=["--api", api]).start()
    plugin = {"services": {SERVICE: {"cluster": "demo_grpc", "from_reflection": True}}, "reflection": {"interval_ms": 1000}}
    reflected = Envoy(server, plugin, name=f"envoy-validate-reflected-{api}").start()
    try:
        mcp = Mcp(reflected.mcp_url)
        wait_until(lambda: TOOL in mcp.tools(), "the reflected rules service's tools")
        assert mcp.tools()[TOOL]["inputSchema"] == Mcp(envoy.mcp_url).tools()[TOOL]["inputSchema"]
        for extra, expected in BROKEN[:5]:
            assert refusal(call(mcp, "2026-07-28", {**BASE, **extra})) == expected
        assert server.total_calls() == 0
    finally:
        reflected.stop()
        server.stop()


def test_the_cel_build_enforces_cel_rules(upstream: Upstream) -> None:
    """The Wasm filter built with the `cel` feature (the module's build with it is linted and its
    core unit-tested: the feature changes the core alone)."""
    if filter_build.current().name != "wasm":
        pytest.skip("the cel build runs once, in the --build wasm session")
    build = filter_build.CEL_WASM
    filter_build.wait_for_cel_build()
    if not build.binary.exists():
        pytest.fail(f"{build.binary} is missing: scripts/test builds it (cargo build --features cel, into target/cel)")
    proxy = Envoy(upstream, {"services": {SERVICE: {"cluster": "demo_grpc"}}}, name="envoy-validate-cel",
                  build=build).start()
    try:
        mcp = Mcp(proxy.mcp_url)
        upstream.reset()
        for era in ("legacy", "2026-07-28"):
            assert refusal(call(mcp, era, {**BASE, "note": "HELLO"})) == (
                "at `note`: must not be all capitals (cel no_shouting: `this != this.upperAscii()`), got \"HELLO\"")
            assert refusal(call(mcp, era, {**BASE, "gift_card": "G"})) == (
                "a gift card order needs a note (cel gift_needs_note: `!has(this.gift_card) || this.note != ''`)")
        assert upstream.total_calls() == 0
        assert call(mcp, "2026-07-28", {**BASE, "gift_card": "G", "note": "for you"})["isError"] is False
        assert upstream.total_calls() == 1
        # Every standard rule holds the same in this build.
        for extra, expected in BROKEN:
            assert refusal(call(mcp, "legacy", {**BASE, **extra})) == expected
        description = mcp.tools()[TOOL]["inputSchema"]["properties"]["note"]["description"]
        assert description.endswith(" Rule `no_shouting`: must not be all capitals (CEL `this != this.upperAscii()`).")
        assert "not checked by the gateway" not in proxy.logs()
    finally:
        proxy.stop()
