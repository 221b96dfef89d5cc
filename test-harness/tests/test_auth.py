"""envoy/auth.yaml: jwt_authn and RBAC in front of Switchblade, authorizing each tool on the
Mcp-Name header, with signing keys generated here. Call counts prove that nothing refused
reaches the upstream."""

from __future__ import annotations

import json
import time

import jwt
import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from mcp_client import Mcp
from processes import REPO, Envoy, Upstream, http_filters

ISSUER = "https://auth.switchblade.example"
AUDIENCE = "switchblade-mcp"


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def key():
    return new_key()


@pytest.fixture(scope="module")
def guarded(upstream: Upstream, key):
    bootstrap = yaml.safe_load((REPO / "envoy/auth.yaml").read_text())
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "test", "alg": "RS256"})
    provider = next(f for f in http_filters(bootstrap) if f["name"] == "envoy.filters.http.jwt_authn")
    provider["typed_config"]["providers"]["demo"]["local_jwks"]["inline_string"] = json.dumps({"keys": [jwk]})
    proxy = Envoy(upstream, bootstrap=bootstrap, name="envoy-auth").start()
    yield proxy
    proxy.stop()


@pytest.fixture
def mcp(guarded: Envoy, upstream: Upstream) -> Mcp:
    upstream.reset()
    return Mcp(guarded.mcp_url)


def token(key, scope: str = "", expires_in: int = 300, audience: str = AUDIENCE) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": audience, "sub": "agent-7", "scope": scope, "iat": now, "exp": now + expires_in}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "test"})


def bearer(value: str) -> dict[str, str]:
    return {"authorization": f"Bearer {value}"}


GET_USER = {"name": "UserService_GetUser", "arguments": {"user_id": 1}}


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
    assert upstream.total_calls() == 0


def test_a_token_for_another_audience_is_403(mcp: Mcp, upstream: Upstream, key) -> None:
    response = mcp.modern("tools/call", GET_USER, headers=bearer(token(key, "users:read", audience="someone-else")))
    assert (response.status_code, response.text) == (403, "Audiences in Jwt are not allowed")
    assert upstream.total_calls() == 0


def test_a_valid_token_lists_the_tools(mcp: Mcp, key) -> None:
    response = mcp.modern("tools/list", headers=bearer(token(key)))
    assert response.status_code == 200
    assert len(response.json()["result"]["tools"]) == 3


def test_a_token_with_the_tools_scope_calls_it(mcp: Mcp, upstream: Upstream, key) -> None:
    response = mcp.modern("tools/call", GET_USER, headers=bearer(token(key, "catalog:read users:read")))
    assert response.json()["result"]["structuredContent"]["username"] == "ada"
    assert upstream.total_calls() == 1


def test_a_token_without_the_tools_scope_is_403(mcp: Mcp, upstream: Upstream, key) -> None:
    response = mcp.modern("tools/call", GET_USER, headers=bearer(token(key, "catalog:read users:readonly")))
    assert response.status_code == 403
    assert upstream.total_calls() == 0


def test_naming_an_allowed_tool_in_the_header_and_another_in_the_body_is_refused(mcp: Mcp, upstream: Upstream, key) -> None:
    """RBAC lets the request through on its header; Switchblade sees the body disagree."""
    search = {"name": "CatalogService_Search", "arguments": {}}
    response = mcp.modern("tools/call", search, id=9,
                          headers={**bearer(token(key, "users:read")), "mcp-name": "UserService_GetUser"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020
    assert "Mcp-Name header \"UserService_GetUser\" does not match body name \"CatalogService_Search\"" in response.json()["error"]["message"]
    assert upstream.total_calls() == 0


def test_handshake_era_requests_are_refused_by_this_policy(mcp: Mcp, upstream: Upstream, key) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": GET_USER}
    assert mcp.post(body, headers=bearer(token(key, "users:read"))).status_code == 403
    assert upstream.total_calls() == 0


def test_other_paths_only_need_what_their_route_needs(guarded: Envoy, mcp: Mcp) -> None:
    assert mcp.http.get(f"{guarded.url}/calls").status_code == 200
