"""Recall of tool search on the benchmark sets, without Envoy: each API's catalog is built by
`switchblade config` from Debian's protos (as the search suite builds it), and every request of
a set is asked of `switchblade tools --search`, which ranks as the filter does.

    .venv/bin/python test-harness/search/recall.py [--misses] [SET...]

prints recall@1 and recall@5 per set and API (every set unless named, e.g. `unseen-3`), and
with --misses each request whose tool did not come first, with the rank it came at. Needs
`target/release/switchblade` (`cargo build --release -p switchblade-cli`)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from search_sets import APIS, SETS, api_config, rank, recall, search_with_cli, tasks  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", default=SETS, help="set names (default: every set)")
    parser.add_argument("--misses", action="store_true", help="list the requests whose tool did not come first")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        configs = {}
        for api in APIS:
            configs[api] = Path(folder) / f"{api}.json"
            configs[api].write_text(json.dumps(api_config(api)))
        for set_name in options.sets:
            line, every = [], []
            for api, config in configs.items():
                asked = tasks(set_name, api)
                ranks = [rank(found, task) for found, task in
                         zip(search_with_cli(config, [task["query"] for task in asked]), asked)]
                every += ranks
                line.append(f"{api} {shown(ranks)}")
                if options.misses:
                    for task, where in zip(asked, ranks):
                        if where != 1:
                            print(f"  {api:10} {where or '-':>2}  {task['query']!r} -> {task['expect']}")
            print(f"{set_name}: {len(every)} tasks, {shown(every)} ({'; '.join(line)})")


def shown(ranks: list[int | None]) -> str:
    at_1, at_5 = recall(ranks)
    return f"recall@1 {at_1:.2f}, recall@5 {at_5:.2f}"


if __name__ == "__main__":
    main()
