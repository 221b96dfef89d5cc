"""The benchmark command works: a smoke run of every system, whose answers it checks itself
(each system must answer item 1 correctly, and every request counted must have reached the
upstream), with the ratios and the scale figures printed."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import filter_build
from processes import REPO, free_port


def test_the_benchmark_command_runs_every_system_side_by_side():
    if filter_build.current() is not filter_build.MODULE:
        # The module's session waits on Envoy and its peers most of the time; the Wasm filter's,
        # beside it, is the longer one, and spends its CPU compiling the .wasm.
        pytest.skip("the benchmark runs both builds itself; it runs once, in the --build module session")
    run = subprocess.run([str(REPO / "scripts/bench"), "--smoke"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:] + run.stdout[-4000:]
    table = run.stdout
    for key in [*"abcdefghiklmnopqr", "W1k", "M1k", "W3", "M3", "S1k", "T1k", "S3", "T3"]:
        assert re.search(rf"^\| \({key}\) .* \| 1 \| \d+ \|", table, re.MULTILINE), f"no row for ({key}):\n{table}"
    # The ratios of Switchblade to the REST transcoder, the native MCP chain and the plain gRPC
    # proxy, and of the floors, per concurrency.
    ratios = re.findall(r"^\| \((\w)\)/\((\w)\) \| (\d+) \| (\d+\.\d\d) \| (\d+\.\d\d) \| (\d+\.\d\d) \|", table,
                        re.MULTILINE)
    pairs = [("e", "c"), ("e", "d"), ("i", "d"), ("h", "c"), ("h", "d"), ("h", "b"), ("n", "b"), ("n", "c"),
             ("h", "n"), ("m", "n"), ("o", "n"), ("q", "p"), ("r", "p"), ("k", "e"), ("l", "h")]
    assert [row[:3] for row in ratios] == [(*pair, "1") for pair in pairs], table
    # The latency each way of reaching the method adds to the plain gRPC proxy, per concurrency.
    latency = table.split("Latency added per call to the plain gRPC proxy (b):")[1].split("Streams, per message:")[0]
    added = re.findall(r"^\| \((\w)\) [^|]+ \| (\d+) \| -?\d+ \| -?\d+ \|$", latency, re.MULTILINE)
    assert added == [(key, "1") for key in "cdeih"], latency
    # The streams per message: messages per second and Envoy CPU per 1000 messages.
    for key in "pqr":
        assert re.search(rf"^\| \({key}\) .* \| 1 \| \d+ \| \d+\.\d{{4}} \|", table.split("Streams, per message:")[1],
                         re.MULTILINE), table
    # The scale catalog in both builds: a build per Wasm VM, one for the module (whose memory is
    # Envoy's), and every page listed.
    wasm = re.search(r"^\| \(W1k\) .* \| 1,001 \| 1,000 \| \d+, \d+.* \| [\d.]+ MiB \| [\d.]+ MiB \| [\d.]+ MiB \| "
                     r"[\d,]+ \| [\d,]+ \| 2 pages in [\d.]+ ms \|$", table, re.MULTILINE)
    module = re.search(r"^\| \(M1k\) .* \| 1,001 \| 1,000 \| \d+ \| – \| [\d.]+ MiB \| [\d.]+ MiB \| "
                       r"[\d,]+ \| [\d,]+ \| 2 pages in [\d.]+ ms \|$", table, re.MULTILINE)
    assert wasm and module, table
    # In search mode the same catalog lists two tools in one short page, whatever its size.
    for key in ("S1k", "T1k"):
        row = re.search(rf"^\| \({key}\) .* \| 1,001 \| 2 \| .* \| ([\d,]+) \| ([\d,]+) \| 1 page in [\d.]+ ms \|$", table,
                        re.MULTILINE)
        assert row and int(row.group(2).replace(",", "")) <= 4096, table
    # A search's cost against a tools/call of GetItem in the same build, in the same minutes.
    searches = table.split("A search against a tools/call of GetItem")[1]
    found = re.findall(r"^\| \((\w+)\)/\((\w)\) \| (\d+) \| \d+\.\d\d \| \d+\.\d\d \| \d+\.\d\d \|$", searches, re.MULTILINE)
    assert found == [("S1k", "e", "1"), ("T1k", "h", "1")], searches
    # Where Envoy's memory goes, in both builds.
    for build in ("Wasm filter", "dynamic module"):
        assert re.search(rf"^\| {build}, 3 tools .* \| 1 \| \d+ MiB \| \d+ \| \d+ \| \d+ \(\d+, \d+, \d+\) \| \d+ \|$", table,
                         re.MULTILINE), table
    assert re.search(r"`\.wasm`: [\d,]+ bytes", table), table


def test_no_port_is_handed_out_twice():
    """Two processes started one after the other (an Envoy's listener and its admin, round after
    round of the benchmark) are never given the same port: once checked, a port is free again."""
    ports = [free_port() for _ in range(1000)]
    assert len(set(ports)) == len(ports)


def test_the_two_sessions_pick_ports_from_bands_apart(monkeypatch):
    """scripts/test runs the Wasm and the module sessions at once: a port one picks is never
    one the other can pick."""
    picked = {}
    for build in (filter_build.WASM, filter_build.MODULE):
        monkeypatch.setattr(filter_build, "_current", [build])
        picked[build.name] = [free_port() for _ in range(200)]
    assert max(picked["wasm"]) < min(picked["module"]), picked


def test_a_round_that_fails_to_run_is_run_once_more_and_reported(monkeypatch):
    sys.path.insert(0, str(REPO / "test-harness/bench"))
    import bench

    outcomes = [OSError("cannot bind 127.0.0.1:51669: Address already in use"), ["a run"]]

    def run_system(*_args, **_kwargs):
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(bench, "run_system", run_system)
    system = bench.SYSTEMS_BY_KEY["h"]
    retried: list[str] = []
    assert bench.run_system_retried(system, None, "", None, 3, retried) == ["a run"]
    assert retried == ["(h) round 3: OSError: cannot bind 127.0.0.1:51669: Address already in use"]
    # A second failure of the same round stops the benchmark.
    outcomes[:] = [OSError("first"), OSError("second")]
    with pytest.raises(OSError, match="second"):
        bench.run_system_retried(system, None, "", None, 3, retried)


@pytest.mark.parametrize("first, order", [([], ["e", "E", "h", "H"]), (["--baseline-first"], ["E", "e", "H", "h"])])
def test_a_baseline_runs_beside_its_counterpart_in_the_order_asked(monkeypatch, tmp_path, first, order):
    """`--baseline` pairs each system with the other checkout's build of it, right after it, or
    right before it with `--baseline-first`: a change is measured in both orders. The scale
    part's searches pair the same way (`side_by_side`)."""
    sys.path.insert(0, str(REPO / "test-harness/bench"))
    import bench
    from systems import baseline_builds

    for build in baseline_builds(tmp_path):
        build.parent.mkdir(parents=True, exist_ok=True)
        build.write_bytes(b"")
    monkeypatch.setattr(sys, "argv", ["bench.py", "--systems", "eh", "--baseline", str(tmp_path), *first])
    options = bench.arguments()
    assert [system.key for system in options.systems_run] == order
    search = bench.search_system("S1k", "a search", None)
    counterpart = bench.search_system("S1k-base", "the baseline's search", None, build=baseline_builds(tmp_path)[0])
    assert bench.side_by_side(search, counterpart, options) == (
        [counterpart, search] if first else [search, counterpart])
    assert bench.side_by_side(search, None, options) == [search]


def test_a_baseline_without_builds_is_refused(monkeypatch, tmp_path, capsys):
    sys.path.insert(0, str(REPO / "test-harness/bench"))
    import bench

    monkeypatch.setattr(sys, "argv", ["bench.py", "--systems", "e", "--baseline", str(tmp_path)])
    with pytest.raises(SystemExit):
        bench.arguments()
    refusal = capsys.readouterr().err
    assert "the baseline has no builds" in refusal
    # (e) and the scale part's Wasm searches run the same build: it is named once.
    assert refusal.count("switchblade_filter.wasm") == 1, refusal
