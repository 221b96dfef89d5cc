"""The .wasm as an OCI image: scripts/wasm-image's layout is the one Istio and Envoy Gateway
pull (one tar+gzip layer holding plugin.wasm), it is pushed to a real local registry (Debian's
docker-registry) and pulled back with skopeo, and every digest holds: the manifest's is the one
printed (the `sha256` to pin), each blob's is its descriptor's, and the plugin is the build."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import httpx2
import pytest

import filter_build
from processes import REPO, Peer, free_port

SKOPEO = shutil.which("skopeo")
REGISTRY_BIN = shutil.which("docker-registry")
WASM = filter_build.WASM.binary

@pytest.fixture(scope="module")
def registry():
    if SKOPEO is None or REGISTRY_BIN is None:
        pytest.skip("skopeo and docker-registry are not installed (scripts/test installs Debian's packages as root)")
    if filter_build.current() is not filter_build.WASM:
        pytest.skip("the image holds the Wasm filter; it runs once, in the --build wasm session")
    port = free_port()
    peer = Peer(f"registry-{port}")
    peer.dir.mkdir(parents=True, exist_ok=True)
    config = peer.dir / "config.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {peer.dir / 'data'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    try:
        peer.launch([str(REGISTRY_BIN), "serve", str(config)],
                    lambda: httpx2.get(f"http://127.0.0.1:{port}/v2/", timeout=1).status_code == 200, "the local registry")
        yield f"127.0.0.1:{port}"
    finally:
        peer.stop()


def sha256(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def blob(layout: Path, digest: str) -> bytes:
    data = (layout / "blobs/sha256" / digest.removeprefix("sha256:")).read_bytes()
    assert sha256(data) == digest, f"blob {digest} does not hash to its name"
    return data


def test_the_image_is_pushed_and_pulled_back_with_every_digest_holding(registry: str, tmp_path: Path) -> None:
    reference = f"{registry}/switchblade/filter:test"
    built = subprocess.run(
        [sys.executable, str(REPO / "test-harness/wasm_image.py"), "--layout", str(tmp_path / "built"),
         "--tag", "test", "--push", reference, "--plain-http"],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr
    printed = built.stdout.strip()

    raw = subprocess.run([str(SKOPEO), "inspect", "--raw", "--tls-verify=false", f"docker://{reference}"],
                         capture_output=True, timeout=120, check=True).stdout
    assert sha256(raw) == printed, "the registry holds another manifest than the one printed"

    pulled = tmp_path / "pulled"
    subprocess.run([str(SKOPEO), "copy", "--quiet", "--src-tls-verify=false", f"docker://{reference}", f"oci:{pulled}:test"],
                   check=True, timeout=120)
    index = json.loads((pulled / "index.json").read_text())
    assert [entry["digest"] for entry in index["manifests"]] == [printed]
    manifest = json.loads(blob(pulled, printed))

    # What Istio's and Envoy Gateway's fetchers accept as the "compat" variant.
    assert manifest["annotations"] == {"module.wasm.image/variant": "compat"}
    [layer] = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    blob(pulled, manifest["config"]["digest"])
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(pulled, layer["digest"])))) as archive:
        assert archive.getnames() == ["plugin.wasm"]
        plugin = archive.extractfile("plugin.wasm")
        assert plugin is not None and plugin.read() == WASM.read_bytes()


def test_the_same_build_makes_the_same_digest(tmp_path: Path) -> None:
    digests = [subprocess.run([sys.executable, str(REPO / "test-harness/wasm_image.py"), "--layout", str(tmp_path / name)],
                              capture_output=True, text=True, timeout=120, check=True).stdout.strip()
               for name in ("first", "second")]
    assert digests[0] == digests[1] and digests[0].startswith("sha256:")
