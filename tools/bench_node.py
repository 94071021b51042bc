"""One backend node of ``dealer bench latency --processes N``: its own process, its own share
of the tables by lease.

Several backend processes on one host share the tables through the PostgreSQL journal's table
leases (docs/cluster.md), with the same guarantees as nodes on several hosts: each table is
served by the one node holding its lease, fenced on every row. The benchmark starts N of
these; each runs a :class:`~dealer.edge.service.Service` like ``dealer run`` does and talks to
the benchmark over its standard streams, one JSON object a line:

* it prints ``{"owned": k}`` whenever the number of tables it holds changes (and at start);
* on ``start`` it forgets the latencies so far and notes its CPU time;
* on ``stop`` it prints its figures (``samples_ns``: every scan-to-publish latency since
  ``start``; ``cpu_s``; ``rss_mb``; ``owned``; ``rounds_opened``; ``journal_commit_ms``) and
  stops cleanly,
  releasing its leases.

Its logs go to its standard error (the benchmark keeps them in a file and quotes their tail
when a node fails).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from dealer.edge.logs import configure_logging
from dealer.edge.runner import run_loop

#: How often the node says how many tables it holds.
OWNED_EVERY_S = 0.1


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def _serve(args: argparse.Namespace) -> int:
    from tools.bench import _cpu_s, _histogram_ms, _rss_mb, _settings, backend

    settings = _settings(Path(args.workdir), args.broker, args.tables, args.fsync, journal_url=args.journal_url,
                         node_id=args.node_id)
    service, metrics = backend(settings, args.broker, f"bench-{args.node_id}")
    run = asyncio.create_task(service.run(), name="service")
    commands: asyncio.Queue[str] = asyncio.Queue()

    async def read_commands() -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            cmd = line.strip() or "stop"  # end of input: the benchmark is gone
            await commands.put(cmd)
            if cmd == "stop":  # nothing more to read (a thread left in readline would hold the exit)
                return

    reader = asyncio.create_task(read_commands(), name="commands")
    cpu0 = _cpu_s()
    said = -1
    try:
        while True:
            if run.done():
                exc = run.exception() if not run.cancelled() else None
                _say({"error": f"the backend stopped: {exc!r}" if exc else "the backend stopped"})
                return 1
            owned = len(service.tables)
            if owned != said:
                _say({"owned": owned})
                said = owned
            try:
                cmd = await asyncio.wait_for(commands.get(), OWNED_EVERY_S)
            except TimeoutError:
                continue
            if cmd == "start":
                service.latency_samples.clear()
                for v in service.publisher.stages.values():
                    v.clear()
                cpu0 = _cpu_s()
            elif cmd == "stop":
                break
        _say({"samples_ns": list(service.latency_samples), "stages_ns": service.publisher.stages,
              "cpu_s": round(_cpu_s() - cpu0, 3),
              "rss_mb": _rss_mb(), "owned": len(service.tables),
              "rounds_opened": sum(t.last_seq for t in service.tables.values()),
              "journal_commit_ms": _histogram_ms(metrics)})
        return 0
    finally:
        reader.cancel()
        run.cancel()
        await asyncio.wait({run}, timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--broker", required=True)
    ap.add_argument("--tables", type=int, required=True)
    ap.add_argument("--journal-url", required=True)
    ap.add_argument("--node-id", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--no-fsync", dest="fsync", action="store_false")
    ap.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    args = ap.parse_args()
    configure_logging("warning")
    started = time.monotonic()
    try:
        code = run_loop(_serve(args), args.loop)
    except Exception as exc:  # one line for the benchmark, never a traceback on its output
        _say({"error": f"{type(exc).__name__}: {exc}", "after_s": round(time.monotonic() - started, 1)})
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
