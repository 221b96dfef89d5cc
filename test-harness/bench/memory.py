"""Where an idle Envoy's resident memory goes, by build, worker threads and catalog.

Envoy's RSS is split by what /proc/PID/smaps says each page belongs to: Envoy's own binary
(V8 is linked into it, so the Wasm build pages in more of it), executable anonymous memory
(V8's compiled Wasm code), tcmalloc's heap (Envoy's admin /memory: what is allocated, what is
free but kept, and the threads' caches) and the rest of the anonymous memory (V8's own heaps and
the Wasm VMs' linear memories among it).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx2

MIB = 2**20


@dataclass
class MemoryFigures:
    rss: int
    binary: int
    jit_code: int
    other_anonymous: int
    heap_size: int
    heap_allocated: int
    heap_free: int
    thread_caches: int


def resident_by_kind(pid: int) -> Counter[str]:
    """Resident bytes of the process, by what the mapping holds."""
    resident: Counter[str] = Counter()
    kind = "other"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        header = re.match(r"^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$", line)
        if header:
            perms, name = header.groups()
            if not name:
                kind = "jit_code" if "x" in perms else "anonymous"
            elif Path(name).name.startswith("envoy"):
                kind = "binary"
            else:
                kind = "other"
        elif line.startswith("Rss:"):
            resident[kind] += int(line.split()[1]) * 1024
    return resident


def memory_figures(pid: int, admin_url: str) -> MemoryFigures:
    resident = resident_by_kind(pid)
    heap = {name: int(value) for name, value in httpx2.get(f"{admin_url}/memory", timeout=2).json().items()}
    return MemoryFigures(
        rss=sum(resident.values()),
        binary=resident["binary"],
        jit_code=resident["jit_code"],
        # tcmalloc's heap is anonymous memory too; what is left is V8's and the VMs'.
        other_anonymous=max(resident["anonymous"] - heap["heap_size"] + heap["pageheap_unmapped"], 0),
        heap_size=heap["heap_size"] - heap["pageheap_unmapped"],
        heap_allocated=heap["allocated"],
        heap_free=heap["pageheap_free"],
        thread_caches=heap["total_thread_cache"],
    )


def memory_table(rows: list[tuple[str, int, MemoryFigures]]) -> str:
    lines = ["| Envoy | workers | RSS | Envoy binary | JIT code | tcmalloc heap (allocated, free, thread caches) "
             "| other anonymous |", "|---|---:|---:|---:|---:|---:|---:|"]
    for title, workers, figures in rows:
        lines.append(
            f"| {title} | {workers} | {figures.rss / MIB:.0f} MiB | {figures.binary / MIB:.0f} | "
            f"{figures.jit_code / MIB:.0f} | {figures.heap_size / MIB:.0f} ({figures.heap_allocated / MIB:.0f}, "
            f"{figures.heap_free / MIB:.0f}, {figures.thread_caches / MIB:.0f}) | "
            f"{figures.other_anonymous / MIB:.0f} |")
    return "\n".join(lines)
