"""Packages built artifacts as a release (scripts/release builds them first): copies the filter
(.wasm), the dynamic module (.so) and the CLI into the release directory, writes the filter as
an OCI image layout (oci/, as scripts/wasm-image does), a CycloneDX SBOM beside each artifact
(NAME.cdx.json) and SHA256SUMS over every file.

The same artifacts and the same SOURCE_DATE_EPOCH give the same bytes: the OCI layout has fixed
times and owners, each SBOM takes its time from SOURCE_DATE_EPOCH (scripts/release sets the
commit's) and its serial number from its own content, and every list is sorted.

Each SBOM lists the crates linked into its artifact: `cargo tree` for the artifact's package,
target and default features, normal dependencies only (no build scripts' or proc macros'),
with its licence, and the source and checksum from Cargo.lock. It is
written here rather than by cargo-cyclonedx (0.5.9) for two reasons: installing that tool
compiles 125 crates, about four minutes of CPU on every fresh CI machine, and it lists what the
whole workspace's resolve holds (for the .wasm, also proc macros and the CLI's schemars), not
what one artifact links.

    scripts/release [--dist DIR] [--target-dir DIR] [--no-build]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import wasm_image

REPO = Path(__file__).resolve().parents[1]
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"
# A crate as Cargo.lock names it: (name, version).
Crate = tuple[str, str]


@dataclass(frozen=True)
class Artifact:
    """One thing the release ships: where Cargo builds it, and for which package and target."""

    name: str
    built: str
    package: str
    target: str | None
    kind: str


ARTIFACTS = [
    Artifact("switchblade_filter.wasm", "wasm32-wasip1/release/switchblade_filter.wasm", "switchblade-filter",
             "wasm32-wasip1", "library"),
    Artifact("libswitchblade_module.so", "module/libswitchblade_module.so", "switchblade-module", None, "library"),
    Artifact("switchblade", "release/switchblade", "switchblade-cli", None, "application"),
]


def cargo(*arguments: str) -> str:
    return subprocess.run(["cargo", *arguments, "--locked"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


def host_triple() -> str:
    [host] = [line.split()[1] for line in subprocess.run(["rustc", "-vV"], capture_output=True, text=True,
                                                         check=True).stdout.splitlines() if line.startswith("host:")]
    return host


def linked_crates(package: str, target: str) -> tuple[dict[Crate, str], set[tuple[Crate, Crate]]]:
    """The crates linked into `package` built for `target` (name, version) with their licences,
    the root first, and the edges between them."""
    tree = cargo("tree", "-p", package, "--target", target, "-e", "normal,no-proc-macro", "--prefix", "depth",
                 "-f", "{p}|{l}")
    crates: dict[Crate, str] = {}
    edges: set[tuple[Crate, Crate]] = set()
    parents: list[Crate] = []
    for line in tree.splitlines():
        digits = len(line) - len(line.lstrip("0123456789"))
        crate_id, licence = line[digits:].rsplit("|", 1)
        depth, name, version = int(line[:digits]), *crate_id.split()[:2]
        crate = (name, version.removeprefix("v"))
        del parents[depth:]
        if parents:
            edges.add((parents[-1], crate))
        parents.append(crate)
        crates.setdefault(crate, licence.removesuffix(" (*)"))
    return crates, edges


def reference(crate: Crate) -> str:
    return f"pkg:cargo/{crate[0]}@{crate[1]}"


def component(crate: Crate, licence: str, locked: dict) -> dict:
    entry = {"type": "library", "bom-ref": reference(crate), "name": crate[0], "version": crate[1]}
    if licence:
        entry["licenses"] = [{"expression": licence}]
    source = locked.get("source")
    if source == CRATES_IO:
        entry["purl"] = reference(crate)
        entry["hashes"] = [{"alg": "SHA-256", "content": locked["checksum"]}]
        entry["externalReferences"] = [{"type": "distribution",
                                        "url": f"https://crates.io/api/v1/crates/{crate[0]}/{crate[1]}/download"}]
    elif source is None:
        # The workspace's own crates: built from this repository, not fetched.
        entry["externalReferences"] = [{"type": "vcs", "url": workspace()["package"]["repository"]}]
    else:
        entry["externalReferences"] = [{"type": "distribution", "url": source}]
    return entry


def workspace() -> dict:
    return tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]


def sbom(artifact: Artifact, binary: bytes, epoch: int, lock: dict[Crate, dict], host: str) -> bytes:
    """The artifact's CycloneDX 1.5 SBOM, canonical JSON."""
    crates, edges = linked_crates(artifact.package, artifact.target or host)
    itself = f"switchblade:{artifact.name}"
    document = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "timestamp": datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "scripts/release"}]},
            "component": {"type": artifact.kind, "bom-ref": itself, "name": artifact.name,
                          "version": workspace()["package"]["version"],
                          "licenses": [{"expression": workspace()["package"]["license"]}],
                          "hashes": [{"alg": "SHA-256", "content": hashlib.sha256(binary).hexdigest()}],
                          "properties": [{"name": "target", "value": artifact.target or host}]},
        },
        "components": sorted((component(crate, licence, lock[crate]) for crate, licence in crates.items()),
                             key=lambda entry: entry["bom-ref"]),
        "dependencies": [{"ref": itself, "dependsOn": [reference(next(iter(crates)))]}] + [
            {"ref": reference(crate), "dependsOn": sorted(reference(child) for parent, child in edges if parent == crate)}
            for crate in sorted(crates)
        ],
    }
    # A serial number that names the content, so that the same SBOM keeps the same one.
    content = wasm_image.digest(wasm_image.canonical(document))
    document["serialNumber"] = f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, content)}"
    return json.dumps(document, sort_keys=True, indent=1).encode() + b"\n"


def sha256sums(dist: Path) -> bytes:
    """`sha256sum` lines for every file under dist, sorted by path."""
    files = sorted(path.relative_to(dist).as_posix() for path in dist.rglob("*") if path.is_file())
    return "".join(f"{hashlib.sha256((dist / name).read_bytes()).hexdigest()}  {name}\n" for name in files).encode()


def package(target_dir: Path, dist: Path, epoch: int) -> str:
    """Writes the release into dist (emptied first); returns the OCI image's manifest digest."""
    missing = [str(target_dir / a.built) for a in ARTIFACTS if not (target_dir / a.built).exists()]
    if missing:
        sys.exit(f"not built: {', '.join(missing)} (scripts/release builds them)")
    lock = {(p["name"], p["version"]): p for p in tomllib.loads((REPO / "Cargo.lock").read_text())["package"]}
    host = host_triple()
    if dist.exists():
        # Emptied only if it holds nothing or an earlier release: not a directory named by mistake.
        if any(dist.iterdir()) and not (dist / "SHA256SUMS").exists():
            sys.exit(f"{dist} holds files but no SHA256SUMS: not an earlier release, so it is left alone")
        shutil.rmtree(dist)
    dist.mkdir(parents=True)
    for artifact in ARTIFACTS:
        binary = (target_dir / artifact.built).read_bytes()
        (dist / artifact.name).write_bytes(binary)
        (dist / artifact.name).chmod(0o755 if artifact.kind == "application" else 0o644)
        (dist / f"{artifact.name}.cdx.json").write_bytes(sbom(artifact, binary, epoch, lock, host))
    manifest = wasm_image.build_layout(dist / ARTIFACTS[0].name, dist / "oci", workspace()["package"]["version"])
    (dist / "SHA256SUMS").write_bytes(sha256sums(dist))
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target-dir", type=Path, default=REPO / ".work/release/target",
                        help="Cargo's target directory holding the builds")
    parser.add_argument("--dist", type=Path, default=REPO / "dist", help="where to write the release (emptied first)")
    options = parser.parse_args()
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        epoch = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=REPO, capture_output=True, text=True,
                               check=True).stdout
    manifest = package(options.target_dir.resolve(), options.dist.resolve(), int(epoch))
    for path in sorted(options.dist.iterdir()):
        print(f"{path}/ (the filter as an OCI image layout)" if path.is_dir() else path)
    print(f"OCI image digest (the sha256 to pin in deploy/*.yaml): {manifest}")


if __name__ == "__main__":
    main()
