"""Interop: the official Python MCP SDK lists and calls the tools through Envoy."""

from __future__ import annotations

import asyncio

import jsonschema
from mcp import Client

from harness import Envoy, Upstream


async def _session(url: str) -> dict:
    async with Client(url, mode="legacy") as client:
        tools = (await client.list_tools()).tools
        item = await client.call_tool("CatalogService_GetItem", {"id": "3"})
        search = await client.call_tool("CatalogService_Search", {"query": "knife", "filters": {"in_stock_only": True}})
        injection = await client.call_tool("UserService_GetUser", {"user_id": {"$ne": None}})
        missing = await client.call_tool("UserService_GetUser", {"user_id": 404})
        return {"tools": tools, "item": item, "search": search, "injection": injection, "missing": missing}


def test_python_sdk_lists_and_calls_tools(envoy: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    seen = asyncio.run(_session(envoy.mcp_url))
    tools = {tool.name: tool for tool in seen["tools"]}
    assert set(tools) == {"CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"}

    item = seen["item"]
    assert item.is_error is False
    assert item.structured_content["name"] == "The Pragmatic Programmer"
    jsonschema.validate(item.structured_content, tools["CatalogService_GetItem"].output_schema)

    search = seen["search"]
    assert search.is_error is False
    assert [i["name"] for i in search.structured_content["items"]] == ["Switchblade multitool", "Pocket knife sharpener", "Trail knife"]
    jsonschema.validate(search.structured_content, tools["CatalogService_Search"].output_schema)

    assert seen["injection"].is_error is True
    assert "at `user_id`: invalid type: map" in seen["injection"].content[0].text
    assert seen["missing"].is_error is True
    assert "NOT_FOUND (5): no user has id 404" in seen["missing"].content[0].text

    # GetItem, Search and the missing GetUser reached the upstream; the injection did not.
    assert upstream.calls() == {
        "/demo.catalog.v1.CatalogService/GetItem": 1,
        "/demo.catalog.v1.CatalogService/Search": 1,
        "/demo.users.v1.UserService/GetUser": 1,
    }
