"""A gRPC server reflection that lies (the demo upstream with `--reflection lying`): beside the
true answer, its answers hold a file nobody asked for (a users.proto whose GetUser takes a name)
and fakes, which the asked file imports, of files the filter keeps its own copies of (a
Timestamp with its fields renumbered, a buf/validate/validate.proto that reads `prefix` as
`suffix`). With one service read through reflection from it and two served from the
configuration, the configured services keep their schemas and their buf.validate rules, the
well-known types stay the filter's own, the reflected service is served as the server declares
it, and the log says what was left out. `switchblade config --reflect` takes only the files it
asks for and their imports too."""

from __future__ import annotations

import pytest

from mcp_client import Mcp
from processes import Envoy, Upstream, wait_until
from test_discovery import config, descriptor_set, set_files

INVENTORY = "acme.inventory.v1.InventoryService"
USERS = "demo.users.v1.UserService"
RULES = "test.rules.v1.RulesService"
INVENTORY_TOOLS = ["InventoryService_GetStock", "InventoryService_Reserve", "InventoryService_ListWarehouses"]
CONFIGURED_TOOLS = ["UserService_GetUser", "RulesService_PlaceOrder", "RulesService_SetLevel"]
ORDER = {"name": "ada", "phone": "+15551234"}
REFUSED = "Invalid arguments for tool RulesService_PlaceOrder: "


def plugin(*reflected: str, configured: tuple[str, ...] = (USERS, RULES)) -> dict:
    services = {service: {"cluster": "demo_grpc", "from_reflection": True} for service in reflected}
    services.update({service: {"cluster": "demo_grpc"} for service in configured})
    return {"services": services, "reflection": {"interval_ms": 1000}}


@pytest.fixture(scope="module")
def liar():
    server = Upstream(args=["--reflection", "lying"]).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def envoy(liar: Upstream):
    """Reads InventoryService through the lying reflection; serves the others from its
    configuration (the embedded descriptors)."""
    proxy = Envoy(liar, plugin(INVENTORY), name="envoy-lies").start()
    mcp = Mcp(proxy.mcp_url)
    try:
        wait_until(lambda: "InventoryService_GetStock" in mcp.tools(), "the reflected service's tools")
    except TimeoutError:
        proxy.stop()
        raise AssertionError(f"the reflected service never came; the log says:\n{proxy.logs()[-3000:]}")
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def reference(liar: Upstream):
    """The same configured services, without reflection."""
    proxy = Envoy(liar, plugin(), name="envoy-lies-reference").start()
    yield proxy
    proxy.stop()


def refusal(result: dict) -> str:
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    assert text.startswith(REFUSED), text
    return text[len(REFUSED):].split(". The request was not sent")[0]


def test_the_reflected_service_is_served_as_the_server_declares_it(envoy: Envoy, liar: Upstream) -> None:
    mcp = Mcp(envoy.mcp_url)
    assert list(mcp.tools()) == INVENTORY_TOOLS + CONFIGURED_TOOLS
    result = mcp.call_tool("InventoryService_GetStock", {"sku": "SKU-0001", "warehouse": "BER"})
    assert result["isError"] is False, result


def test_the_configured_services_keep_their_schemas(envoy: Envoy, reference: Envoy) -> None:
    tools, configured = Mcp(envoy.mcp_url).tools(), Mcp(reference.mcp_url).tools()
    for name in CONFIGURED_TOOLS:
        assert tools[name] == configured[name], name
    # The unasked users.proto would have made GetUser take a `user_name`.
    assert list(tools["UserService_GetUser"]["inputSchema"]["properties"]) == ["user_id"]
    result = Mcp(envoy.mcp_url).call_tool("UserService_GetUser", {"user_id": 1})
    assert result["isError"] is False, result


def test_the_configured_rules_stay_as_configured(envoy: Envoy, liar: Upstream) -> None:
    mcp = Mcp(envoy.mcp_url)
    liar.reset()
    # The fake validate.proto would read `prefix: "SKU-"` as a suffix.
    assert refusal(mcp.call_tool("RulesService_PlaceOrder", {**ORDER, "sku": "ABC-1234"})) == (
        'at `sku`: must start with "SKU-" (string.prefix = "SKU-"), got "ABC-1234"')
    assert liar.total_calls() == 0
    result = mcp.call_tool("RulesService_PlaceOrder", {**ORDER, "sku": "SKU-1234"})
    assert result["isError"] is False, result


def test_the_well_known_types_stay_the_filters_own(envoy: Envoy, liar: Upstream) -> None:
    mcp = Mcp(envoy.mcp_url)
    liar.reset()
    # The fake Timestamp would read this rule's 946684800 seconds as nanoseconds.
    assert refusal(mcp.call_tool("RulesService_PlaceOrder", {**ORDER, "not_before": "1999-12-31T23:59:59Z"})) == (
        'at `not_before`: must be greater than "2000-01-01T00:00:00Z" (timestamp.gt = "2000-01-01T00:00:00Z"), '
        'got "1999-12-31T23:59:59Z"')
    assert liar.total_calls() == 0
    result = mcp.call_tool("RulesService_PlaceOrder", {**ORDER, "not_before": "2001-01-01T00:00:00Z"})
    assert result["isError"] is False, result


def test_the_log_says_what_was_left_out(envoy: Envoy) -> None:
    logs = envoy.logs()
    assert "gRPC server reflection: serving 6 tools (before: 3); ignored 1 file sent unasked" in logs
    assert ("gRPC server reflection: kept the filter's built-in `buf/validate/validate.proto`, not cluster demo_grpc's "
            "different copy; kept the filter's built-in `google/protobuf/timestamp.proto`, not cluster demo_grpc's "
            "different copy") in logs


def test_an_honest_server_sends_nothing_to_leave_out(upstream: Upstream) -> None:
    """The same files the filter has (RulesService imports buf/validate/validate.proto and five
    google/protobuf files), sent by an honest server: nothing to say."""
    proxy = Envoy(upstream, plugin(RULES, configured=(USERS,)), name="envoy-lies-honest").start()
    try:
        wait_until(lambda: "RulesService_PlaceOrder" in Mcp(proxy.mcp_url).tools(), "the reflected rules service")
        logs = proxy.logs()
        assert "gRPC server reflection: serving 3 tools (before: 1)" in logs
        assert "sent unasked" not in logs and "different copy" not in logs, logs
    finally:
        proxy.stop()


def test_the_cli_takes_only_the_files_it_asks_for(liar: Upstream) -> None:
    """The CLI has no configuration to protect: it takes the asked file and what it imports
    (here the fakes too, which a reviewer of the configuration sees), and nothing else."""
    plugin = config("--reflect", f"127.0.0.1:{liar.grpc_port}", f"--service={INVENTORY}=demo_grpc")
    files = set(set_files(descriptor_set(plugin)))
    assert "demo/users/v1/users.proto" not in files
    assert {"acme/inventory/v1/inventory.proto", "google/protobuf/timestamp.proto", "buf/validate/validate.proto"} <= files
