"""envoy/auth.yaml: jwt_authn in front of Switchblade, which publishes the OAuth protected
resource metadata, authorizes each tool from the verified token's scopes in both protocol eras
and tells the upstream who the caller is, with signing keys generated here. Call counts prove
that nothing refused reaches the upstream."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import httpx2
import jwt
import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

import filter_build
from mcp_client import Mcp
from processes import REPO, Envoy, Upstream, http_filters

ISSUER = "https://auth.switchblade.example"
# The resource envoy/auth.yaml is written for (its listener's own URL). The test Envoys listen
# elsewhere and keep it, but for the one a real OAuth client reaches, which compares it with
# the URL it was given (`at_own_port`).
SHIPPED_ORIGIN = "http://127.0.0.1:10000"
AUDIENCE = f"{SHIPPED_ORIGIN}/mcp"
METADATA_URL = f"{SHIPPED_ORIGIN}/.well-known/oauth-protected-resource/mcp"


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def key():
    return new_key()


TS_CLIENT = REPO / "test-harness/clients/typescript"


def auth_bootstrap(key) -> dict:
    """envoy/auth.yaml, trusting the test's key."""
    bootstrap = yaml.safe_load((REPO / "envoy/auth.yaml").read_text())
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "test", "alg": "RS256"})
    jwt_authn(bootstrap)["providers"]["demo"]["local_jwks"]["inline_string"] = json.dumps({"keys": [jwk]})
    return bootstrap


def jwt_authn(bootstrap: dict) -> dict:
    return next(f for f in http_filters(bootstrap) if f["name"] == "envoy.filters.http.jwt_authn")["typed_config"]


def at_own_port(proxy: Envoy) -> Envoy:
    """The shipped resource URL (in jwt_authn's audiences, the challenges and the plugin's
    `resource_metadata`) moved to the port this Envoy listens on, as a deployment writes its
    own."""
    text = yaml.safe_dump(proxy.config).replace(SHIPPED_ORIGIN, origin(proxy))
    proxy.config = yaml.safe_load(text)
    return proxy


def origin(proxy: Envoy) -> str:
    return f"http://127.0.0.1:{proxy.port}"


@pytest.fixture(scope="module")
def guarded(upstream: Upstream, key):
    proxy = Envoy(upstream, bootstrap=auth_bootstrap(key), name="envoy-auth").start()
    yield proxy
    proxy.stop()


@pytest.fixture
def mcp(guarded: Envoy, upstream: Upstream) -> Mcp:
    upstream.reset()
    return Mcp(guarded.mcp_url)


def token(key, scope: str = "", expires_in: int = 300, audience: str | list[str] = AUDIENCE, **claims) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": audience, "sub": "agent-7", "scope": scope, "iat": now, "exp": now + expires_in,
              **claims}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "test"})


def bearer(value: str) -> dict[str, str]:
    return {"authorization": f"Bearer {value}"}


GET_USER = {"name": "UserService_GetUser", "arguments": {"user_id": 1}}
ALL_TOOLS = ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
# The policy of envoy/auth.yaml: what each scope set may call.
VISIBLE = {
    "": [],
    "catalog:read": ["CatalogService_Search", "CatalogService_GetItem"],
    "users:read": ["UserService_GetUser"],
    "catalog:read users:read": ALL_TOOLS,
    "users:readonly catalog:write": [],
    # Scopes are separated by the ASCII space alone (RFC 6749): no other white space splits.
    "catalog:read\u00a0users:read": [],
    "catalog:read\tusers:read": [],
    "  catalog:read  ": ["CatalogService_Search", "CatalogService_GetItem"],
}


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-jwt", "expired", "wrong-key"])
def test_missing_and_invalid_tokens_are_401_and_reach_nothing(mcp: Mcp, upstream: Upstream, key, authorization) -> None:
    headers = {}
    if authorization == "expired":
        headers = bearer(token(key, "users:read", expires_in=-120))
    elif authorization == "wrong-key":
        headers = bearer(token(new_key(), "users:read"))
    elif authorization is not None:
        headers = {"authorization": authorization}
    response = mcp.modern("tools/call", GET_USER, headers=headers)
    assert response.status_code == 401, response.text
    # jwt_authn's refusal, its challenge rewritten by local_reply_config to name the metadata:
    # RFC 6750 gives no error code to a request that had no token at all.
    error = "" if authorization is None else 'error="invalid_token", '
    assert response.headers["www-authenticate"] == f'Bearer {error}resource_metadata="{METADATA_URL}"'
    assert upstream.total_calls() == 0


def test_a_token_for_another_audience_is_an_invalid_token(mcp: Mcp, upstream: Upstream, key) -> None:
    """jwt_authn refuses it with 403; the local reply mapping makes that the 401 invalid_token
    RFC 6750 and the MCP specification ask for, so that the client fetches a token for this
    resource."""
    for audience in ["someone-else", ["someone-else", "https://other.example/mcp"]]:
        response = mcp.modern("tools/call", GET_USER, headers=bearer(token(key, "users:read", audience=audience)))
        assert (response.status_code, response.text) == (401, "Audiences in Jwt are not allowed")
        assert response.headers["www-authenticate"] == f'Bearer error="invalid_token", resource_metadata="{METADATA_URL}"'
    assert upstream.total_calls() == 0


def test_switchblade_checks_the_audience_itself(upstream: Upstream, key) -> None:
    """With jwt_authn told no audiences (any token its keys signed passes), Switchblade still
    refuses a token not issued for the resource its metadata names, in both builds."""
    upstream.reset()
    bootstrap = auth_bootstrap(key)
    del jwt_authn(bootstrap)["providers"]["demo"]["audiences"]
    proxy = Envoy(upstream, bootstrap=bootstrap, name="envoy-auth-any-audience").start()
    try:
        mcp = Mcp(proxy.mcp_url)
        refused = mcp.modern("tools/call", GET_USER, headers=bearer(token(key, "users:read", audience="https://other.example/mcp")))
        assert refused.status_code == 401, refused.text
        assert refused.headers["www-authenticate"] == f'Bearer error="invalid_token", resource_metadata="{METADATA_URL}"'
        assert refused.json()["error"]["message"] == (
            'Unauthorized: the token was not issued for this server: its audience "https://other.example/mcp" does not '
            f'name {AUDIENCE}. Ask the authorization server for a token for this resource (RFC 8707 `resource`)')
        assert upstream.total_calls() == 0
        served = mcp.modern("tools/call", GET_USER, headers=bearer(token(key, "users:read", audience=["x", AUDIENCE])))
        assert served.json()["result"]["structuredContent"]["username"] == "ada", served.text
    finally:
        proxy.stop()


def test_the_protected_resource_metadata_is_served_to_anyone(guarded: Envoy, upstream: Upstream) -> None:
    """RFC 9728 at the path form and the root form, without a token (jwt_authn guards /mcp
    alone), readable by a browser client from any origin, and cacheable."""
    upstream.reset()
    expected = {
        "resource": AUDIENCE,
        "authorization_servers": [ISSUER],
        # By default, every scope the rules name.
        "scopes_supported": ["catalog:read", "users:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Switchblade demo catalog",
    }
    for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]:
        response = httpx2.get(f"{guarded.url}{path}", headers={"origin": "https://inspector.example"}, timeout=5)
        assert response.status_code == 200, response.text
        assert response.json() == expected
        assert response.headers["content-type"] == "application/json"
        assert response.headers["access-control-allow-origin"] == "*"
        assert response.headers["cache-control"] == "public, max-age=3600"
    preflight = httpx2.options(f"{guarded.url}/.well-known/oauth-protected-resource/mcp", headers={
        "origin": "https://inspector.example", "access-control-request-method": "GET",
        "access-control-request-headers": "mcp-protocol-version"}, timeout=5)
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-headers"] == "*"
    posted = httpx2.post(f"{guarded.url}/.well-known/oauth-protected-resource/mcp", timeout=5)
    assert (posted.status_code, posted.headers["allow"]) == (405, "GET, HEAD, OPTIONS")
    assert httpx2.get(f"{guarded.url}/.well-known/oauth-protected-resource/other", timeout=5).status_code != 200
    assert upstream.total_calls() == 0


def legacy_list(mcp: Mcp, headers: dict[str, str]) -> list[str]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = mcp.post(body, headers={**headers, "mcp-protocol-version": "2025-11-25"})
    assert response.status_code == 200, response.text
    return [tool["name"] for tool in response.json()["result"]["tools"]]


@pytest.mark.parametrize("scope", list(VISIBLE))
def test_each_caller_lists_only_the_tools_its_scopes_cover_in_both_eras(mcp: Mcp, upstream: Upstream, key, scope: str) -> None:
    headers = bearer(token(key, scope))
    modern = mcp.modern("tools/list", headers=headers)
    assert modern.status_code == 200, modern.text
    result = modern.json()["result"]
    assert [tool["name"] for tool in result["tools"]] == VISIBLE[scope]
    # The list depends on the caller: no shared cache may keep it.
    assert result["cacheScope"] == "private"
    assert legacy_list(mcp, headers) == VISIBLE[scope]
    assert upstream.total_calls() == 0


def test_a_hidden_tool_answers_exactly_like_an_unknown_one_and_reaches_nothing(mcp: Mcp, upstream: Upstream, key) -> None:
    headers = bearer(token(key, "catalog:read"))
    answers = {}
    for name in ["UserService_GetUser", "NoSuchTool"]:
        modern = mcp.modern("tools/call", {"name": name, "arguments": {"user_id": 1}}, id=7, headers=headers)
        legacy = mcp.post({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {"user_id": 1}}},
                          headers={**headers, "mcp-protocol-version": "2025-11-25"})
        answers[name] = [(r.status_code, r.text.replace(name, "NAME")) for r in (modern, legacy)]
    assert answers["UserService_GetUser"] == answers["NoSuchTool"]
    assert 'unknown tool \\"NAME\\"; call tools/list' in answers["NoSuchTool"][0][1]
    assert upstream.total_calls() == 0


def test_a_caller_calls_what_its_scopes_cover(mcp: Mcp, upstream: Upstream, key) -> None:
    response = mcp.modern("tools/call", GET_USER, headers=bearer(token(key, "users:read")))
    assert response.json()["result"]["structuredContent"]["username"] == "ada"
    assert upstream.calls() == {"/demo.users.v1.UserService/GetUser": 1}


def test_cursors_stay_valid_per_caller(guarded: Envoy, upstream: Upstream, key) -> None:
    """Pages of one tool: each caller walks its own list, and a cursor from another caller's
    list is refused like any foreign cursor."""
    upstream.reset()
    plugin = json.loads(filter_build.WasmBuild.plugin(auth_plugin_entry(auth_bootstrap(key))))
    plugin["tools_list"] = {"page_size": 1}
    paged = with_plugin(auth_bootstrap(key), plugin)
    proxy = Envoy(upstream, bootstrap=paged, name="envoy-auth-paged").start()
    try:
        mcp = Mcp(proxy.mcp_url)
        walked = {}
        first_cursor = {}
        for scope in ["catalog:read", "catalog:read users:read"]:
            headers = bearer(token(key, scope))
            names, cursor = [], None
            while True:
                params = {"cursor": cursor} if cursor else {}
                result = mcp.modern("tools/list", params, headers=headers).json()["result"]
                names += [tool["name"] for tool in result["tools"]]
                cursor = result.get("nextCursor")
                first_cursor.setdefault(scope, cursor)
                if not cursor:
                    break
            walked[scope] = names
        assert walked == {"catalog:read": VISIBLE["catalog:read"], "catalog:read users:read": ALL_TOOLS}
        foreign = mcp.modern("tools/list", {"cursor": first_cursor["catalog:read users:read"]}, headers=bearer(token(key, "users:read")))
        assert foreign.json()["error"]["code"] == -32602
    finally:
        proxy.stop()
    assert upstream.total_calls() == 0


def auth_plugin_entry(bootstrap: dict) -> dict:
    return next(f for f in http_filters(bootstrap) if f["name"] == "switchblade")["typed_config"]


def with_plugin(bootstrap: dict, plugin: dict) -> dict:
    auth_plugin_entry(bootstrap)["config"]["configuration"]["value"] = json.dumps(plugin)
    return bootstrap


def test_streaming_tools_are_hidden_and_refused_like_unary_ones(upstream: Upstream, key) -> None:
    """With `streaming: true`, WatchItems and ImportItems fall under the catalog's rule and Chat
    under no rule (`unlisted: deny`): a caller sees and calls only what its scopes cover, and a
    hidden stream reaches nothing."""
    upstream.reset()
    plugin = json.loads(filter_build.WasmBuild.plugin(auth_plugin_entry(auth_bootstrap(key))))
    for service in plugin["services"].values():
        service["streaming"] = True
    proxy = Envoy(upstream, bootstrap=with_plugin(auth_bootstrap(key), plugin), name="envoy-auth-streams").start()
    try:
        mcp = Mcp(proxy.mcp_url)
        listed = {scope: legacy_list(mcp, bearer(token(key, scope))) for scope in ["catalog:read", "users:read"]}
        assert listed == {
            "catalog:read": ["CatalogService_Search", "CatalogService_GetItem", "CatalogService_WatchItems",
                             "CatalogService_ImportItems"],
            "users:read": ["UserService_GetUser"],
        }
        headers = bearer(token(key, "users:read catalog:read"))
        chat = {"name": "UserService_Chat", "arguments": {"messages": [{"text": "hi"}]}}
        refused = mcp.modern("tools/call", chat, headers=headers)
        assert refused.status_code == 400 and 'unknown tool \\"UserService_Chat\\"' in refused.text, refused.text
        watch = {"name": "CatalogService_WatchItems", "arguments": {"ids": ["1"], "interval_ms": 10}}
        hidden = mcp.modern("tools/call", watch, headers=bearer(token(key, "users:read")))
        assert 'unknown tool \\"CatalogService_WatchItems\\"' in hidden.text, hidden.text
        assert upstream.streams()["opened"] == 0 and upstream.total_calls() == 0
        allowed = mcp.modern("tools/call", watch, headers=headers).json()["result"]
        assert allowed["structuredContent"]["end"]["reason"] == "max_messages", allowed
    finally:
        proxy.stop()


def test_without_a_verified_token_switchblade_fails_closed(upstream: Upstream, key) -> None:
    """jwt_authn misconfigured to let requests without a token through: Switchblade, told to
    authorize, finds no verified payload and refuses everything."""
    upstream.reset()
    bootstrap = auth_bootstrap(key)
    jwt_authn(bootstrap)["rules"] = [{"match": {"prefix": "/"}, "requires": {"requires_any": {"requirements": [
        {"provider_name": "demo"}, {"allow_missing": {}}]}}}]
    proxy = Envoy(upstream, bootstrap=bootstrap, name="envoy-auth-open").start()
    try:
        mcp = Mcp(proxy.mcp_url)
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        for response in (mcp.modern("tools/list"), mcp.modern("tools/call", GET_USER), mcp.post(initialize)):
            assert response.status_code == 401, response.text
            assert response.headers["www-authenticate"] == f'Bearer resource_metadata="{METADATA_URL}"'
            message = response.json()["error"]["message"]
            assert message.startswith("Unauthorized: this server authorizes each tool from a verified token, and none reached it ("), message
        # With a token, the same Envoy serves.
        assert mcp.modern("tools/call", GET_USER, headers=bearer(token(key, "users:read"))).status_code == 200
    finally:
        proxy.stop()
    assert upstream.calls() == {"/demo.users.v1.UserService/GetUser": 1}


def test_with_challenge_a_caller_is_told_the_scopes_a_tool_needs(upstream: Upstream, key) -> None:
    """`insufficient_scope: challenge`: every tool some caller may call is listed, and a call
    the token's scopes do not cover is the MCP step-up answer (HTTP 403, `insufficient_scope`,
    the scopes the tool needs, the metadata), in both eras; nothing reaches the upstream."""
    upstream.reset()
    bootstrap = auth_bootstrap(key)
    plugin = json.loads(filter_build.WasmBuild.plugin(auth_plugin_entry(bootstrap)))
    plugin["authorization"]["insufficient_scope"] = "challenge"
    proxy = Envoy(upstream, bootstrap=with_plugin(bootstrap, plugin), name="envoy-auth-challenge").start()
    try:
        mcp = Mcp(proxy.mcp_url)
        headers = bearer(token(key, "catalog:read"))
        assert legacy_list(mcp, headers) == ALL_TOOLS
        modern = mcp.modern("tools/call", GET_USER, id=9, headers=headers)
        legacy = mcp.post({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": GET_USER},
                          headers={**headers, "mcp-protocol-version": "2025-11-25"})
        for response in (modern, legacy):
            assert response.status_code == 403, response.text
            assert response.headers["www-authenticate"] == (
                f'Bearer error="insufficient_scope", scope="users:read", resource_metadata="{METADATA_URL}"')
            assert response.json()["id"] == 9
            assert response.json()["error"]["message"].startswith(
                'Forbidden: tool UserService_GetUser needs the scopes "users:read"'), response.text
        # A tool nobody may call (no rule, `unlisted: deny`) stays unknown.
        unknown = mcp.modern("tools/call", {"name": "NoSuchTool", "arguments": {}}, headers=headers)
        assert unknown.status_code == 400 and "unknown tool" in unknown.text
        assert upstream.total_calls() == 0
        assert mcp.modern("tools/call", GET_USER, headers=bearer(token(key, "users:read"))).status_code == 200
    finally:
        proxy.stop()


def test_the_upstream_learns_who_calls_and_never_sees_the_token(guarded: Envoy, upstream: Upstream, key) -> None:
    """`caller_metadata` hands the upstream the verified caller's claims; a client's own
    headers of those names are not what it sees, and its bearer token never reaches it."""
    upstream.reset()
    headers = {**bearer(token(key, "catalog:read", sub="agent-é 7", client_id="desk-app")),
               "x-caller-sub": "root", "x-caller-client-id": "forged", "x-request-id": "req-42"}
    response = Mcp(guarded.mcp_url).modern("tools/call", {"name": "CatalogService_GetItem", "arguments": {"id": "1"}},
                                           headers=headers)
    assert response.status_code == 200, response.text
    seen = upstream.metadata("/demo.catalog.v1.CatalogService/GetItem")
    # Outside printable ASCII, a claim is percent-encoded (RFC 3986) so no byte is lost.
    assert (seen["x-caller-sub"], seen["x-caller-client-id"]) == ("agent-%C3%A9 7", "desk-app")
    assert seen["x-request-id"] == "req-42"
    assert "authorization" not in seen
    # A token without a claim sends no metadata for it.
    upstream.reset()
    Mcp(guarded.mcp_url).modern("tools/call", {"name": "CatalogService_GetItem", "arguments": {"id": "1"}},
                                headers={**bearer(token(key, "catalog:read")), "x-caller-client-id": "forged"})
    seen = upstream.metadata("/demo.catalog.v1.CatalogService/GetItem")
    assert seen["x-caller-sub"] == "agent-7" and "x-caller-client-id" not in seen


def test_forwarding_the_token_is_refused_unless_allowed_in_so_many_words(tmp_path, key) -> None:
    bootstrap = auth_bootstrap(key)
    plugin = json.loads(filter_build.WasmBuild.plugin(auth_plugin_entry(bootstrap)))
    plugin["forward_headers"] = ["x-request-id", "authorization"]
    path = tmp_path / "auth.yaml"
    path.write_text(yaml.safe_dump(with_plugin(bootstrap, plugin)))
    check = subprocess.run([str(REPO / "target/release/switchblade"), "check", str(path)], capture_output=True, text=True, timeout=60)
    assert check.returncode != 0
    assert ('at `forward_headers[1]`: "authorization" would hand the client\'s token to the upstream, which the MCP '
            "specification forbids") in check.stderr + check.stdout
    plugin["allow_token_passthrough"] = True
    path.write_text(yaml.safe_dump(with_plugin(auth_bootstrap(key), plugin)))
    check = subprocess.run([str(REPO / "target/release/switchblade"), "check", str(path)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr + check.stdout


def test_a_rule_naming_an_unknown_service_or_method_is_refused_when_the_configuration_loads(tmp_path, key) -> None:
    for name in ["demo.users.v1.UserServce", "demo.users.v1.UserService/DeleteUser"]:
        bootstrap = auth_bootstrap(key)
        plugin = json.loads(filter_build.WasmBuild.plugin(auth_plugin_entry(bootstrap)))
        plugin["authorization"]["rules"][name] = ["users:write"]
        path = tmp_path / "auth.yaml"
        path.write_text(yaml.safe_dump(with_plugin(bootstrap, plugin)))
        check = subprocess.run([str(REPO / "target/release/switchblade"), "check", str(path)], capture_output=True, text=True, timeout=60)
        assert check.returncode != 0
        assert f"at `authorization.rules.{name}`: names no configured service and no exposed tool's method" in check.stderr + check.stdout


async def _python_session(url: str, mode: str, bearer_token: str) -> dict:
    http = create_mcp_http_client(headers=bearer(bearer_token))
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        listed = await client.list_tools()
        calls = {}
        for name, arguments in [("CatalogService_GetItem", {"id": "2"}), ("UserService_GetUser", {"user_id": 1})]:
            try:
                result = await client.call_tool(name, arguments)
                calls[name] = {"is_error": result.is_error, "content": result.structured_content}
            except MCPError as error:
                calls[name] = {"error": error.error.code, "message": error.error.message}
        return {"tools": [tool.name for tool in listed.tools], "calls": calls}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_python_sdk_sees_each_callers_tools_in_both_eras(guarded: Envoy, upstream: Upstream, key, mode: str) -> None:
    upstream.reset()
    catalog_reader = asyncio.run(_python_session(guarded.mcp_url, mode, token(key, "catalog:read")))
    assert catalog_reader["tools"] == VISIBLE["catalog:read"]
    assert catalog_reader["calls"]["CatalogService_GetItem"]["is_error"] is False
    assert catalog_reader["calls"]["UserService_GetUser"] == {
        "error": -32602,
        "message": 'Invalid params: unknown tool "UserService_GetUser"; call tools/list for the tools this server offers',
    }
    assert upstream.calls() == {"/demo.catalog.v1.CatalogService/GetItem": 1}
    user_reader = asyncio.run(_python_session(guarded.mcp_url, mode, token(key, "users:read")))
    assert user_reader["tools"] == VISIBLE["users:read"]
    assert user_reader["calls"]["UserService_GetUser"]["content"]["username"] == "ada"
    assert user_reader["calls"]["CatalogService_GetItem"]["error"] == -32602
    assert upstream.calls() == {"/demo.catalog.v1.CatalogService/GetItem": 1, "/demo.users.v1.UserService/GetUser": 1}


def test_the_typescript_sdk_sees_each_callers_tools(guarded: Envoy, upstream: Upstream, key) -> None:
    upstream.reset()
    seen = {}
    for scope in ["catalog:read", "users:read"]:
        run = subprocess.run(
            ["node", "authorized.mjs", guarded.mcp_url, token(key, scope), "CatalogService_GetItem", "UserService_GetUser"],
            cwd=TS_CLIENT, capture_output=True, text=True, timeout=60,
        )
        assert run.returncode == 0, run.stderr
        seen[scope] = json.loads(run.stdout)
    assert seen["catalog:read"]["protocolVersion"] == "2025-11-25"
    assert seen["catalog:read"]["tools"] == VISIBLE["catalog:read"]
    assert seen["catalog:read"]["calls"]["CatalogService_GetItem"]["result"]["structuredContent"]["name"] == "Camping stove"
    assert seen["catalog:read"]["calls"]["UserService_GetUser"]["error"]["code"] == -32602
    assert seen["users:read"]["tools"] == VISIBLE["users:read"]
    assert seen["users:read"]["calls"]["UserService_GetUser"]["result"]["structuredContent"]["username"] == "ada"
    assert "unknown tool" in seen["users:read"]["calls"]["CatalogService_GetItem"]["error"]["message"]
    assert upstream.calls() == {"/demo.catalog.v1.CatalogService/GetItem": 1, "/demo.users.v1.UserService/GetUser": 1}


def test_other_paths_only_need_what_their_route_needs(guarded: Envoy, mcp: Mcp) -> None:
    assert mcp.http.get(f"{guarded.url}/calls").status_code == 200


def test_the_module_refuses_a_metadata_token_source_and_says_how_to_bridge(envoy: Envoy) -> None:
    """Envoy 1.40's module ABI reads no metadata objects: the module refuses the default source
    when the configuration loads, naming the filter-state bridge, and keeps serving."""
    if envoy.build is not filter_build.MODULE:
        pytest.skip("the Wasm filter reads the payload from dynamic metadata (the tests above)")
    plugin = {"services": {"demo.users.v1.UserService": {"cluster": "demo_grpc"}},
              "authorization": {"rules": {"demo.users.v1.UserService": ["users:read"]}}}
    assert envoy.swap_plugin(plugin) is False
    assert ("at `authorization.token_payload`: the dynamic module cannot read dynamic metadata "
            "`envoy.filters.http.jwt_authn` key `jwt_payload`") in envoy.logs()
    assert "set `token_payload` to {\"filter_state\": \"switchblade.token_payload\"}" in envoy.logs()
    assert Mcp(envoy.mcp_url).call_tool("UserService_GetUser", {"user_id": 2})["isError"] is False
