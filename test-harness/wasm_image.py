"""The Wasm filter as an OCI image, in the layout Istio's WasmPlugin and Envoy Gateway's
EnvoyExtensionPolicy pull: the "compat" variant, one tar+gzip layer holding `plugin.wasm`, with
the manifest annotation `module.wasm.image/variant: compat`.

The image is written as an OCI image layout (a directory), byte for byte the same for the same
.wasm (fixed times and owners), so its digest names the build. `--push` copies it to a registry
with skopeo. The digest printed is the manifest's: the `sha256` a WasmPlugin or an
EnvoyExtensionPolicy pins (not the .wasm's own hash).

    scripts/wasm-image [--wasm PATH] [--layout DIR] [--tag TAG] [--push REGISTRY/REPOSITORY:TAG] [--plain-http]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WASM = REPO / "target/wasm32-wasip1/release/switchblade_filter.wasm"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
# The file name Istio and Envoy Gateway look for in the layer.
PLUGIN_FILE = "plugin.wasm"


def canonical(document: dict) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def digest(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def plugin_layer(wasm: bytes) -> tuple[bytes, bytes]:
    """The layer (gzip) and the tar inside it: plugin.wasm alone, with fixed metadata."""
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        entry = tarfile.TarInfo(PLUGIN_FILE)
        entry.size, entry.mode, entry.mtime, entry.uid, entry.gid = len(wasm), 0o644, 0, 0, 0
        archive.addfile(entry, io.BytesIO(wasm))
    tar = tar_bytes.getvalue()
    return gzip.compress(tar, mtime=0), tar


def build_layout(wasm_path: Path, layout: Path, tag: str) -> str:
    """Writes the image as an OCI image layout; returns the manifest's digest."""
    layer, tar = plugin_layer(wasm_path.read_bytes())
    config = canonical({"architecture": "wasm", "os": "wasip1", "config": {},
                        "rootfs": {"type": "layers", "diff_ids": [digest(tar)]}})
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": LAYER_TYPE, "digest": digest(layer), "size": len(layer),
                    "annotations": {"org.opencontainers.image.title": PLUGIN_FILE}}],
        "annotations": {"module.wasm.image/variant": "compat"},
    })
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    for blob in (layer, config, manifest):
        (blobs / digest(blob).removeprefix("sha256:")).write_bytes(blob)
    (layout / "oci-layout").write_bytes(canonical({"imageLayoutVersion": "1.0.0"}))
    (layout / "index.json").write_bytes(canonical({
        "schemaVersion": 2,
        "manifests": [{"mediaType": MANIFEST_TYPE, "digest": digest(manifest), "size": len(manifest),
                       "annotations": {"org.opencontainers.image.ref.name": tag}}],
    }))
    return digest(manifest)


def push(layout: Path, tag: str, destination: str, plain_http: bool) -> None:
    """Copies the image to a registry with skopeo, keeping its manifest as it is."""
    command = ["skopeo", "copy", "--quiet", "--preserve-digests", f"oci:{layout}:{tag}", f"docker://{destination}"]
    if plain_http:
        command.insert(2, "--dest-tls-verify=false")
    subprocess.run(command, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wasm", type=Path, default=WASM, help="the filter to package (default: the release build)")
    parser.add_argument("--layout", type=Path, default=REPO / ".work/wasm-image", help="where to write the OCI layout")
    parser.add_argument("--tag", default="latest", help="the image's tag in the layout")
    parser.add_argument("--push", metavar="REGISTRY/REPOSITORY:TAG", help="copy the image there (skopeo)")
    parser.add_argument("--plain-http", action="store_true", help="the registry speaks plain HTTP (a local one)")
    options = parser.parse_args()
    if not options.wasm.exists():
        sys.exit(f"{options.wasm}: no such file (scripts/bootstrap builds the filter)")
    manifest_digest = build_layout(options.wasm, options.layout, options.tag)
    if options.push:
        push(options.layout, options.tag, options.push, options.plain_http)
    print(manifest_digest)


if __name__ == "__main__":
    main()
