"""The tool-search benchmark sets (`test-harness/search/`, README there): the APIs' catalogs built
from their Debian protos, the sets in the order they were written, and recall over them. Shared
by the search suite (through a real Envoy), `test-harness/search/recall.py` (the CLI's ranking,
no Envoy) and the benchmark's catalogs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from debian import unpacked
from processes import CLI_BIN, REPO

FOLDER = REPO / "test-harness/search"
# `tasks.json` holds the APIs, and is the set the ranking was tuned on.
APIS = json.loads((FOLDER / "tasks.json").read_text())["apis"]
# Written in this order, each apart from the ranking: `tasks` was tuned on; `held-out`'s misses
# were seen while tuning; the rest measured the ranking as it stood when they were written.
SETS = ["tasks", "held-out", "fresh", "unseen", "unseen-2", "unseen-3", "unseen-4", "unseen-5", "unseen-6"]
UNTUNED = SETS[1:]


def tasks(set_name: str, api: str | None = None) -> list[dict]:
    """The set's tasks, or those of one API."""
    every = json.loads((FOLDER / f"{set_name}.json").read_text())["tasks"]
    return [task for task in every if api is None or task["api"] == api]


def api_config(name: str, cluster: str = "demo_grpc") -> dict:
    """`switchblade config` over the API's protos, every service whole, streams included."""
    api = APIS[name]
    includes = [unpacked(api["package"]) / api["include"]]
    includes += [unpacked(extra["package"]) / extra["include"] for extra in api.get("extra_includes", [])]
    command = [str(CLI_BIN), "config", *[arg for path in includes for arg in ("-I", str(path))], *api["protos"],
               "--streaming"]
    for service in api["services"]:
        command += ["--service", f"{service}={cluster}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"switchblade config for {name}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def tool_name(selector: str) -> str:
    """The tool a method selector (`package.Service/Method`) is served as."""
    service, method = selector.split("/")
    return f"{service.rsplit('.', 1)[-1]}_{method}"


def rank(found: list[str], task: dict) -> int | None:
    """Where the task's tool came among those found (1 is first), or None."""
    expected = tool_name(task["expect"])
    return found.index(expected) + 1 if expected in found else None


def recall(ranks: list[int | None]) -> tuple[float, float]:
    """recall@1 and recall@5 of these ranks."""
    at_1 = sum(rank == 1 for rank in ranks) / len(ranks)
    at_5 = sum(rank is not None and rank <= 5 for rank in ranks) / len(ranks)
    return at_1, at_5


def search_with_cli(config: Path, queries: list[str], limit: int = 5) -> list[list[str]]:
    """The tools `switchblade tools --search` finds for each query, best first: the filter's
    ranking, without Envoy."""
    command = [str(CLI_BIN), "tools", str(config), "--limit", str(limit)]
    for query in queries:
        command += ["--search", query]
    answers = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300).stdout
    return [answer["tools"] for answer in json.loads(answers)]
