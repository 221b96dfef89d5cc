"""scripts/release is reproducible: the same tree gives the same bytes.

A release is the builds, then their packaging (test-harness/release.py: the OCI layout, the
SBOMs, SHA256SUMS). Building the whole release twice would cost two full LTO builds of three
artifacts, more than CI has to spare, so each half is checked where it can go wrong, cheaply:

- the packaging, run twice on the same binaries, writes the same bytes, although the binaries'
  mtimes and the wall clock's second differ between the runs (a time taken from either is a
  leak these runs catch); its SHA256SUMS checks out, and each SBOM lists what is linked in;
- the builds do not depend on where the checkout is: the .wasm and the module compiled again
  from a copy of the tree at another path, each into a separate target directory, side by side,
  are the suite's byte for byte. Each target directory starts as hard links to the suite's,
  less the workspace's own crates: the dependencies' sources live under Cargo's home, whatever
  the checkout, so only the workspace's crates (the ones whose paths change) are compiled again
  and linked: about two minutes of CPU, where cold builds take several times that. They start
  as the session begins, at the lowest priority (conftest.py), and use the CPU time the other
  tests leave idle. The CLI is
  left out (see BUILDS). The release builds add one flag to these (Cargo's home remapped to
  /cargo), which depends on the machine, not on the checkout; the same test on the release's
  own builds would need them built, which the suite does not do.

Neither needs Envoy or the build under test: they run once, in the --build wasm session."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

import filter_build
from processes import REPO

RELEASE = REPO / "scripts/release"
BUILT = {
    "switchblade_filter.wasm": REPO / "target/wasm32-wasip1/release/switchblade_filter.wasm",
    "libswitchblade_module.so": REPO / "target/module/libswitchblade_module.so",
    "switchblade": REPO / "target/release/switchblade",
}


@pytest.fixture(autouse=True)
def once() -> None:
    if filter_build.current() is not filter_build.WASM:
        pytest.skip("the release does not depend on the build under test; it runs once, in the --build wasm session")


def version() -> str:
    return tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["version"]


def package(target_dir: Path, dist: Path) -> str:
    """Runs scripts/release's packaging on target_dir's builds; returns what it printed."""
    result = subprocess.run([str(RELEASE), "--no-build", "--target-dir", str(target_dir), "--dist", str(dist)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def tree(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def seed(tmp_path: Path, mtime: float) -> Path:
    """A target directory holding copies of the suite's three builds, with the given mtime."""
    target_dir = tmp_path / f"target-{int(mtime)}"
    for name, built in BUILT.items():
        copy = target_dir / built.relative_to(REPO / "target")
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, copy)
        os.utime(copy, (mtime, mtime))
    return target_dir


def test_packaging_the_same_builds_twice_writes_the_same_bytes(tmp_path: Path) -> None:
    first = package(seed(tmp_path, 1_000_000_000), tmp_path / "first")
    time.sleep(1.1)
    second = package(seed(tmp_path, 1_500_000_000), tmp_path / "second")
    dist, again = tree(tmp_path / "first"), tree(tmp_path / "second")
    assert sorted(dist) == sorted(again)
    assert [name for name in dist if dist[name] != again[name]] == [], "these files differ between the two runs"
    assert first.replace("/first", "/second") == second

    for name, built in BUILT.items():
        assert dist[name] == built.read_bytes(), f"{name} is not the build"
    assert set(dist) >= {"SHA256SUMS", "oci/index.json", "oci/oci-layout"} | {f"{name}.cdx.json" for name in BUILT}
    # SHA256SUMS names every other file, and sha256sum agrees with it.
    sums = dist["SHA256SUMS"].decode().splitlines()
    assert [line.split("  ", 1)[1] for line in sums] == sorted(set(dist) - {"SHA256SUMS"})
    subprocess.run(["sha256sum", "--check", "--quiet", "SHA256SUMS"], cwd=tmp_path / "first", check=True, timeout=60)
    # The digest printed is the image's manifest, the one to pin.
    [manifest] = json.loads(dist["oci/index.json"])["manifests"]
    assert f"OCI image digest (the sha256 to pin in deploy/*.yaml): {manifest['digest']}" in first.splitlines()


def test_each_sbom_lists_the_crates_linked_into_its_artifact(tmp_path: Path) -> None:
    package(seed(tmp_path, 1_000_000_000), tmp_path / "dist")
    lock = {(p["name"], p["version"]): p for p in tomllib.loads((REPO / "Cargo.lock").read_text())["package"]}
    linked = {}
    for name, built in BUILT.items():
        sbom = json.loads((tmp_path / "dist" / f"{name}.cdx.json").read_text())
        assert sbom["bomFormat"] == "CycloneDX"
        assert sbom["metadata"]["component"]["hashes"] == [{"alg": "SHA-256",
                                                            "content": hashlib.sha256(built.read_bytes()).hexdigest()}]
        linked[name] = {component["name"] for component in sbom["components"]}
        for component in sbom["components"]:
            locked = lock[(component["name"], component["version"])]
            assert component["licenses"], component["name"]
            if "source" in locked:
                assert component["purl"] == f"pkg:cargo/{component['name']}@{component['version']}"
                assert component["hashes"] == [{"alg": "SHA-256", "content": locked["checksum"]}]
        refs = {component["bom-ref"] for component in sbom["components"]}
        assert all(set(entry["dependsOn"]) <= refs for entry in sbom["dependencies"])
    # Only what each artifact links: no build scripts' dependencies, no proc macros, no other
    # target's crates.
    assert {"switchblade-filter", "switchblade-core", "proxy-wasm", "prost-reflect"} <= linked["switchblade_filter.wasm"]
    assert {"switchblade-module", "switchblade-core"} <= linked["libswitchblade_module.so"]
    assert "proxy-wasm" not in linked["libswitchblade_module.so"]
    assert {"switchblade-cli", "clap", "protox"} <= linked["switchblade"]
    assert not {"protox", "serde_derive", "syn"} & (linked["switchblade_filter.wasm"] | linked["libswitchblade_module.so"])
    assert not {"serde_derive", "syn"} & linked["switchblade"]


# The builds the suite made as the release makes them, each alone: their target directory, cargo
# arguments, and the workspace crates they compile (whose paths change with the checkout). Not
# the CLI: the suite builds it together with the test peers, whose dependencies' features
# Cargo unifies with its own, so the suite's CLI is not the release's (built alone) byte for
# byte; building the release's here would cost a second full link of it.
BUILDS = {
    "switchblade_filter.wasm": ("wasm32-wasip1/release",
                                ["-p", "switchblade-filter", "--target", "wasm32-wasip1", "--release"],
                                [("switchblade-core", "filter/core"), ("switchblade-filter", "filter/wasm")]),
    "libswitchblade_module.so": ("module", ["-p", "switchblade-module", "--profile", "module"],
                                 [("switchblade-core", "filter/core"), ("switchblade-module", "filter/module")]),
}


REBUILT_ELSEWHERE = pytest.StashKey[dict[str, tuple[Path, Path, subprocess.Popen]]]()


def start_builds_elsewhere(work: Path) -> dict[str, tuple[Path, Path, subprocess.Popen]]:
    """Copies the tree as it is (what the suite built) to another path under `work` and starts
    each artifact's build there, into a target directory of its own so that they run side by
    side (Cargo locks a target directory), each starting from the suite's dependencies
    (scripts/seed-target). At the lowest priority: conftest starts them as the session begins,
    to run in the time the other tests leave the CPUs idle. For each artifact: the checkout, the
    target directory, the build."""
    checkout = work / "elsewhere" / "switchblade"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, checkout / name)
    builds = {}
    for name, (profile, arguments, _) in BUILDS.items():
        target_dir = work / f"target-{name}"
        subprocess.run([REPO / "scripts" / "seed-target", target_dir, profile], check=True, timeout=120)
        # Its output to a file: nothing reads a pipe until the test runs.
        with open(work / f"build-{name}.log", "w") as log:
            builds[name] = (checkout, target_dir, subprocess.Popen(
                ["nice", "-n", "19", "cargo", "build", "--locked", *arguments], cwd=checkout,
                env={**os.environ, "CARGO_TARGET_DIR": str(target_dir)}, stdout=subprocess.DEVNULL,
                stderr=log, start_new_session=True))
    return builds


def stop_builds(builds: dict[str, tuple[Path, Path, subprocess.Popen]]) -> None:
    """Stops the builds still running, with the compilers they started."""
    for _, _, build in builds.values():
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
            build.wait()


def test_the_builds_from_a_checkout_elsewhere_are_the_same(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    for name in BUILDS:
        assert str(REPO).encode() not in BUILT[name].read_bytes(), f"{name} holds the checkout's path"

    builds = request.config.stash.get(REBUILT_ELSEWHERE, None) or start_builds_elsewhere(tmp_path)
    try:
        for name, (checkout, target_dir, build) in builds.items():
            build.wait(timeout=1200)
            stderr = (target_dir.parent / f"build-{name}.log").read_text()
            assert build.returncode == 0, stderr
            # It did compile the workspace's crates from there.
            for crate, folder in BUILDS[name][2]:
                assert f"Compiling {crate} v{version()} ({checkout}/{folder})" in stderr, stderr
            rebuilt = (target_dir / BUILT[name].relative_to(REPO / "target")).read_bytes()
            assert hashlib.sha256(rebuilt).hexdigest() == hashlib.sha256(BUILT[name].read_bytes()).hexdigest(), \
                f"{name} depends on the checkout's path"
    finally:
        stop_builds(builds)


def test_a_tagged_release_is_a_committed_tree_with_its_changelog(tmp_path: Path) -> None:
    """`scripts/release --tag`: refused while CHANGELOG.md has no section for the workspace's
    version (or the tree is not committed, or the tag exists), and otherwise tags HEAD."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)], check=True, timeout=120)
    git = ["git", "-C", str(clone), "-c", "user.name=Release Test", "-c", "user.email=release@example.com"]
    version = tomllib.loads((clone / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    target_dir = seed(tmp_path, 1_000_000_000)

    def release() -> subprocess.CompletedProcess:
        return subprocess.run([str(clone / "scripts/release"), "--no-build", "--tag", "--target-dir", str(target_dir),
                               "--dist", str(tmp_path / "dist")], cwd=clone, capture_output=True, text=True, timeout=120)

    changelog = clone / "CHANGELOG.md"
    text = changelog.read_text()
    if f"\n## {version}\n" in text:
        text = text.replace(f"\n## {version}\n", "\n## Earlier\n")
        changelog.write_text(text)
        subprocess.run([*git, "commit", "--quiet", "-am", "no section for the version"], check=True, timeout=60)
    refused = release()
    assert refused.returncode == 1
    assert f'CHANGELOG.md has no section "## {version}"' in refused.stderr, refused.stderr
    changelog.write_text(text.replace("\n## Unreleased\n", f"\n## {version} (2026-12-05)\n", 1))
    uncommitted = release()
    assert uncommitted.returncode == 1 and "not committed" in uncommitted.stderr, uncommitted.stderr
    subprocess.run([*git, "commit", "--quiet", "-am", f"Switchblade {version}"], check=True, timeout=60)
    released = release()
    assert released.returncode == 0, released.stderr
    tagged = subprocess.run([*git, "rev-parse", f"v{version}^{{commit}}"], capture_output=True, text=True, check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert tagged.stdout == head.stdout
    assert (tmp_path / "dist/SHA256SUMS").exists()
    again = release()
    assert again.returncode == 1 and f"the tag v{version} exists already" in again.stderr, again.stderr
