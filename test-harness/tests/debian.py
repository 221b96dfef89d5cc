"""Debian packages a test needs (a real server, an API's protos), downloaded with apt-get and
unpacked into .work/debian, not installed: no root, only Debian's package lists."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from processes import REPO

DEBIAN = REPO / ".work/debian"


def unpacked(package: str) -> Path:
    """`package`'s files, downloaded and unpacked once (under a lock: the Wasm and module
    sessions may ask at once). Skips the test where apt-get cannot fetch it."""
    DEBIAN.mkdir(parents=True, exist_ok=True)
    root = DEBIAN / package
    with open(DEBIAN / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not root.is_dir():
            if shutil.which("apt-get") is None:
                pytest.skip(f"needs Debian's apt-get to fetch {package}")
            with tempfile.TemporaryDirectory() as download:
                fetched = subprocess.run(["apt-get", "download", package], cwd=download, capture_output=True,
                                         text=True, timeout=300)
                if fetched.returncode != 0:
                    pytest.skip(f"cannot download {package}: {fetched.stderr.strip()}")
                deb = next(Path(download).glob("*.deb"))
                partial = DEBIAN / f"{package}.partial"
                shutil.rmtree(partial, ignore_errors=True)
                subprocess.run(["dpkg-deb", "-x", str(deb), str(partial)], check=True, timeout=120)
                partial.rename(root)
    return root
