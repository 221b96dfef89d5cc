"""The vertical slice through a real Envoy: MCP (2025-11-25 era) at /mcp, tools from the
demo protos, strict arguments, gRPC calls to the demo upstream and back."""

from __future__ import annotations

import json

import httpx2
import jsonschema
import pytest

from mcp_client import Mcp
from processes import Envoy, Upstream

INIT_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "switchblade-tests", "version": "0"},
}


def structured(result: dict) -> dict:
    """A successful tool result's structured content, checked against its text block."""
    assert result["isError"] is False, result
    content = result["structuredContent"]
    assert result["content"] == [{"type": "text", "text": json.dumps(content, separators=(",", ":"))}] or json.loads(
        result["content"][0]["text"]
    ) == content
    return content


def error_text(result: dict) -> str:
    assert result["isError"] is True, result
    assert "structuredContent" not in result
    [block] = result["content"]
    assert block["type"] == "text"
    return block["text"]


def test_initialize_negotiates_and_introduces_the_server(mcp: Mcp) -> None:
    result = mcp.request("initialize", INIT_PARAMS)["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"] == {"name": "switchblade-demo", "version": "0.1.0", "title": "Switchblade demo catalog"}
    assert result["instructions"].startswith("Search the product catalog")
    older = mcp.request("initialize", {**INIT_PARAMS, "protocolVersion": "2024-11-05"})["result"]
    assert older["protocolVersion"] == "2024-11-05"


def test_notifications_get_202_and_no_body(mcp: Mcp) -> None:
    response = mcp.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert response.status_code == 202
    assert response.content == b""


def test_ping(mcp: Mcp) -> None:
    assert mcp.request("ping")["result"] == {}


def test_tools_list_has_unary_methods_only_with_valid_schemas(mcp: Mcp) -> None:
    tools = mcp.tools()
    assert list(tools) == ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
    assert "CatalogService_WatchItems" not in tools
    for tool in tools.values():
        for key in ("inputSchema", "outputSchema"):
            jsonschema.Draft202012Validator.check_schema(tool[key])
            assert tool[key]["type"] == "object"
        assert tool["annotations"]["readOnlyHint"] is True
    get_user = tools["UserService_GetUser"]
    assert get_user["description"].startswith("Fetch a user account by its numeric id.")
    assert get_user["inputSchema"]["properties"]["user_id"]["type"] == "integer"


def test_get_item_returns_structured_content_matching_the_output_schema(mcp: Mcp, upstream: Upstream) -> None:
    result = mcp.call_tool("CatalogService_GetItem", {"id": "1"})
    item = structured(result)
    assert item["id"] == "1"
    assert item["name"] == "Switchblade multitool"
    assert item["price"] == {"currency_code": "EUR", "amount_minor": "4999"}
    assert item["category"] == "CATEGORY_HARDWARE"
    assert item["attributes"] == {"sku": "SKU-0001"}
    assert item["updated_at"] == "2026-01-01T01:00:00Z"
    jsonschema.validate(item, mcp.tools()["CatalogService_GetItem"]["outputSchema"])
    assert upstream.calls() == {"/demo.catalog.v1.CatalogService/GetItem": 1}


def test_search_with_filters_and_paging(mcp: Mcp) -> None:
    schema = mcp.tools()["CatalogService_Search"]["outputSchema"]
    first = structured(mcp.call_tool("CatalogService_Search", {"query": "knife", "page_size": 1}))
    jsonschema.validate(first, schema)
    assert [i["name"] for i in first["items"]] == ["Switchblade multitool"]
    assert first["total_size"] == 3
    second = structured(
        mcp.call_tool("CatalogService_Search", {"query": "knife", "page_size": 1, "page_token": first["next_page_token"]})
    )
    assert [i["name"] for i in second["items"]] == ["Pocket knife sharpener"]
    outdoor = structured(
        mcp.call_tool("CatalogService_Search", {"filters": {"category": "CATEGORY_OUTDOOR", "in_stock_only": True}})
    )
    jsonschema.validate(outdoor, schema)
    assert [i["id"] for i in outdoor["items"]] == ["5"]
    assert outdoor["next_page_token"] == ""


def test_get_user_accepts_an_integer(mcp: Mcp) -> None:
    user = structured(mcp.call_tool("UserService_GetUser", {"user_id": 2}))
    assert user == {
        "user_id": 2,
        "username": "grace",
        "display_name": "Grace Hopper",
        "email": "grace@example.com",
        "state": "ACCOUNT_STATE_ACTIVE",
    }


def test_nosql_injection_is_refused_at_the_gate(mcp: Mcp, upstream: Upstream) -> None:
    text = error_text(mcp.call_tool("UserService_GetUser", {"user_id": {"$ne": None}}))
    assert text.startswith(
        "Invalid arguments for tool UserService_GetUser: at `user_id`: expected a 32-bit integer from -2147483648 to "
        '2147483647, got {"$ne":null}.'
    )
    assert "The request was not sent" in text
    assert upstream.total_calls() == 0


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("CatalogService_Search", {"query": "x", "where": "1=1"}, "unknown field `where`; demo.catalog.v1.SearchRequest has: query, filters, page_size, page_token"),
        ("CatalogService_Search", {"filters": {"category": "CATEGORY_NOPE"}}, "at `filters.category`: expected one of CATEGORY_UNSPECIFIED, CATEGORY_HARDWARE, CATEGORY_BOOKS, CATEGORY_OUTDOOR, got \"CATEGORY_NOPE\""),
        ("CatalogService_Search", {"page_size": "ten"}, "at `page_size`:"),
        ("CatalogService_Search", {"query": ["a"]}, 'at `query`: expected a string, got ["a"]'),
        ("CatalogService_GetItem", {"id": "1 OR 1=1"}, "at `id`:"),
        ("UserService_GetUser", {"user_id": 2**31}, "at `user_id`:"),
        ("UserService_GetUser", [1], "arguments must be a JSON object, got an array"),
    ],
)
def test_type_confusion_is_refused_with_the_path_and_no_upstream_call(
    mcp: Mcp, upstream: Upstream, tool: str, arguments: object, expected: str
) -> None:
    text = error_text(mcp.call_tool(tool, arguments))
    assert expected in text
    assert upstream.total_calls() == 0


def test_not_found_becomes_a_tool_error(mcp: Mcp, upstream: Upstream) -> None:
    text = error_text(mcp.call_tool("CatalogService_GetItem", {"id": "99"}))
    assert text == (
        "demo.catalog.v1.CatalogService/GetItem failed with gRPC status NOT_FOUND (5): no item has id 99\n"
        "- ResourceInfo: demo.catalog.v1.Item 99 (owner catalog): no such item"
    )
    assert upstream.calls() == {"/demo.catalog.v1.CatalogService/GetItem": 1}


def test_upstream_errors_carry_their_status_details(mcp: Mcp) -> None:
    text = error_text(mcp.call_tool("CatalogService_Search", {"page_size": 500}))
    assert text == (
        "demo.catalog.v1.CatalogService/Search failed with gRPC status INVALID_ARGUMENT (3): "
        "page_size must be between 1 and 50, got 500\n"
        "- ErrorInfo: reason PAGE_SIZE_OUT_OF_RANGE in domain catalog.demo (max=50)\n"
        "- BadRequest: field `page_size`: must be between 1 and 50, got 500"
    )


def test_unknown_tool_is_a_protocol_error(mcp: Mcp) -> None:
    body = mcp.request("tools/call", {"name": "DropTables", "arguments": {}})
    assert body["error"]["code"] == -32602
    assert "DropTables" in body["error"]["message"]


def test_unknown_method_is_method_not_found(mcp: Mcp) -> None:
    assert mcp.request("resources/list")["error"]["code"] == -32601


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe"])
def test_unparseable_bodies_get_400_parse_error(mcp: Mcp, body: bytes) -> None:
    response = mcp.post(body)
    assert response.status_code == 400
    assert response.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": response.json()["error"]["message"]}}
    assert response.json()["error"]["message"].startswith("Parse error")


def test_unsupported_protocol_version_header_gets_400(mcp: Mcp) -> None:
    response = mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"mcp-protocol-version": "1999-01-01"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
        "requested": "1999-01-01",
    }


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_other_methods_on_mcp_get_405_with_allow(envoy: Envoy, method: str) -> None:
    response = httpx2.request(method, envoy.mcp_url, timeout=5)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_other_paths_pass_through_to_the_router(envoy: Envoy, upstream: Upstream, mcp: Mcp) -> None:
    mcp.call_tool("UserService_GetUser", {"user_id": 1})
    # /calls is the upstream's own HTTP API, reached through Envoy's router, not the filter.
    response = httpx2.get(f"{envoy.url}/calls", timeout=5)
    assert response.status_code == 200
    assert response.json() == {"/demo.users.v1.UserService/GetUser": 1}
    assert httpx2.post(f"{envoy.url}/mcp-not", json={}, timeout=5).status_code == 404
