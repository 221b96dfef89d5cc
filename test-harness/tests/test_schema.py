"""The schema is the contract: every field kind of the kitchen-sink service round-trips
through a real Envoy and the official Python SDK, every schema is valid JSON Schema 2020-12,
every response matches its outputSchema, and bad input is refused with a precise error and no
upstream call."""

from __future__ import annotations

import asyncio
import json
import subprocess

import jsonschema
import pytest
from mcp import Client

from mcp_client import Mcp
from processes import REPO, Envoy, Upstream

SERVICE = "test.kitchensink.v1.KitchenSinkService"


@pytest.fixture(scope="module")
def sink(upstream: Upstream):
    proxy = Envoy(upstream, {"services": {SERVICE: {"cluster": "demo_grpc"}}}, name="envoy-kitchen-sink").start()
    yield proxy
    proxy.stop()


@pytest.fixture
def mcp(sink: Envoy, upstream: Upstream) -> Mcp:
    upstream.reset()
    return Mcp(sink.mcp_url)


def scalars(**values) -> dict:
    """A Scalars message as the filter renders it: every field, defaults included."""
    defaults = {
        "a_double": 0, "a_float": 0, "an_int32": 0, "an_int64": "0", "a_uint32": 0, "a_uint64": "0",
        "a_sint32": 0, "a_sint64": "0", "a_fixed32": 0, "a_fixed64": "0", "an_sfixed32": 0, "an_sfixed64": "0",
        "a_bool": False, "a_string": "", "some_bytes": "",
    }
    return {**defaults, **values}


# Every field kind, already in the canonical form the filter renders, so the echo must be equal.
EVERYTHING = {
    "scalars": scalars(
        a_double=1.5, a_float=0.5, an_int32=-5, an_int64="-9007199254740993", a_uint32=4294967295,
        a_uint64="18446744073709551615", a_sint32=-2147483648, a_sint64="-9223372036854775808", a_fixed32=7,
        a_fixed64="8", an_sfixed32=-9, an_sfixed64="-10", a_bool=True, a_string="héllo ✓", some_bytes="AAEC/w==",
    ),
    "color": "COLOR_GREEN",
    "numbers": [1, -2, 3],
    "many": [scalars(an_int32=1), scalars(a_string="two")],
    "by_name": {"x": scalars(a_bool=True)},
    "by_id": {"-5": "negative", "9007199254740993": "big"},
    "flags": {"true": 1, "false": 0},
    "colors": {"0": "COLOR_UNSPECIFIED", "4294967295": "COLOR_GREEN"},
    "nested": scalars(a_fixed32=1),
    "maybe": 0,
    "must": "present",
    "at": "2026-01-31T12:00:00.250Z",
    "took": "-1.500s",
    "w_double": 0.25, "w_float": 1.5, "w_int64": "-7", "w_uint64": "7", "w_int32": -3, "w_uint32": 3,
    "w_bool": False, "w_string": "", "w_bytes": "AQI=",
    "a_struct": {"k": [1, "two", None, True, {"n": 1.5}]},
    "a_value": 42.5,
    "a_list": [1, "a", None],
    "mask": "name,price.amount",
    "nothing": {},
    "anything": {"@type": "type.googleapis.com/test.kitchensink.v1.Tree", "label": "packed", "children": []},
    "renamed": "r",
    "old": 1,
    "tree": {"label": "root", "children": [{"label": "kid", "children": []}],
             "forest": {"trees": [{"label": "deep", "children": []}]}},
    "legacy": {"id": "L1", "count": 7, "level": "LEVEL_HIGH"},
}


async def _echo(url: str, mode: str, arguments: dict):
    async with Client(url, mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        return tools, await client.call_tool("KitchenSinkService_Echo", arguments)


def test_every_schema_is_valid_json_schema_2020_12(mcp: Mcp) -> None:
    tools = mcp.tools()
    assert list(tools) == ["KitchenSinkService_Echo", "KitchenSinkService_EchoTree", "KitchenSinkService_EchoTime", "KitchenSinkService_Ping"]
    for tool in tools.values():
        for key in ("inputSchema", "outputSchema"):
            jsonschema.Draft202012Validator.check_schema(tool[key])
            assert tool[key]["type"] == "object"
    assert tools["KitchenSinkService_Echo"]["inputSchema"]["required"] == ["must"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_every_field_kind_round_trips_through_the_python_sdk(sink: Envoy, upstream: Upstream, mode: str) -> None:
    upstream.reset()
    tools, result = asyncio.run(_echo(sink.mcp_url, mode, EVERYTHING))
    assert result.is_error is False, result.content
    assert result.structured_content == EVERYTHING
    jsonschema.validate(EVERYTHING, tools["KitchenSinkService_Echo"].input_schema)
    jsonschema.validate(result.structured_content, tools["KitchenSinkService_Echo"].output_schema)
    assert upstream.calls() == {f"/{SERVICE}/Echo": 1}


def test_input_is_tolerant_where_proto3_json_is(mcp: Mcp) -> None:
    """JSON names, numbers for 64-bit integers, and an alias all come back in canonical form."""
    result = mcp.call_tool("KitchenSinkService_Echo", {
        "must": "m", "alias": "via json_name", "scalars": {"anInt64": 42, "aUint64": 7, "aDouble": "Infinity"},
        "color": "COLOR_GREEN", "took": "2s",
    })
    content = result["structuredContent"]
    assert content["renamed"] == "via json_name"
    assert (content["scalars"]["an_int64"], content["scalars"]["a_uint64"]) == ("42", "7")
    assert content["scalars"]["a_double"] == "Infinity"
    assert content["took"] == "2s"
    jsonschema.validate(content, mcp.tools()["KitchenSinkService_Echo"]["outputSchema"])


def test_recursion_round_trips_and_its_schema_terminates(mcp: Mcp) -> None:
    tree: dict = {"label": "leaf", "children": []}
    for depth in range(30):
        tree = {"label": f"level {depth}", "children": [tree], "forest": {"trees": [{"label": "side", "children": []}]}}
    result = mcp.call_tool("KitchenSinkService_EchoTree", tree)
    assert result["structuredContent"] == tree
    schema = mcp.tools()["KitchenSinkService_EchoTree"]["outputSchema"]
    assert set(schema["$defs"]) == {"test.kitchensink.v1.Tree", "test.kitchensink.v1.Forest"}
    jsonschema.validate(tree, schema)


def test_non_object_roots_are_wrapped(mcp: Mcp) -> None:
    result = mcp.call_tool("KitchenSinkService_EchoTime", {"at": "2026-01-31T12:00:00Z"})
    assert result["structuredContent"] == {"value": "2026-01-31T12:00:00Z"}
    jsonschema.validate(result["structuredContent"], mcp.tools()["KitchenSinkService_EchoTime"]["outputSchema"])
    assert mcp.call_tool("KitchenSinkService_Ping", {})["structuredContent"] == {}


INT32 = "a 32-bit integer from -2147483648 to 2147483647"
INT64 = 'a 64-bit integer, as a decimal string such as "-42" (or a JSON integer)'
BAD_INPUTS = [
    ({"nope": 1}, "unknown field `nope`; test.kitchensink.v1.Everything has: scalars, color, numbers, many, by_name, "),
    ({"scalars": {"an_int32": "x"}}, f'at `scalars.an_int32`: expected {INT32}, got "x"'),
    ({"scalars": {"an_int32": 2147483648}}, f"at `scalars.an_int32`: expected {INT32}, got 2147483648 (out of range)"),
    ({"scalars": {"an_int32": 1.5}}, f"at `scalars.an_int32`: expected {INT32}, got 1.5 (not an integer)"),
    ({"scalars": {"a_uint32": -1}}, "at `scalars.a_uint32`: expected an unsigned 32-bit integer from 0 to 4294967295, got -1 (out of range)"),
    ({"scalars": {"an_int64": "9223372036854775808"}}, f'at `scalars.an_int64`: expected {INT64}, got "9223372036854775808" (out of range)'),
    ({"scalars": {"an_int64": "12abc"}}, f'at `scalars.an_int64`: expected {INT64}, got "12abc"'),
    ({"scalars": {"a_bool": "true"}}, 'at `scalars.a_bool`: expected true or false, got "true"'),
    ({"scalars": {"a_double": "fast"}}, 'at `scalars.a_double`: expected a number (or "NaN", "Infinity", "-Infinity"), got "fast"'),
    ({"color": 7}, "at `color`: expected one of COLOR_UNSPECIFIED, COLOR_CRIMSON, COLOR_RED, COLOR_GREEN, got 7 (give the value's name, not its number)"),
    ({"color": "COLOR_BLUE"}, 'at `color`: expected one of COLOR_UNSPECIFIED, COLOR_CRIMSON, COLOR_RED, COLOR_GREEN, got "COLOR_BLUE"'),
    ({"scalars": {"some_bytes": "not base64!"}}, 'at `scalars.some_bytes`: expected base64-encoded bytes, got "not base64!"'),
    ({"at": "yesterday"}, 'at `at`: expected an RFC 3339 timestamp such as "2026-01-31T12:00:00Z", got "yesterday" (not an RFC 3339 date and time)'),
    ({"at": "2026-02-30T12:00:00Z"}, 'at `at`: expected an RFC 3339 timestamp such as "2026-01-31T12:00:00Z", got "2026-02-30T12:00:00Z" (not a valid date)'),
    ({"took": "5 minutes"}, 'at `took`: expected a duration in seconds such as "1.5s", got "5 minutes" (not a number of seconds followed by s)'),
    ({"text": "a", "number": "1"}, "`text`, `number` are all members of oneof `choice`; set at most one"),
    ({"anything": {"@type": "type.googleapis.com/acme.Unknown"}}, "at `anything`: expected an object with \"@type\" naming a known message, got {\"@type\":\"type.googleapis.com/acme.Un... (no message of that type is known here)"),
    ({"legacy": {"count": 1}}, "at `legacy`: missing required field `id`"),
    ({"by_id": {"one": "a"}}, f'at `by_id`: expected an object whose keys are {INT64}, got {{"one":"a"}}'),
    ({"flags": {"maybe": 1}}, 'at `flags`: expected an object whose keys are true or false, got {"maybe":1}'),
    ({"many": [{"an_int32": 1}, {"an_int32": "two"}]}, f'at `many[1].an_int32`: expected {INT32}, got "two"'),
    ({"tree": {"children": [{"children": [{"label": 5}]}]}}, "at `tree.children[0].children[0].label`: expected a string, got 5"),
    ({"numbers": "1,2,3"}, f'at `numbers`: expected a list, each element {INT32}, got "1,2,3"'),
    ({"mask": 5}, 'at `mask`: expected comma-separated field paths such as "name,price.amount", got 5'),
    ({"w_int32": "x"}, f'at `w_int32`: expected {INT32}, got "x"'),
    # What proto3 JSON parsers tolerate and the schema does not promise (see the JSON mapping).
    ({"scalars": {"an_int32": "7"}}, f'at `scalars.an_int32`: expected {INT32}, got "7"'),
    ({"scalars": {"an_int64": "007"}}, f'at `scalars.an_int64`: expected {INT64}, got "007"'),
    ({"scalars": {"a_double": "1.5"}}, 'at `scalars.a_double`: expected a number (or "NaN", "Infinity", "-Infinity"), got "1.5"'),
    ({"color": 2}, "at `color`: expected one of COLOR_UNSPECIFIED, COLOR_CRIMSON, COLOR_RED, COLOR_GREEN, got 2 (give the value's name, not its number)"),
    ({"scalars": None}, "at `scalars`: expected an object (test.kitchensink.v1.Scalars), got null (leave a field out to leave it unset)"),
    ({"alias": "a", "renamed": "b"}, "`alias` and `renamed` are the same field (renamed); give it once"),
    ({"took": "1.5"}, 'at `took`: expected a duration in seconds such as "1.5s", got "1.5"'),
]


@pytest.mark.parametrize(("arguments", "expected"), BAD_INPUTS, ids=[json.dumps(a)[:40] for a, _ in BAD_INPUTS])
def test_bad_input_gets_its_precise_error_and_no_upstream_call(mcp: Mcp, upstream: Upstream, arguments, expected) -> None:
    result = mcp.call_tool("KitchenSinkService_Echo", {"must": "x", **arguments})
    assert result["isError"] is True
    text = result["content"][0]["text"]
    prefix = "Invalid arguments for tool KitchenSinkService_Echo: "
    assert text.startswith(prefix + expected), text
    assert text.endswith(". The request was not sent; fix the arguments to match the tool's inputSchema.")
    assert upstream.total_calls() == 0


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"must":"x","must":"y"}', "duplicate key `must`"),
        ('{"must":"x","scalars":{"a_bool":true,"a_bool":false}}', "at `scalars`: duplicate key `a_bool`"),
        ('{}', "missing required field `must`"),
        ('"must"', "arguments must be a JSON object, got a string"),
        ('[{"must":"x"}]', "arguments must be a JSON object, got an array"),
    ],
)
def test_envelope_level_argument_errors(mcp: Mcp, upstream: Upstream, body: str, expected: str) -> None:
    raw = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"KitchenSinkService_Echo","arguments":%s}}' % body
    result = mcp.post(raw).json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(f"Invalid arguments for tool KitchenSinkService_Echo: {expected}.")
    assert upstream.total_calls() == 0


def test_the_typescript_sdk_accepts_the_recursive_schemas(sink: Envoy) -> None:
    run = subprocess.run(["node", "kitchen-sink.mjs", sink.mcp_url], cwd=REPO / "test-harness/clients/typescript",
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["echoedTree"]["isError"] is False
    assert seen["echoedTree"]["structuredContent"] == seen["tree"]
    echoed = seen["echoed"]["structuredContent"]
    assert (echoed["must"], echoed["tree"], echoed["a_value"]) == ("present", seen["tree"], [1, "two", None])
    assert echoed["scalars"]["an_int64"] == "-9007199254740993"
    assert seen["time"]["structuredContent"] == {"value": "2026-01-31T12:00:00Z"}
