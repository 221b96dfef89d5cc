"""Describing services without .proto files: `switchblade config --descriptor-set` (a set that
buf or protoc built) and `switchblade config --reflect` (a live server's gRPC server
reflection, v1 or v1alpha), each checked against the .proto route, and a configuration from
reflection serving tool calls through a real Envoy."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from filter_build import demo_plugin
from mcp_client import Mcp
from processes import ENVOY_BIN, REPO, Envoy, Peer, Upstream, free_port

CLI = Path(os.environ.get("SWITCHBLADE_CLI", REPO / "target/release/switchblade"))
CATALOG = "demo.catalog.v1.CatalogService"
USERS = "demo.users.v1.UserService"
INVENTORY = "acme.inventory.v1.InventoryService"
KITCHEN_SINK = "test.kitchensink.v1.KitchenSinkService"
# Each service's .proto file (under proto/ or test-harness/proto/).
PROTOS = {
    CATALOG: "demo/catalog/v1/catalog.proto",
    USERS: "demo/users/v1/users.proto",
    INVENTORY: "acme/inventory/v1/inventory.proto",
    KITCHEN_SINK: "test/kitchensink/v1/kitchen_sink.proto",
}
EVERY_SERVICE = tuple(PROTOS)


def switchblade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def failure(*args: str) -> str:
    """The error `switchblade config` ends with, which must be one line."""
    run = switchblade("config", *args)
    assert run.returncode == 1, run.stdout[:2000]
    assert run.stdout == ""
    assert run.stderr.startswith("switchblade: ") and run.stderr.count("\n") == 1, run.stderr
    return run.stderr.removeprefix("switchblade: ").strip()


def services(*names: str) -> list[str]:
    return [f"--service={name}=demo_grpc" for name in names]


def config(*args: str) -> dict:
    run = switchblade("config", *args)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def from_protos(*names: str) -> dict:
    """The .proto route's configuration for the services `names`."""
    return config("-I", "proto", "-I", "test-harness/proto", *[PROTOS[name] for name in names], *services(*names))


def from_reflection(upstream: Upstream, *names: str, extra: tuple[str, ...] = ()) -> dict:
    return config("--reflect", f"127.0.0.1:{upstream.grpc_port}", *services(*names), *extra)


def tools(plugin: dict, tmp_path: Path) -> list[dict]:
    """What `switchblade tools` shows for a configuration: the tools/list the filter serves."""
    path = tmp_path / "plugin.json"
    path.write_text(json.dumps(plugin))
    run = switchblade("tools", str(path))
    assert run.returncode == 0, run.stderr
    listed = json.loads(run.stdout)["tools"]
    assert listed
    return listed


# A FileDescriptorSet is `repeated FileDescriptorProto file = 1`, and each file's name is its
# field 1: enough wire format to take files out of a set, as protoc writes one without
# --include_imports.

def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    """The (field number, bytes) of each length-delimited field; a set has no other kind."""
    fields, at = [], 0
    while at < len(data):
        key, at = _varint(data, at)
        assert key & 7 == 2, "only length-delimited fields are expected"
        length, at = _varint(data, at)
        fields.append((key >> 3, data[at:at + length]))
        at += length
    return fields


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def set_files(descriptor_set: bytes) -> dict[str, bytes]:
    """Each file of a set, by name, in the set's order."""
    files = {}
    for number, file in _fields(descriptor_set):
        assert number == 1
        name = next(value for field, value in _fields(file) if field == 1)
        files[name.decode()] = file
    return files


def encode_set(files: list[bytes]) -> bytes:
    return b"".join(b"\x0a" + _encode_varint(len(file)) + file for file in files)


def descriptor_set(plugin: dict) -> bytes:
    return base64.b64decode(plugin["descriptor_set"])


# --descriptor-set

def test_a_descriptor_set_with_its_imports_serves_what_its_protos_do(tmp_path) -> None:
    names = (CATALOG, INVENTORY, KITCHEN_SINK)
    protos = from_protos(*names)
    assert {"google/protobuf/timestamp.proto", "google/api/field_behavior.proto"} <= set(set_files(descriptor_set(protos)))
    path = tmp_path / "set.binpb"
    path.write_bytes(descriptor_set(protos))
    from_set = config("--descriptor-set", str(path), *services(*names))
    assert tools(from_set, tmp_path) == tools(protos, tmp_path)


def test_a_descriptor_set_without_its_imports_names_the_missing_file(tmp_path) -> None:
    sink = PROTOS[KITCHEN_SINK]
    files = set_files(descriptor_set(from_protos(KITCHEN_SINK)))
    path = tmp_path / "sink.pb"
    path.write_bytes(encode_set([files[sink]]))
    error = failure("--descriptor-set", str(path), *services(KITCHEN_SINK))
    # google/api/field_behavior.proto is one of the CLI's built-in Google protos: filled in.
    assert error == (f"--descriptor-set {path}: the descriptor set lacks `test/kitchensink/v1/legacy.proto`, "
                     f"imported by `{sink}`; build it with --include_imports (protoc) or without --exclude-imports (buf)")


def test_the_well_known_imports_a_set_lacks_are_filled_in(tmp_path) -> None:
    protos = from_protos(CATALOG)
    files = set_files(descriptor_set(protos))
    assert "google/protobuf/timestamp.proto" in files
    path = tmp_path / "catalog.pb"
    path.write_bytes(encode_set([files[PROTOS[CATALOG]]]))
    assert tools(config("--descriptor-set", str(path), *services(CATALOG)), tmp_path) == tools(protos, tmp_path)


@pytest.mark.parametrize("content", [b"", (REPO / "proto" / PROTOS[USERS]).read_bytes(), b"\x00\x01\x02\xff"],
                         ids=["empty", "proto-source", "garbage"])
def test_a_file_that_is_not_a_descriptor_set_is_refused(tmp_path, content: bytes) -> None:
    path = tmp_path / "set.pb"
    path.write_bytes(content)
    error = failure("--descriptor-set", str(path), *services(USERS))
    assert error.startswith(f"--descriptor-set {path}: not a binary FileDescriptorSet (")
    assert error.endswith("write one with `buf build -o set.binpb` or `protoc --include_imports --include_source_info "
                          "--descriptor_set_out=set.binpb -I DIR FILE.proto`")


def test_exactly_one_source_is_given(tmp_path) -> None:
    path = tmp_path / "set.pb"
    run = switchblade("config", PROTOS[USERS], "--descriptor-set", str(path), *services(USERS))
    assert run.returncode == 2 and "cannot be used with" in run.stderr
    run = switchblade("config", *services(USERS))
    assert run.returncode == 2 and "<PROTOS|--descriptor-set <FILE>|--reflect <HOST:PORT>>" in run.stderr


# --reflect

@pytest.fixture(scope="module")
def v1alpha_upstream():
    """A demo upstream that serves only the older reflection, grpc.reflection.v1alpha."""
    server = Upstream(args=["--reflection", "v1alpha"]).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def unreflective_upstream():
    server = Upstream(args=["--reflection", "off"]).start()
    yield server
    server.stop()


def test_reflection_gives_what_the_protos_do(upstream: Upstream, tmp_path) -> None:
    reflected = from_reflection(upstream, *EVERY_SERVICE)
    listed = tools(reflected, tmp_path)
    assert listed == tools(from_protos(*EVERY_SERVICE), tmp_path)
    # Custom options come through both routes: `(google.api.field_behavior) = REQUIRED`.
    echo = next(tool for tool in listed if tool["name"] == "KitchenSinkService_Echo")
    assert echo["inputSchema"]["required"] == ["must"]
    # Every import was followed (the kitchen sink's go two levels deep).
    assert {"google/api/field_behavior.proto", "google/protobuf/descriptor.proto",
            "test/kitchensink/v1/legacy.proto"} <= set(set_files(descriptor_set(reflected)))


def test_reflection_keeps_only_the_files_the_services_need(upstream: Upstream) -> None:
    files = list(set_files(descriptor_set(from_reflection(upstream, CATALOG))))
    assert files == ["google/protobuf/timestamp.proto", PROTOS[CATALOG]], "imports first, as protoc orders a set"


def test_methods_and_formats_work_as_with_protos(upstream: Upstream) -> None:
    method = ("--method", f"{INVENTORY}/GetStock")
    reflected = from_reflection(upstream, INVENTORY, extra=method)
    assert reflected["services"][INVENTORY] == {"cluster": "demo_grpc", "expose": "selected", "methods": [f"{INVENTORY}/GetStock"]}
    run = switchblade("config", "--reflect", f"127.0.0.1:{upstream.grpc_port}", *services(INVENTORY), *method, "--format", "ecds")
    assert run.returncode == 0, run.stderr
    typed = yaml.safe_load(run.stdout)["resources"][0]["typed_config"]
    assert json.loads(typed["config"]["configuration"]["value"]) == reflected
    error = failure("--reflect", f"127.0.0.1:{upstream.grpc_port}", *services(INVENTORY), f"--method={INVENTORY}/Nope")
    assert f"service {INVENTORY} has no method Nope; its methods: GetStock, Reserve, ListWarehouses" in error


def test_a_server_with_only_v1alpha_reflection_is_asked_with_v1alpha(upstream: Upstream, v1alpha_upstream: Upstream, tmp_path) -> None:
    assert from_reflection(v1alpha_upstream, *EVERY_SERVICE) == from_reflection(upstream, *EVERY_SERVICE)


def test_a_server_without_reflection_is_named_as_such(unreflective_upstream: Upstream) -> None:
    address = f"127.0.0.1:{unreflective_upstream.grpc_port}"
    assert failure("--reflect", address, *services(INVENTORY)) == (
        f"--reflect {address}: the server does not offer gRPC server reflection (neither "
        "grpc.reflection.v1.ServerReflection nor grpc.reflection.v1alpha.ServerReflection); turn reflection on "
        "in the server, or describe its services with .proto files or --descriptor-set")


def test_an_unknown_service_is_named_with_the_ones_offered(upstream: Upstream, v1alpha_upstream: Upstream) -> None:
    for server in (upstream, v1alpha_upstream):
        address = f"127.0.0.1:{server.grpc_port}"
        assert failure("--reflect", address, *services(INVENTORY, "acme.inventory.v1.Inventory")) == (
            f"--reflect {address}: the server does not know the service acme.inventory.v1.Inventory; it offers: "
            f"{CATALOG}, {USERS}, {INVENTORY}, {KITCHEN_SINK}, test.rules.v1.RulesService, "
            "google.longrunning.Operations, demo.exports.v1.ExportService")


def test_nothing_listening_and_no_grpc_are_told_apart(upstream: Upstream) -> None:
    closed = f"127.0.0.1:{free_port()}"
    assert failure("--reflect", closed, *services(USERS)) == f"--reflect {closed}: connection refused: nothing listens there"
    # The control API: HTTP, but not gRPC.
    control = f"127.0.0.1:{upstream.control_port}"
    assert failure("--reflect", control, *services(USERS)) == (
        f"--reflect {control}: not a gRPC server: it answered HTTP 404 without a gRPC status")
    assert failure("--reflect", "localhost", *services(USERS)).startswith("--reflect localhost: write HOST:PORT")


def test_an_http2_server_that_answers_with_an_error_page_is_no_grpc_server(envoy: Envoy) -> None:
    """Envoy's admin port speaks HTTP/2 and answers an unknown path with 404 and a page of
    text, which is no gRPC message: the HTTP status says what happened, not a framing error."""
    admin = f"127.0.0.1:{envoy.admin_port}"
    assert failure("--reflect", admin, *services(USERS)) == (
        f"--reflect {admin}: not a gRPC server: it answered HTTP 404 without a gRPC status")


# A configuration from reflection, served by a real Envoy.

@pytest.fixture(scope="module")
def live(upstream: Upstream):
    proxy = Envoy(upstream, name="envoy-discovery").start()
    yield proxy
    proxy.stop()


def test_a_configuration_from_reflection_serves_tool_calls(live: Envoy, upstream: Upstream) -> None:
    plugin = from_reflection(upstream, INVENTORY, extra=("--method", f"{INVENTORY}/GetStock"))
    try:
        assert live.swap_plugin(plugin), live.logs()[-3000:]
        upstream.reset()
        mcp = Mcp(live.mcp_url)
        tools = mcp.tools()
        assert list(tools) == ["InventoryService_GetStock"]
        assert tools["InventoryService_GetStock"]["description"] == "How many units of a SKU one warehouse holds."
        stock = mcp.call_tool("InventoryService_GetStock", {"sku": "SKU-0001", "warehouse": "BER"})
        assert stock["structuredContent"] == {"sku": "SKU-0001", "warehouse": "BER", "on_hand": 12, "reserved": 0}
        refused = mcp.call_tool("InventoryService_GetStock", {"sku": "SKU-0001", "warehouse": {"$gt": ""}})
        assert refused["isError"] is True and "at `warehouse`" in refused["content"][0]["text"]
        assert upstream.calls() == {f"/{INVENTORY}/GetStock": 1}
    finally:
        upstream.reset()
        assert live.swap_plugin(demo_plugin())


# Reflection over TLS: an Envoy that terminates TLS (a certificate from a private CA) in front
# of the demo upstream.

def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A private CA, and a certificate it signed for 127.0.0.1: the CA's, the server's and
    its key's PEM files."""
    now = datetime.datetime.now(datetime.timezone.utc)
    validity = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1))

    def issue(subject: str, key, issuer_name, issuer_key, ca: bool) -> x509.Certificate:
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(issuer_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(validity[0]).not_valid_after(validity[1])
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                          content_commitment=False, key_encipherment=False,
                                                          data_encipherment=False, key_agreement=False,
                                                          encipher_only=False, decipher_only=False), critical=True)
        else:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "switchblade test CA")])
    ca = issue("switchblade test CA", ca_key, ca_name, ca_key, ca=True)
    server = issue("127.0.0.1", server_key, ca_name, ca_key, ca=False)
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    return paths


class TlsFront(Peer):
    """Envoy terminating TLS (HTTP/2 by ALPN) and forwarding every request to a gRPC upstream."""

    def __init__(self, upstream: Upstream) -> None:
        self.port = free_port()
        super().__init__(f"tls-front-{self.port}")
        self.upstream = upstream

    def start(self) -> "TlsFront":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca, certificate, key = _certificates(self.dir)
        tls = {"name": "envoy.transport_sockets.tls", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
            "common_tls_context": {"alpn_protocols": ["h2"], "tls_certificates": [
                {"certificate_chain": {"filename": str(certificate)}, "private_key": {"filename": str(key)}}]}}}
        manager = {"name": "envoy.filters.network.http_connection_manager", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "tls_front",
            "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [
                {"match": {"prefix": "/"}, "route": {"cluster": "grpc", "timeout": "0s"}}]}]},
            "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}
        bootstrap = {"static_resources": {
            "listeners": [{"name": "tls", "address": {"socket_address": {"address": "127.0.0.1", "port_value": self.port}},
                           "filter_chains": [{"transport_socket": tls, "filters": [manager]}]}],
            "clusters": [{"name": "grpc", "type": "STATIC", "typed_extension_protocol_options": {
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    "explicit_http_config": {"http2_protocol_options": {}}}},
                "load_assignment": {"cluster_name": "grpc", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                    "socket_address": {"address": "127.0.0.1", "port_value": self.upstream.grpc_port}}}}]}]}}]}}
        path = self.dir / "envoy.yaml"
        path.write_text(yaml.safe_dump(bootstrap))

        def listening() -> bool:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True

        self.launch([str(ENVOY_BIN), "-c", str(path), "--disable-hot-restart", "--concurrency", "1",
                     "--log-level", "warn"], listening, "TLS front Envoy")
        return self


@pytest.fixture(scope="module")
def tls_front(upstream: Upstream):
    front = TlsFront(upstream).start()
    yield front
    front.stop()


def test_reflection_over_tls_with_a_private_ca(tls_front: TlsFront, upstream: Upstream, tmp_path) -> None:
    address = f"127.0.0.1:{tls_front.port}"
    reflected = config("--reflect", address, "--reflect-ca", str(tls_front.ca), *services(INVENTORY))
    assert tools(reflected, tmp_path) == tools(from_protos(INVENTORY), tmp_path)
    # The system's roots do not know the private CA.
    error = failure("--reflect", address, "--reflect-tls", *services(INVENTORY))
    assert error.startswith(f"--reflect {address}: cannot connect: ") and "certificate" in error, error
    assert error.endswith("(a certificate from a private CA? pass the CA with --reflect-ca FILE)")
    # Plaintext to a TLS server.
    error = failure("--reflect", address, *services(INVENTORY))
    assert error.startswith(f"--reflect {address}: not a gRPC server, or not one that speaks plaintext HTTP/2: "), error
    assert error.endswith("(a server with TLS? add --reflect-tls)")
