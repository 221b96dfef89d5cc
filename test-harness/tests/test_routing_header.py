"""Only the filter chooses where a tool call goes. The dynamic module forwards a routed call on
a route that takes its cluster from a header (`routing.cluster_header`); a client that sends
that header itself, on any path, with HTTP/1.1 or HTTP/2, with a token or without, must not
reach a gRPC method around authentication, authorization and the argument gate. The upstream's
call count is the proof: it stays at zero.

Every shipped module configuration is tried: envoy/module.yaml as it is, envoy/auth.yaml
(jwt_authn in front) as the module runs it, and the test harness's own module bootstrap. The
Wasm build has no such route; its session runs the same attempts against its demo and auth
bootstraps.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import httpx2
import pytest
import yaml

import filter_build
from filter_build import CLUSTER_HEADER, MODULE
from processes import REPO, Envoy, Upstream
from test_auth import auth_bootstrap, bearer, new_key, token

# demo.users.v1.GetUserRequest{user_id: 1}, as one uncompressed gRPC frame.
GET_USER_FRAME = b"\x00\x00\x00\x00\x02\x08\x01"
GRPC_HEADERS = {"content-type": "application/grpc", "te": "trailers", CLUSTER_HEADER: "demo_grpc"}
# Paths a client might try: the method itself, the MCP path, and a path no route names.
PATHS = ["/demo.users.v1.UserService/GetUser", "/mcp", "/anything"]
REFUSAL = (f"the {CLUSTER_HEADER} header is reserved: Switchblade sets it to route the tool calls it has checked, "
           "and refuses a request that carries it")


def module_yaml() -> dict:
    return yaml.safe_load((REPO / "envoy/module.yaml").read_text())


KEY = new_key()


def bootstraps() -> dict[str, tuple[dict | None, str]]:
    """Each shipped bootstrap of this session's build, and where its plugin configuration is
    (None: the harness's own demo bootstrap)."""
    if filter_build.current().name == "module":
        return {"module.yaml": (module_yaml(), "inline"), "auth.yaml": (auth_bootstrap(KEY), "inline"),
                "harness": (None, "ecds")}
    return {"auth.yaml": (auth_bootstrap(KEY), "inline"), "harness": (None, "ecds")}


@pytest.fixture(scope="module", params=sorted(bootstraps()))
def proxy(request: pytest.FixtureRequest, upstream: Upstream):
    bootstrap, _ = bootstraps()[request.param]
    envoy = Envoy(upstream, bootstrap=bootstrap, name=f"envoy-routing-{request.param.split('.')[0]}").start()
    yield envoy
    envoy.stop()


def attempts():
    for path in PATHS:
        for http2 in (False, True):
            for with_token in (False, True):
                for grpc in (True, False):
                    yield pytest.param(path, http2, with_token, grpc, id="-".join([
                        path, "h2" if http2 else "h1", "token" if with_token else "anonymous", "grpc" if grpc else "plain"]))


@pytest.mark.parametrize(("path", "http2", "with_token", "grpc"), list(attempts()))
def test_a_client_cannot_route_with_the_cluster_header(proxy: Envoy, upstream: Upstream, path: str, http2: bool,
                                                     with_token: bool, grpc: bool) -> None:
    upstream.reset()
    headers = dict(GRPC_HEADERS)
    if not grpc:
        headers["content-type"] = "application/octet-stream"
    if with_token:
        headers |= bearer(token(KEY, scope="users:read catalog:read"))
    with httpx2.Client(http1=not http2, http2=http2, timeout=10) as client:
        response = client.post(f"{proxy.url}{path}", content=GET_USER_FRAME, headers=headers)
    assert upstream.total_calls() == 0, (response.status_code, response.headers, response.content)
    assert response.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
    if proxy.name.startswith("envoy-routing-auth") and path == "/mcp" and not with_token:
        # jwt_authn refuses first: UNAUTHENTICATED for a gRPC request, 401 for another.
        assert (response.headers.get("grpc-status") == "16") if grpc else response.status_code == 401, response.headers
    elif proxy.build.name == "module" and grpc:
        # Envoy answers a gRPC request's local reply as gRPC: PERMISSION_DENIED, the text as
        # its message.
        assert (response.status_code, response.headers["grpc-status"]) == (200, "7"), response.headers
        assert REFUSAL in unquote(response.headers["grpc-message"]), response.headers
    elif proxy.build.name == "module":
        assert response.status_code == 403, response.text
        text = response.json()["error"]["message"] if path == "/mcp" else response.text
        assert REFUSAL in text, text


@pytest.mark.parametrize("path", PATHS)
def test_the_cluster_header_is_refused_whatever_its_case(proxy: Envoy, upstream: Upstream, path: str) -> None:
    """HTTP/1.1 header names are case-insensitive; the module looks for the lowercase name
    (Envoy lowercases what it parses), so a client's `X-Switchblade-Cluster` is the same."""
    upstream.reset()
    headers = {"content-type": "application/grpc", "te": "trailers", CLUSTER_HEADER.title(): "demo_grpc"}
    with httpx2.Client(http1=True, http2=False, timeout=10) as client:
        response = client.post(f"{proxy.url}{path}", content=GET_USER_FRAME, headers=headers)
    assert upstream.total_calls() == 0, (response.status_code, response.headers, response.content)
    if proxy.build.name == "module" and not proxy.name.startswith("envoy-routing-auth"):
        assert (response.status_code, response.headers["grpc-status"]) == (200, "7"), response.headers


def test_the_module_still_routes_its_own_calls(proxy: Envoy, upstream: Upstream) -> None:
    """The refusal is of the client's header only: a checked tool call still goes through the
    route (or the callout) and reaches the upstream once."""
    upstream.reset()
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "UserService_GetUser", "arguments": {"user_id": 1}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    headers |= bearer(token(KEY, scope="users:read"))
    response = httpx2.post(proxy.mcp_url, content=json.dumps(call), headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["isError"] is False, response.text
    assert upstream.total_calls() == 1

