"""An OAuth MCP client finds its way in by itself, end to end with real parts: a real
authorization server (oidc-provider, test-harness/clients/oauth), the bootstrap that
`switchblade config --resource … --format envoy|module` prints, run as printed but for its
ports, and the official Python SDK's client-credentials provider, which starts from a bare
401, reads the protected resource metadata, gets a token for this resource and calls."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

import filter_build
from mcp_client import Mcp
from processes import ENVOY_BIN, REPO, Envoy, Upstream, free_port

SERVER_DIR = REPO / "test-harness/clients/oauth"
CLI_BIN = REPO / "target/release/switchblade"
CATALOG = "demo.catalog.v1.CatalogService"
USERS = "demo.users.v1.UserService"
CLIENT_ID = "desk-agent"
# The name of the cluster the printed bootstrap fetches the signing keys through.
JWKS_CLUSTER = "switchblade_jwks"


class AuthorizationServer:
    """oidc-provider issuing JWT access tokens by the client-credentials grant, for
    `resources` (RFC 8707), with `scopes`."""

    def __init__(self, resources: list[str], scopes: str) -> None:
        self.secret = secrets.token_urlsafe(16)
        # As `--name=value`: a URL-safe secret may begin with '-', which a separate argument
        # would read as an option (one run in 64 failed so).
        command = ["node", "authorization-server.mjs", "--port", "0", "--scopes", scopes,
                   f"--client-id={CLIENT_ID}", f"--client-secret={self.secret}"]
        for resource in resources:
            command += ["--resource", resource]
        self.process = subprocess.Popen(command, cwd=SERVER_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        assert self.process.stdout is not None
        ready = self.process.stdout.readline().split()
        if ready[:1] != ["READY"]:
            self.stop()
            raise RuntimeError(f"the authorization server did not start: {self.process.stderr.read() if self.process.stderr else ''}")
        self.issuer = ready[1]
        self.port = int(self.issuer.rsplit(":", 1)[1])

    def token(self, resource: str, scope: str) -> httpx2.Response:
        return httpx2.post(f"{self.issuer}/token", auth=(CLIENT_ID, self.secret), timeout=10,
                           data={"grant_type": "client_credentials", "resource": resource, "scope": scope})

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


@dataclass
class Clusters:
    """The upstream's clusters, and the authorization server's for the signing keys."""

    upstream: Upstream
    keys_port: int

    @property
    def clusters(self) -> Mapping[str, int]:
        return {**self.upstream.clusters, JWKS_CLUSTER: self.keys_port}


def printed_bootstrap(resource: str, issuer: str) -> dict:
    flavour = "module" if filter_build.current().name == "module" else "envoy"
    printed = subprocess.run(
        [str(CLI_BIN), "config", "-I", "proto", "demo/catalog/v1/catalog.proto", "demo/users/v1/users.proto",
         "--service", f"{CATALOG}=demo_grpc", "--service", f"{USERS}=demo_grpc",
         "--resource", resource, "--authorization-server", issuer, "--jwks-uri", f"{issuer}/jwks",
         "--scope", f"{CATALOG}=catalog:read", "--scope", f"{USERS}/GetUser=users:read",
         "--caller-metadata", "x-caller-client-id=client_id", "--format", flavour],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    return yaml.safe_load(printed)


@dataclass
class Deployment:
    envoy: Envoy
    authorization_server: AuthorizationServer
    resource: str


@pytest.fixture(scope="module")
def deployment(upstream: Upstream) -> Iterator[Deployment]:
    if not (SERVER_DIR / "node_modules").is_dir():
        pytest.skip("oidc-provider is not installed (scripts/bootstrap installs it)")
    # The resource is the URL clients reach: the test Envoy's own port, chosen first.
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    server = AuthorizationServer([resource, "http://127.0.0.1:1/elsewhere"], "catalog:read users:read")
    proxy = None
    try:
        proxy = Envoy(Clusters(upstream, server.port), bootstrap=printed_bootstrap(resource, server.issuer),
                      name="envoy-oauth")
        proxy.port = port
        proxy.config["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"] = port
        proxy.start()
        yield Deployment(proxy, server, resource)
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()


class MemoryTokens:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def _oauth_session(deployment: Deployment, mode: str) -> dict:
    storage = MemoryTokens()
    auth = ClientCredentialsOAuthProvider(
        server_url=deployment.resource, storage=storage, client_id=CLIENT_ID,
        client_secret=deployment.authorization_server.secret,
        # The issuer the client trusts with its secret; the metadata must name it.
        issuer=deployment.authorization_server.issuer)
    http = create_mcp_http_client(auth=auth)
    async with Client(streamable_http_client(deployment.resource, http_client=http), mode=mode) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        user = await client.call_tool("UserService_GetUser", {"user_id": 1})
    return {"tools": tools, "user": user.structured_content, "token": storage.tokens}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_python_sdk_finds_the_authorization_server_and_calls(deployment: Deployment, upstream: Upstream,
                                                                  mode: str) -> None:
    upstream.reset()
    session = asyncio.run(_oauth_session(deployment, mode))
    # The token was asked for this resource, with the scopes the metadata lists (the rules').
    assert session["token"] is not None and session["token"].scope == "catalog:read users:read"
    assert sorted(session["tools"]) == ["CatalogService_GetItem", "CatalogService_Search", "UserService_GetUser"]
    assert session["user"]["username"] == "ada"
    assert upstream.calls() == {f"/{USERS}/GetUser": 1}
    seen = upstream.metadata(f"/{USERS}/GetUser")
    assert seen["x-caller-client-id"] == CLIENT_ID
    assert "authorization" not in seen


def test_the_first_answer_points_at_the_metadata_and_the_metadata_at_the_issuer(deployment: Deployment) -> None:
    proxy, issuer = deployment.envoy, deployment.authorization_server.issuer
    bare = Mcp(proxy.mcp_url).modern("tools/list")
    metadata_url = f"{proxy.url}/.well-known/oauth-protected-resource/mcp"
    assert bare.status_code == 401
    assert bare.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
    document = httpx2.get(metadata_url, timeout=5).json()
    assert document == {"resource": deployment.resource, "authorization_servers": [issuer],
                        "scopes_supported": ["catalog:read", "users:read"], "bearer_methods_supported": ["header"]}


def test_a_token_for_another_resource_or_without_the_scopes_gets_no_further(deployment: Deployment,
                                                                             upstream: Upstream) -> None:
    upstream.reset()
    server, mcp = deployment.authorization_server, Mcp(deployment.envoy.mcp_url)
    elsewhere = server.token("http://127.0.0.1:1/elsewhere", "users:read")
    assert elsewhere.status_code == 200, elsewhere.text
    refused = mcp.modern("tools/list", headers={"authorization": f"Bearer {elsewhere.json()['access_token']}"})
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith('Bearer error="invalid_token", resource_metadata=')
    catalog_only = server.token(deployment.resource, "catalog:read").json()["access_token"]
    headers = {"authorization": f"Bearer {catalog_only}"}
    listed = mcp.modern("tools/list", headers=headers).json()["result"]["tools"]
    assert sorted(tool["name"] for tool in listed) == ["CatalogService_GetItem", "CatalogService_Search"]
    hidden = mcp.modern("tools/call", {"name": "UserService_GetUser", "arguments": {"user_id": 1}}, headers=headers)
    assert "unknown tool" in hidden.text
    assert upstream.total_calls() == 0


def test_the_printed_bootstrap_validates_with_https_keys(tmp_path) -> None:
    """The bootstrap as printed for a real deployment: an https issuer, its keys fetched over
    TLS checked against the system's roots."""
    bootstrap = printed_bootstrap("https://mcp.example.com/mcp", "https://auth.example.com")
    path = tmp_path / "oauth.yaml"
    path.write_text(yaml.safe_dump(bootstrap))
    environment = {**os.environ, **filter_build.current().environment()}
    result = subprocess.run([str(ENVOY_BIN), "--mode", "validate", "-c", str(path)],
                            capture_output=True, text=True, timeout=120, cwd=REPO, env=environment)
    assert result.returncode == 0, result.stdout + result.stderr
