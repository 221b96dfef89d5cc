"""An MCP client for tests that check exact answers: raw JSON-RPC over HTTP, with the
protocol versions the filter speaks.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import jsonschema

MODERN_VERSION = "2026-07-28"
SUPPORTED_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


def modern_meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "switchblade-tests", "version": "0"},
    }


def is_deadline_error(text: str, method: str, deadline_ms: int) -> bool:
    """A call that ran out of time. Envoy sends the deadline upstream as `grpc-timeout`, so two
    timers race: the filter's own, and the upstream's (tonic answers CANCELLED "Timeout
    expired"). Whichever wins, the tool reports DEADLINE_EXCEEDED with the deadline."""
    return text == f"{method} failed with gRPC status DEADLINE_EXCEEDED (4): no answer within the {deadline_ms} ms deadline"


class Mcp:
    """Raw JSON-RPC over HTTP to the filter, for tests that check exact answers."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx2.Client(timeout=10)
        self.next_id = 0
        self._output_schemas: dict[str, Any] | None = None

    def post(self, body: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
        content = body if isinstance(body, (bytes, str)) else json.dumps(body)
        all_headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        all_headers.update(headers or {})
        return self.http.post(self.url, content=content, headers=all_headers)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        response = self.post(message)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        body = response.json()
        assert body["id"] == self.next_id
        return body

    def modern(
        self, method: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None, id: Any = 1
    ) -> httpx2.Response:
        """A 2026-07-28 request with the `_meta` envelope and the SEP-2243 headers, which
        `headers` may override (a value of None drops a header)."""
        params = dict(params or {})
        params.setdefault("_meta", modern_meta())
        all_headers = {"mcp-protocol-version": MODERN_VERSION, "mcp-method": method}
        if method == "tools/call" and "name" in params:
            all_headers["mcp-name"] = params["name"]
        all_headers.update(headers or {})
        sent = {k: v for k, v in all_headers.items() if v is not None}
        return self.post({"jsonrpc": "2.0", "id": id, "method": method, "params": params}, headers=sent)

    def call_tool(self, name: str, arguments: Any) -> dict[str, Any]:
        """Calls a tool. Every successful result is checked against the tool's outputSchema,
        so every response an integration test sees honours the contract."""
        body = self.request("tools/call", {"name": name, "arguments": arguments})
        assert "result" in body, body
        result = body["result"]
        if result.get("isError") is False:
            schemas = self.output_schemas()
            assert name in schemas, f"{name} is not in tools/list"
            # Tool search's call_tool declares none: its result is the called tool's.
            if schemas[name] is not None:
                jsonschema.validate(result["structuredContent"], schemas[name])
        return result

    def output_schemas(self) -> dict[str, Any]:
        if self._output_schemas is None:
            self._output_schemas, cursor = {}, None
            while True:
                params = {"cursor": cursor} if cursor else {}
                page = self.request("tools/list", params)["result"]
                self._output_schemas.update({tool["name"]: tool.get("outputSchema") for tool in page["tools"]})
                cursor = page.get("nextCursor")
                if not cursor:
                    return self._output_schemas
        return self._output_schemas

    def tools(self) -> dict[str, dict[str, Any]]:
        return {tool["name"]: tool for tool in self.request("tools/list")["result"]["tools"]}
