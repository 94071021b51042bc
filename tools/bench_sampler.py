"""Where the backend's CPU goes, by part of the code: a profiler inside the benchmark's process.

The latency benchmark says *which stage* a card waited in (``stages_ms``); this says *which part
of the code* used the CPU (issue 31, item 4: where a target is missed, which part of the CPU).
Every 5 ms of the process's CPU time (``setitimer(ITIMER_PROF)``, all threads) a signal's
handler looks at the event loop's Python stack and files the tick under the first part it
recognises, from the innermost frame outwards: a library that is a part of its own (the MQTT
client, SQLite) counts as itself, any other library (pydantic, json, asyncio's plumbing) as the
part of ours that called it. A tick that finds the loop waiting in its poll was spent outside
the loop's Python code: the journal's thread, the loop's C code, the kernel.
"""

from __future__ import annotations

import functools
import os
import signal
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

#: (part, path fragments): the first part whose fragment is in a frame's file name names it.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("mqtt client", ("/gmqtt/", "/paho/", "/aiomqtt/", "drivers/mqtt")),
    ("journal", ("dealer/edge/journal", "/sqlite3/", "/psycopg")),
    ("scanner and command input", ("drivers/scanner", "drivers/frames", "dealer/edge/inputs",
                                   "dealer/edge/ingress", "dealer/edge/scan", "dealer/edge/roles")),
    ("rules and round machine (core, games)", ("dealer/core/", "dealer/games/", "/pokerkit/", "/phevaluator/")),
    ("states, events and results out", ("dealer/edge/publisher", "dealer/edge/catchup", "dealer/edge/releaser",
                                        "dealer/edge/relay", "dealer/edge/outbox")),
    ("commit loop", ("dealer/edge/commit_loop",)),
    ("timers, leases and upkeep", ("dealer/edge/timers", "dealer/edge/leases", "dealer/edge/maintenance",
                                   "dealer/edge/links", "dealer/edge/house")),
    ("metrics", ("/prometheus_client/", "dealer/edge/metrics")),
    # nothing of ours but the loop's runner below: asyncio's and uvloop's own work (tasks,
    # futures, callbacks, handles) and the libraries they call
    ("event loop plumbing (tasks, futures, callbacks)", ("dealer/edge/runner", "dealer/cli/")),
    ("service (other)", ("dealer/", "drivers/")),
)
#: A thread whose innermost frames are only these is waiting, not working.
_WAITING = (("asyncio/runners.py", "run"), ("uvloop/__init__.py", "run"), ("asyncio/base_events.py", "run_forever"),
            ("asyncio/base_events.py", "_run_once"), ("selectors.py", "select"), ("threading.py", "wait"),
            ("concurrent/futures/thread.py", "_worker"), ("queue.py", "get"))


#: This checkout: our files are told apart by their path in it ("dealer/core/..."), libraries by
#: a folder in theirs ("/gmqtt/"), so a checkout under a folder named "dealer" confuses nothing.
_ROOT = str(Path(__file__).resolve().parents[1]) + os.sep


@functools.lru_cache(maxsize=4096)
def _part_of_file(path: str) -> str | None:
    ours = path[len(_ROOT):] if path.startswith(_ROOT) else None
    for part, fragments in PARTS:
        for f in fragments:
            if (f in path and ours is None) if f.startswith("/") else (ours is not None and ours.startswith(f)):
                return part
    return None


def part_of(frame: FrameType | None) -> str:
    """The part a stack (its innermost frame) is working in, or ``idle``."""
    if frame is None:
        return "idle"
    name, func = frame.f_code.co_filename, frame.f_code.co_name
    if any(name.endswith(f) and func == fn for f, fn in _WAITING):
        return "idle"
    while frame is not None:
        part = _part_of_file(frame.f_code.co_filename)
        if part is not None:
            return part
        frame = frame.f_back
    return "other (event loop, libraries)"


class Sampler:
    """Files every ``interval`` seconds of the process's CPU time (``ITIMER_PROF``: all threads,
    user and system) under the part the event loop's thread was running then. A tick that finds
    the loop waiting was spent elsewhere: another thread (the journal's writer) or the loop's own
    C code and the kernel (``outside the loop's Python code``). Started and stopped in the main
    thread (a signal's handler runs there), where ``dealer bench`` runs its event loop."""

    OUTSIDE = "outside the loop's Python code (journal thread, poll, kernel)"

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.ticks: Counter[str] = Counter()
        self.samples = 0
        self._old: Any = None

    def start(self) -> Sampler:
        self._old = signal.signal(signal.SIGPROF, self._tick)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)
        return self

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, self._old if self._old is not None else signal.SIG_DFL)

    def _tick(self, signum: int, frame: FrameType | None) -> None:
        self.samples += 1
        part = part_of(frame)
        self.ticks[self.OUTSIDE if part == "idle" else part] += 1

    def figures(self) -> dict[str, Any]:
        """Share of the process's CPU per part (0..1), largest first."""
        n = max(self.samples, 1)
        return {"interval_ms": round(self.interval * 1000, 1), "samples": self.samples,
                "cpu_share": {part: round(k / n, 3) for part, k in self.ticks.most_common() if k / n >= 0.001}}


__all__ = ["PARTS", "Sampler", "part_of"]
