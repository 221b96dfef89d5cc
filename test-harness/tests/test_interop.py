"""Interop: the official MCP SDKs list and call the tools through Envoy, each in its own era."""

from __future__ import annotations

import asyncio
import json
import subprocess

import jsonschema
import pytest
from mcp import Client

import processes
from processes import REPO, Envoy, Upstream

TS_CLIENT = REPO / "test-harness/clients/typescript"


def test_free_port_never_picks_a_port_node_fetch_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Envoy once listened on 10080, which Node's fetch refuses ("bad port"): the TypeScript
    SDK failed before sending a byte."""
    probe = "for (const p of JSON.parse(process.argv[1])) { try { await fetch(`http://127.0.0.1:${p}/`); process.exit(1) } catch (e) { if (e.cause?.message !== 'bad port') process.exit(1) } }"
    listed = sorted(processes.FETCH_BAD_PORTS)
    run = subprocess.run(["node", "--input-type=module", "-e", probe, json.dumps(listed)], capture_output=True, timeout=30)
    assert run.returncode == 0, f"Node's fetch no longer refuses all of {listed}"
    picks = iter([*listed, 10001])
    monkeypatch.setattr(processes.random, "randrange", lambda *_: next(picks))
    monkeypatch.setattr(processes.socket.socket, "bind", lambda *_: None)
    monkeypatch.setattr(processes, "_handed_out", set())
    assert processes.free_port() == 10001


async def _python_session(url: str, mode: str) -> dict:
    async with Client(url, mode=mode) as client:
        tools = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        item = await client.call_tool("CatalogService_GetItem", {"id": "3"})
        search = await client.call_tool("CatalogService_Search", {"query": "knife", "filters": {"in_stock_only": True}})
        injection = await client.call_tool("UserService_GetUser", {"user_id": {"$ne": None}})
        missing = await client.call_tool("UserService_GetUser", {"user_id": 404})
        return {"tools": tools, "item": item, "search": search, "injection": injection, "missing": missing}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
@pytest.mark.parametrize("paged", [False, True], ids=["one-page", "paged"])
def test_python_sdk_lists_and_calls_tools(
    envoy: Envoy, paged_envoy: Envoy, upstream: Upstream, mode: str, paged: bool
) -> None:
    upstream.reset()
    seen = asyncio.run(_python_session((paged_envoy if paged else envoy).mcp_url, mode))
    tools = {tool.name: tool for tool in seen["tools"]}
    assert list(tools) == ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]

    item = seen["item"]
    assert item.is_error is False
    assert item.structured_content["name"] == "The Pragmatic Programmer"
    jsonschema.validate(item.structured_content, tools["CatalogService_GetItem"].output_schema)

    search = seen["search"]
    assert search.is_error is False
    assert [i["name"] for i in search.structured_content["items"]] == [
        "Switchblade multitool",
        "Pocket knife sharpener",
        "Trail knife",
    ]
    jsonschema.validate(search.structured_content, tools["CatalogService_Search"].output_schema)

    assert seen["injection"].is_error is True
    assert "at `user_id`: expected a 32-bit integer from -2147483648 to 2147483647, got {" in seen["injection"].content[0].text
    assert seen["missing"].is_error is True
    assert "NOT_FOUND (5): no user has id 404" in seen["missing"].content[0].text

    # GetItem, Search and the missing GetUser reached the upstream; the injection did not.
    assert upstream.calls() == {
        "/demo.catalog.v1.CatalogService/GetItem": 1,
        "/demo.catalog.v1.CatalogService/Search": 1,
        "/demo.users.v1.UserService/GetUser": 1,
    }


@pytest.mark.parametrize("paged", [False, True], ids=["one-page", "paged"])
def test_typescript_sdk_lists_and_calls_tools(envoy: Envoy, paged_envoy: Envoy, upstream: Upstream, paged: bool) -> None:
    upstream.reset()
    url = (paged_envoy if paged else envoy).mcp_url
    run = subprocess.run(
        ["node", "interop.mjs", url], cwd=TS_CLIENT, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["protocolVersion"] == "2025-11-25"
    assert seen["server"]["name"] == "switchblade-demo"
    assert seen["tools"] == ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
    assert seen["item"]["isError"] is False
    assert seen["item"]["structuredContent"]["name"] == "Camping stove"
    assert [i["id"] for i in seen["search"]["structuredContent"]["items"]] == ["3"]
    assert seen["injection"]["isError"] is True
    assert "at `user_id`: expected a 32-bit integer from -2147483648 to 2147483647, got {" in seen["injection"]["content"][0]["text"]
    assert seen["missing"]["isError"] is True
    assert "NOT_FOUND (5)" in seen["missing"]["content"][0]["text"]
    assert upstream.calls() == {
        "/demo.catalog.v1.CatalogService/GetItem": 1,
        "/demo.catalog.v1.CatalogService/Search": 1,
        "/demo.users.v1.UserService/GetUser": 1,
    }
