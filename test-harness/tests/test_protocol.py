"""Every protocol rule of both MCP eras, checked with raw HTTP through a real Envoy."""

from __future__ import annotations

import base64
import json

import httpx2
import pytest

from mcp_client import MODERN_VERSION, SUPPORTED_VERSIONS, Mcp
from processes import Envoy, Upstream

LEGACY_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
SERVER_INFO = {"name": "switchblade-demo", "version": "0.1.0", "title": "Switchblade demo catalog"}


def rpc_error(response: httpx2.Response, status: int, code: int, id=None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] == id
    assert body["error"]["code"] == code, body
    return body["error"]


def accepted(response: httpx2.Response) -> None:
    assert response.status_code == 202, response.text
    assert response.content == b""


class TestLegacyEra:
    @pytest.mark.parametrize("version", LEGACY_VERSIONS)
    def test_initialize_echoes_a_supported_version(self, mcp: Mcp, version: str) -> None:
        response = mcp.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": version, "capabilities": {}}})
        assert response.json()["result"]["protocolVersion"] == version
        # A session id the filter keeps nothing for: it names the client's requests when it
        # cancels one (test_trust.py).
        assert len(response.headers["mcp-session-id"]) == 32

    def test_initialize_answers_the_latest_for_an_unknown_version(self, mcp: Mcp) -> None:
        result = mcp.request("initialize", {"protocolVersion": "2099-01-01", "capabilities": {}})["result"]
        assert result["protocolVersion"] == "2025-11-25"
        assert result["capabilities"] == {"tools": {"listChanged": False}}

    @pytest.mark.parametrize("version", LEGACY_VERSIONS)
    def test_every_legacy_version_header_is_served(self, mcp: Mcp, version: str) -> None:
        response = mcp.post(PING, headers={"mcp-protocol-version": version})
        assert response.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}

    @pytest.mark.parametrize("method", ["resources/list", "resources/read", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel", "server/discover"])
    def test_methods_not_served_are_method_not_found(self, mcp: Mcp, method: str) -> None:
        response = mcp.post({"jsonrpc": "2.0", "id": 3, "method": method, "params": {}}, headers={"mcp-protocol-version": "2025-11-25"})
        rpc_error(response, 200, -32601, id=3)

    def test_notifications_and_responses_get_202(self, mcp: Mcp) -> None:
        accepted(mcp.post({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        accepted(mcp.post({"jsonrpc": "2.0", "method": "notifications/no-such-thing"}, headers={"mcp-protocol-version": "2025-11-25"}))
        accepted(mcp.post({"jsonrpc": "2.0", "id": 5, "result": {}}))
        accepted(mcp.post({"jsonrpc": "2.0", "id": 5, "error": {"code": -1, "message": "no"}}))

    def test_results_have_no_modern_fields(self, mcp: Mcp) -> None:
        result = mcp.request("tools/list")["result"]
        assert set(result) == {"tools"}


class TestBatches:
    BATCH = [
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}},
        {"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "CatalogService_GetItem", "arguments": {"id": "99"}}},
        {"jsonrpc": "2.0", "id": "d", "method": "tools/call", "params": {"name": "UserService_GetUser", "arguments": {"user_id": "one"}}},
        {"jsonrpc": "2.0", "id": "e", "method": "nope"},
    ]

    @pytest.mark.parametrize("headers", [{}, {"mcp-protocol-version": "2025-03-26"}], ids=["no-version-header", "2025-03-26"])
    def test_2025_03_26_batches_are_answered_in_one_array(self, mcp: Mcp, upstream: Upstream, headers) -> None:
        response = mcp.post(self.BATCH, headers=headers)
        assert response.status_code == 200
        answers = response.json()
        assert [a["id"] for a in answers] == ["a", "b", "c", "d", "e"]
        assert answers[0]["result"] == {}
        assert answers[1]["result"]["structuredContent"]["username"] == "ada"
        assert "NOT_FOUND" in answers[2]["result"]["content"][0]["text"]
        assert answers[3]["result"]["isError"] is True
        assert answers[4]["error"]["code"] == -32601
        assert upstream.calls() == {"/demo.users.v1.UserService/GetUser": 1, "/demo.catalog.v1.CatalogService/GetItem": 1}

    def test_batches_of_notifications_get_202(self, mcp: Mcp) -> None:
        accepted(mcp.post([{"jsonrpc": "2.0", "method": "notifications/initialized"}]))

    @pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2024-11-05", MODERN_VERSION])
    def test_batches_are_refused_in_other_versions(self, mcp: Mcp, upstream: Upstream, version: str) -> None:
        response = mcp.post(self.BATCH, headers={"mcp-protocol-version": version})
        error = rpc_error(response, 400, -32600)
        assert "only allowed in protocol version 2025-03-26" in error["message"]
        assert upstream.total_calls() == 0

    def test_empty_batch_is_invalid(self, mcp: Mcp) -> None:
        rpc_error(mcp.post([]), 400, -32600)

    def test_initialize_may_not_be_batched(self, mcp: Mcp) -> None:
        answers = mcp.post([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}]).json()
        assert answers[0]["error"]["code"] == -32600


class TestHttpRules:
    def test_accept_must_allow_json(self, mcp: Mcp) -> None:
        rpc_error(mcp.post(PING, headers={"accept": "text/event-stream"}), 406, -32600)
        rpc_error(mcp.post(PING, headers={"accept": "text/html"}), 406, -32600)
        for accept in ["application/json", "*/*", "application/*", "text/event-stream, application/json;q=0.9"]:
            assert mcp.post(PING, headers={"accept": accept}).status_code == 200, accept

    def test_content_type_must_be_json(self, mcp: Mcp) -> None:
        rpc_error(mcp.post(json.dumps(PING), headers={"content-type": "text/plain"}), 415, -32600)
        rpc_error(mcp.post(json.dumps(PING), headers={"content-type": "application/x-www-form-urlencoded"}), 415, -32600)
        assert mcp.post(json.dumps(PING), headers={"content-type": "application/json; charset=utf-8"}).status_code == 200

    @pytest.mark.parametrize("version", [None, "2025-11-25", MODERN_VERSION])
    @pytest.mark.parametrize("method", ["GET", "DELETE"])
    def test_get_and_delete_are_405_in_every_era(self, envoy: Envoy, method: str, version) -> None:
        headers = {"mcp-protocol-version": version} if version else {}
        response = httpx2.request(method, envoy.mcp_url, headers=headers, timeout=5)
        assert response.status_code == 405
        assert response.headers["allow"] == "POST"


class TestModernEra:
    def test_server_discover(self, mcp: Mcp) -> None:
        response = mcp.modern("server/discover", id="d1")
        assert response.status_code == 200
        result = response.json()["result"]
        assert result == {
            "resultType": "complete",
            "supportedVersions": SUPPORTED_VERSIONS,
            "capabilities": {"tools": {}},
            "ttlMs": 300000,
            "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
            "instructions": result["instructions"],
        }

    def test_tools_list_has_cache_hints_and_identity(self, mcp: Mcp) -> None:
        result = mcp.modern("tools/list").json()["result"]
        assert [t["name"] for t in result["tools"]] == ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
        assert (result["ttlMs"], result["cacheScope"], result["resultType"]) == (300000, "public", "complete")
        assert result["_meta"] == {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
        assert mcp.modern("tools/list").json()["result"] == result, "deterministic"

    def test_tool_results_and_tool_errors_carry_result_type(self, mcp: Mcp) -> None:
        for arguments in ({"user_id": 1}, {"user_id": 404}, {"user_id": "x"}):
            result = mcp.modern("tools/call", {"name": "UserService_GetUser", "arguments": arguments}).json()["result"]
            assert result["resultType"] == "complete"
            assert result["_meta"] == {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
        assert result["isError"] is True

    @pytest.mark.parametrize(
        "meta",
        [None, {}, {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION}, {"io.modelcontextprotocol/clientCapabilities": {}}],
        ids=["no-meta", "empty-meta", "no-capabilities", "no-version"],
    )
    def test_required_meta_is_checked(self, mcp: Mcp, meta) -> None:
        params = {} if meta is None else {"_meta": meta}
        response = mcp.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": params},
                            headers={"mcp-protocol-version": MODERN_VERSION, "mcp-method": "tools/list"})
        rpc_error(response, 400, -32602, id=2)

    def test_unsupported_version_lists_the_supported_ones(self, mcp: Mcp) -> None:
        meta = {"io.modelcontextprotocol/protocolVersion": "2030-01-01", "io.modelcontextprotocol/clientCapabilities": {}}
        response = mcp.modern("tools/list", {"_meta": meta}, headers={"mcp-protocol-version": "2030-01-01"}, id=4)
        error = rpc_error(response, 400, -32022, id=4)
        assert error["data"] == {"supported": SUPPORTED_VERSIONS, "requested": "2030-01-01"}

    @pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "subscriptions/listen", "resources/list", "no/such"])
    def test_removed_and_unknown_methods_are_404(self, mcp: Mcp, method: str) -> None:
        rpc_error(mcp.modern(method, id=9), 404, -32601, id=9)

    def test_notifications_get_202_and_responses_400(self, mcp: Mcp) -> None:
        headers = {"mcp-protocol-version": MODERN_VERSION, "mcp-method": "notifications/cancelled"}
        accepted(mcp.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, headers=headers))
        rpc_error(mcp.post({"jsonrpc": "2.0", "id": 1, "result": {}}, headers={"mcp-protocol-version": MODERN_VERSION}), 400, -32600)


class TestSep2243Headers:
    CALL = {"name": "UserService_GetUser", "arguments": {"user_id": 1}}

    @pytest.mark.parametrize(
        ("headers", "message"),
        [
            ({"mcp-method": None}, "Mcp-Method header is missing"),
            ({"mcp-method": "tools/list"}, "Mcp-Method header \"tools/list\" does not match body method \"tools/call\""),
            ({"mcp-method": "Tools/Call"}, "does not match"),
            ({"mcp-name": None}, "Mcp-Name header is missing"),
            ({"mcp-name": "CatalogService_Search"}, "Mcp-Name header \"CatalogService_Search\" does not match body name \"UserService_GetUser\""),
            ({"mcp-name": "userservice_getuser"}, "does not match"),
            ({"mcp-name": "=?base64?not-base64?="}, "malformed"),
            ({"mcp-protocol-version": None}, "MCP-Protocol-Version header is missing"),
            ({"mcp-protocol-version": "2025-11-25"}, "does not match params._meta"),
        ],
    )
    def test_missing_or_mismatching_headers_are_refused_before_any_call(
        self, mcp: Mcp, upstream: Upstream, headers, message: str
    ) -> None:
        error = rpc_error(mcp.modern("tools/call", self.CALL, headers=headers, id=7), 400, -32020, id=7)
        assert message in error["message"]
        assert upstream.total_calls() == 0

    def test_a_base64_encoded_name_that_can_be_sent_plain_is_refused(self, mcp: Mcp, upstream: Upstream) -> None:
        """One spelling per name: an encoded alias would slip past a rule on the header in
        front of the filter (test_trust.py puts Envoy's RBAC there). Tool names are always
        plain, so the encoded form never names one."""
        encoded = "=?base64?" + base64.b64encode(b"UserService_GetUser").decode() + "?="
        response = mcp.modern("tools/call", self.CALL, headers={"mcp-name": encoded})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32020
        assert upstream.total_calls() == 0

    def test_duplicated_routing_header_is_refused(self, mcp: Mcp, upstream: Upstream) -> None:
        body = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {**self.CALL, "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}}}
        headers = [
            ("content-type", "application/json"),
            ("mcp-protocol-version", MODERN_VERSION),
            ("mcp-method", "tools/call"),
            ("mcp-name", "UserService_GetUser"),
            ("mcp-name", "CatalogService_Search"),
        ]
        response = mcp.http.post(mcp.url, content=json.dumps(body), headers=headers)
        error = rpc_error(response, 400, -32020, id=8)
        assert "appears more than once" in error["message"]
        assert upstream.total_calls() == 0

    def test_modern_body_without_version_header_is_a_mismatch(self, mcp: Mcp) -> None:
        response = mcp.modern("tools/list", headers={"mcp-protocol-version": None})
        rpc_error(response, 400, -32020, id=1)


class TestPagination:
    def _walk(self, mcp: Mcp, modern: bool) -> list[str]:
        names, cursor = [], None
        for _ in range(10):
            params = {"cursor": cursor} if cursor else {}
            if modern:
                result = mcp.modern("tools/list", params).json()["result"]
            else:
                result = mcp.request("tools/list", params)["result"]
            assert len(result["tools"]) == 1
            names += [t["name"] for t in result["tools"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                return names
        raise AssertionError("pagination did not end")

    @pytest.mark.parametrize("modern", [False, True], ids=["legacy", "modern"])
    def test_cursors_walk_the_list_in_a_stable_order(self, paged_envoy: Envoy, modern: bool) -> None:
        mcp = Mcp(paged_envoy.mcp_url)
        expected = ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
        assert self._walk(mcp, modern) == expected
        assert self._walk(mcp, modern) == expected

    @pytest.mark.parametrize("cursor", ["bogus", "", "MDAwMDAwMDAwMDAwMDAwMDo5", 42])
    def test_invalid_cursors_are_invalid_params(self, paged_envoy: Envoy, cursor) -> None:
        mcp = Mcp(paged_envoy.mcp_url)
        body = mcp.request("tools/list", {"cursor": cursor})
        assert body["error"]["code"] == -32602
        rpc_error(mcp.modern("tools/list", {"cursor": cursor}, id=3), 400, -32602, id=3)

    def test_a_cursor_from_another_configuration_is_refused(self, envoy: Envoy, paged_envoy: Envoy) -> None:
        cursor = Mcp(paged_envoy.mcp_url).request("tools/list")["result"]["nextCursor"]
        assert Mcp(envoy.mcp_url).request("tools/list", {"cursor": cursor})["error"]["code"] == -32602


class TestJsonRpcEdgeCases:
    @pytest.mark.parametrize("id", ["abc", "", 0, -5, 2**53])
    def test_string_and_integer_ids_are_echoed(self, mcp: Mcp, id) -> None:
        assert mcp.post({"jsonrpc": "2.0", "id": id, "method": "ping"}).json() == {"jsonrpc": "2.0", "id": id, "result": {}}

    @pytest.mark.parametrize("id", [None, 1.5, True, [1], {"a": 1}])
    def test_other_ids_are_invalid_requests(self, mcp: Mcp, id) -> None:
        rpc_error(mcp.post({"jsonrpc": "2.0", "id": id, "method": "ping"}), 400, -32600)

    @pytest.mark.parametrize("envelope", [{"id": 1, "method": "ping"}, {"jsonrpc": "1.0", "id": 1, "method": "ping"}, {"jsonrpc": 2, "id": 1, "method": "ping"}])
    def test_missing_or_wrong_jsonrpc_is_invalid_request(self, mcp: Mcp, envelope) -> None:
        rpc_error(mcp.post(envelope), 400, -32600, id=1)

    @pytest.mark.parametrize("params", [[], "x", 5, True])
    def test_params_of_the_wrong_type_are_invalid_params(self, mcp: Mcp, params) -> None:
        rpc_error(mcp.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}), 200, -32602, id=1)

    def test_method_of_the_wrong_type_is_invalid_request(self, mcp: Mcp) -> None:
        rpc_error(mcp.post({"jsonrpc": "2.0", "id": 1, "method": 5}), 400, -32600, id=1)

    def test_non_object_bodies_are_invalid_requests(self, mcp: Mcp) -> None:
        for body in ["5", '"ping"', "null", "true"]:
            rpc_error(mcp.post(body), 400, -32600)
