"""Callers cannot choose who they are: what a client writes into a request (an
`X-Forwarded-For`, an encoded alias of a tool's name, a request id, a progress token) never
makes it another caller, lets it past a rule in front of the filter, or costs the gateway more
than its bounds. Each test here failed before the fix it stands for."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from filter_build import demo_plugin
from mcp_client import Mcp
from processes import Envoy, Upstream, demo_config, http_filters

GET_ITEM = {"name": "CatalogService_GetItem", "arguments": {"id": "1"}}


def encoded(value: str) -> str:
    """SEP-2243's sentinel form of a header value."""
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def rbac_denying_tool(tool: str) -> dict[str, Any]:
    """Envoy's RBAC filter, denying 2026-07-28 calls of one tool by its `Mcp-Name` header: the
    rule the protocol's headers exist for."""
    return {
        "name": "envoy.filters.http.rbac",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC",
            "rules": {
                "action": "DENY",
                "policies": {
                    "no-get-item": {
                        "permissions": [{"header": {"name": "mcp-name", "string_match": {"exact": tool}}}],
                        "principals": [{"any": True}],
                    }
                },
            },
        },
    }


@pytest.fixture(scope="module")
def behind_rbac(upstream: Upstream):
    bootstrap = demo_config()
    http_filters(bootstrap).insert(0, rbac_denying_tool("CatalogService_GetItem"))
    proxy = Envoy(upstream, demo_plugin(), bootstrap=bootstrap, name="envoy-rbac").start()
    yield proxy
    proxy.stop()


def test_an_encoded_alias_of_a_plain_tool_name_does_not_slip_past_rbac(behind_rbac: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    mcp = Mcp(behind_rbac.mcp_url)
    # The plain name is what RBAC sees: denied in front of the filter.
    denied = mcp.modern("tools/call", GET_ITEM)
    assert (denied.status_code, denied.text) == (403, "RBAC: access denied")
    # Its encoded alias does not match the rule; the filter refuses it, as SEP-2243 has a value
    # that can be sent plain sent plain.
    alias = mcp.modern("tools/call", GET_ITEM, headers={"mcp-name": encoded("CatalogService_GetItem")})
    assert alias.status_code == 400, alias.text
    assert alias.json()["error"] == {
        "code": -32020,
        "message": "Header mismatch: the Mcp-Name header encodes \"CatalogService_GetItem\" as =?base64?...?=, "
                   "which is only for values that cannot be sent plain; send Mcp-Name: CatalogService_GetItem",
    }
    assert upstream.total_calls() == 0
    # Another tool passes RBAC and the filter, plain.
    allowed = mcp.modern("tools/call", {"name": "UserService_GetUser", "arguments": {"user_id": 1}})
    assert allowed.status_code == 200 and allowed.json()["result"]["isError"] is False, allowed.text

