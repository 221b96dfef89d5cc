"""docker-compose.yml for real: Envoy with the filter and the demo upstream come up in
containers, the official Python SDK lists and calls tools through them, the upstream counts the
call, and `down` leaves nothing behind. Runs wherever a Docker daemon answers (.ci/run starts
one); the images it names are pulled, or built locally by scripts/docker-standins."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess

import httpx2
import pytest
from mcp import Client

import filter_build
from processes import REPO, free_port, wait_until

COMPOSE = shutil.which("docker-compose")
DOCKER = shutil.which("docker")


def docker_answers() -> bool:
    if DOCKER is None:
        return False
    return subprocess.run([DOCKER, "info"], capture_output=True, timeout=30).returncode == 0


pytestmark = pytest.mark.skipif(
    COMPOSE is None or not docker_answers(),
    reason="no Docker daemon answers, or no docker-compose (.ci/run installs both and starts dockerd as root; "
           "elsewhere: apt-get install docker.io docker-compose, then start dockerd)",
)


class Compose:
    def __init__(self) -> None:
        self.port, self.admin_port, self.control_port = free_port(), free_port(), free_port()
        self.project = f"switchblade-test-{self.port}"
        self.environment = {**os.environ, "SWITCHBLADE_PORT": str(self.port),
                            "SWITCHBLADE_ADMIN_PORT": str(self.admin_port),
                            "SWITCHBLADE_CONTROL_PORT": str(self.control_port)}

    def run(self, *arguments: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(COMPOSE), "-p", self.project, *arguments], cwd=REPO, env=self.environment,
                              capture_output=True, text=True, timeout=timeout)

    def containers(self) -> list[str]:
        listed = subprocess.run([str(DOCKER), "ps", "-a", "-q", "--filter", f"label=com.docker.compose.project={self.project}"],
                                capture_output=True, text=True, timeout=30, check=True)
        return listed.stdout.split()

    def ready(self) -> bool:
        envoy = httpx2.get(f"http://127.0.0.1:{self.admin_port}/ready", timeout=1)
        calls = httpx2.get(f"http://127.0.0.1:{self.control_port}/calls", timeout=1)
        return envoy.status_code == 200 and calls.status_code == 200

    def upstream_calls(self) -> dict[str, int]:
        return httpx2.get(f"http://127.0.0.1:{self.control_port}/calls", timeout=5).raise_for_status().json()


@pytest.fixture(scope="module")
def compose():
    # docker-compose.yml runs the Wasm filter whatever the session's build. It runs in the
    # module's session, the shorter one: scripts/test runs both at once and waits for the longer.
    if filter_build.current() is not filter_build.MODULE:
        pytest.skip("docker-compose.yml runs the Wasm filter whatever the build under test; it runs once, in "
                    "the --build module session")
    standins = subprocess.run([str(REPO / "scripts/docker-standins")], capture_output=True, text=True, timeout=900)
    assert standins.returncode == 0, standins.stderr
    stack = Compose()
    up = stack.run("up", "-d", "--build")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        wait_until(stack.ready, "the compose stack", timeout=60)
        yield stack
    finally:
        logs = stack.run("logs", "--no-color", timeout=60).stdout
        down = stack.run("down", "--volumes", "--remove-orphans")
        assert down.returncode == 0, down.stdout + down.stderr
        assert stack.containers() == [], f"containers left behind by {stack.project}"
        if up.returncode != 0:
            print(logs)


async def session(url: str, mode: str) -> tuple[list[str], object]:
    async with Client(url, mode=mode) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        return tools, await client.call_tool("CatalogService_GetItem", {"id": "3"})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_python_sdk_lists_and_calls_tools_through_compose(compose: Compose, mode: str) -> None:
    before = compose.upstream_calls().get("/demo.catalog.v1.CatalogService/GetItem", 0)
    tools, item = asyncio.run(session(f"http://127.0.0.1:{compose.port}/mcp", mode))
    assert tools == ["CatalogService_Search", "CatalogService_GetItem", "UserService_GetUser"]
    assert item.is_error is False
    assert item.structured_content["name"] == "The Pragmatic Programmer"
    # The call reached the upstream container.
    assert compose.upstream_calls()["/demo.catalog.v1.CatalogService/GetItem"] == before + 1


def test_published_ports_are_loopback_only(compose: Compose) -> None:
    published = subprocess.run([str(DOCKER), "ps", "--format", "{{.Ports}}", "--filter",
                                f"label=com.docker.compose.project={compose.project}"],
                               capture_output=True, text=True, timeout=30, check=True).stdout
    bindings = [binding.strip() for line in published.splitlines() for binding in line.split(",") if "->" in binding]
    assert bindings and all(binding.startswith("127.0.0.1:") for binding in bindings), bindings
