"""Shared fixtures: one demo upstream and one Envoy for the session, torn down whatever happens."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import filter_build  # noqa: E402
from filter_build import demo_plugin  # noqa: E402
from mcp_client import Mcp  # noqa: E402
from processes import ENVOY_BIN, UPSTREAM_BIN, Envoy, Upstream, fixed_ports_held  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--build", choices=sorted(filter_build.BUILDS), default="wasm",
                     help="which build of the filter Envoy runs: the Wasm filter or the dynamic module")


def pytest_report_header(config: pytest.Config) -> str:
    return f"switchblade build: {config.getoption('--build')}"


def pytest_sessionstart(session: pytest.Session) -> None:
    build = filter_build.choose(session.config.getoption("--build"))
    missing = [str(p) for p in (ENVOY_BIN, UPSTREAM_BIN, build.binary) if not p.exists()]
    if missing:
        raise pytest.UsageError(f"run scripts/test (it builds and installs these first); missing: {', '.join(missing)}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The benchmark's smoke run (in the module's session) and the cel build's test (in the Wasm
    filter's) go last: most of the builds started in the background (the cel build of
    scripts/test, the release test's rebuild) are over by then (run first, the smoke run took
    140 s where it takes 100 alone), and the cel test does not wait on them (it waited 71 s for
    the cel builds' last link in CI when it ran before the smoke run)."""
    bench = [item for item in items if item.name == "test_the_benchmark_command_runs_every_system_side_by_side"]
    cel = [item for item in items if item.name == "test_the_cel_build_enforces_cel_rules"]
    items[:] = [item for item in items if item not in bench and item not in cel] + bench + cel


def pytest_collection_finish(session: pytest.Session) -> None:
    """The release test's builds elsewhere start now, in the background, at the lowest priority:
    they take minutes of CPU the other tests mostly leave idle (test_release.py)."""
    wanted = "test_the_builds_from_a_checkout_elsewhere_are_the_same"
    if filter_build.current() is not filter_build.WASM or not any(item.name == wanted for item in session.items):
        return
    import test_release  # noqa: PLC0415 (a test module, imported only when its test runs)
    work = Path(tempfile.mkdtemp(prefix="switchblade-release-"))
    session.config.add_cleanup(lambda: shutil.rmtree(work, ignore_errors=True))
    builds = test_release.start_builds_elsewhere(work)
    # Added after the removal above: cleanups run last first, so the builds stop before it.
    session.config.add_cleanup(lambda: test_release.stop_builds(builds))
    session.config.stash[test_release.REBUILT_ELSEWHERE] = builds


@pytest.fixture
def fixed_ports():
    """The demo's and the quick start's fixed ports, for this test alone across both sessions."""
    with fixed_ports_held():
        yield


@pytest.fixture(scope="session")
def upstream():
    server = Upstream().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def envoy(upstream: Upstream, request: pytest.FixtureRequest):
    proxy = Envoy(upstream).start()
    yield proxy
    proxy.stop()
    if request.session.testsfailed:
        sys.stderr.write(f"\n----- Envoy log ({proxy.log_path}) -----\n{proxy.logs()[-20000:]}\n")


@pytest.fixture
def mcp(envoy: Envoy, upstream: Upstream) -> Mcp:
    upstream.reset()
    return Mcp(envoy.mcp_url)


@pytest.fixture(scope="session")
def paged_envoy(upstream: Upstream):
    """The demo with one tool per tools/list page, to exercise cursors."""
    plugin = demo_plugin()
    plugin["tools_list"] = {"page_size": 1, "ttl_ms": 60000}
    proxy = Envoy(upstream, plugin, name="envoy-paged").start()
    yield proxy
    proxy.stop()
