"""``dealer bench against REV``: the latency benchmark of an older commit beside this checkout's,
in interleaved turns of one run.

Figures on one VM move by up to three times between machines and by tens of percent between
minutes, so a "before" and an "after" mean something only when they are taken in turns on the
same machine in the same run (issue 17: CPU per card "against today's figure measured in the
same run from a checkout of today's code"). This checks REV out into a temporary git worktree,
puts **this** checkout's load generator (``simulators/loadgen.py``) into it, so both backends
meet the same load (rounds out of step, every result acknowledged as a studio's settlement
does), and runs ``dealer bench latency`` in each tree in turns: REV, this checkout, REV, ...
Each turn is its own process with its own private broker, and has a deadline. The worktree is
removed at the end.

Prints one JSON object: every turn's figures, and per side the median of its turns' CPU per
card and scan→publish p50 / p99, with the change from REV to this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from simulators.procs import die_with_parent

ROOT = Path(__file__).resolve().parent.parent
#: Seconds a turn may take beyond its measured seconds (baselines, start, a 1,000-table adoption).
TURN_GRACE_S = 300.0
#: The load is this checkout's; the backend, its journal and its broker client are REV's.
SHARED_LOAD = ("simulators/loadgen.py", "simulators/feed.py")  # the load speaks protocols 1 and 2


class AgainstError(RuntimeError):
    """The comparison cannot run (no git checkout, an unknown revision, a turn that failed)."""


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise AgainstError("git is not installed") from None
    if done.returncode != 0:
        msg = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise AgainstError(f"git {' '.join(args)}: {msg}")
    return done.stdout.strip()


def _turn(tree: Path, tables: int, seconds: float, loop: str) -> dict[str, Any]:
    """One ``dealer bench latency`` in ``tree`` (its own code first on the path); its figures."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DEALER_")}
    env["PYTHONPATH"] = str(tree)
    cmd = [sys.executable, "-m", "dealer", "bench", "latency", "--tables", str(tables), "--seconds", f"{seconds:g}",
           "--loop", loop]
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=seconds + TURN_GRACE_S,
                              preexec_fn=die_with_parent)  # a killed comparison leaves no benchmark behind
    except subprocess.TimeoutExpired:
        raise AgainstError(f"a turn in {tree.name} did not finish within {seconds + TURN_GRACE_S:g} s") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise AgainstError(f"the benchmark in {tree.name} failed: {why}")
    try:
        return json.loads(lines[-1])  # type: ignore[no-any-return]  # the benchmark's last line is its JSON figures object
    except json.JSONDecodeError:
        raise AgainstError(f"the benchmark in {tree.name} printed no JSON: {lines[-1][:200]}") from None


def _digest(fig: dict[str, Any]) -> dict[str, Any]:
    s2p = fig.get("scan_to_publish_ms") or {}
    cpu = fig.get("backend_cpu") or {}
    return {"cards": fig.get("cards"), "scan_to_publish_ms": {k: s2p.get(k) for k in ("p50", "p99", "max")},
            "us_per_card": cpu.get("us_per_card"), "share_of_a_core": cpu.get("share_of_a_core"),
            "peak_rss_mb": fig.get("peak_rss_mb"), "bottleneck": (fig.get("bottleneck") or {}).get("verdict"),
            "messages_per_card": fig.get("messages_per_card")}


def _median(turns: list[dict[str, Any]], pick: Any) -> float | None:
    vals = [v for v in (pick(t) for t in turns) if isinstance(v, (int, float))]
    return round(statistics.median(vals), 3) if vals else None


def _side(turns: list[dict[str, Any]]) -> dict[str, Any]:
    return {"us_per_card": _median(turns, lambda t: t["us_per_card"]),
            "messages_per_card": _median(turns, lambda t: t.get("messages_per_card")),
            "peak_rss_mb": _median(turns, lambda t: t.get("peak_rss_mb")),
            "scan_to_publish_p50_ms": _median(turns, lambda t: t["scan_to_publish_ms"]["p50"]),
            "scan_to_publish_p99_ms": _median(turns, lambda t: t["scan_to_publish_ms"]["p99"])}


def _change(before: float | None, after: float | None) -> float | None:
    return None if not before or after is None else round(after / before - 1, 3)


def run_against(rev: str, *, tables: int, seconds: float, turns: int, loop: str) -> dict[str, Any]:
    if not (ROOT / ".git").exists():
        raise AgainstError(f"{ROOT} is not a git checkout: nothing to check {rev} out from")
    try:
        old_commit = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except AgainstError:
        raise AgainstError(f"{rev!r} is not a commit of this checkout") from None
    head_commit = _git("rev-parse", "HEAD")
    with tempfile.TemporaryDirectory(prefix="dealer-bench-against-") as tmp:
        tree = Path(tmp) / f"rev-{old_commit[:12]}"
        _git("worktree", "add", "--detach", str(tree), old_commit)
        try:
            for rel in SHARED_LOAD:
                shutil.copyfile(ROOT / rel, tree / rel)
            figures: dict[str, list[dict[str, Any]]] = {"rev": [], "head": []}
            for _ in range(turns):
                figures["rev"].append(_digest(_turn(tree, tables, seconds, loop)))
                figures["head"].append(_digest(_turn(ROOT, tables, seconds, loop)))
        finally:
            _git("worktree", "remove", "--force", str(tree))
    rev_side, head_side = _side(figures["rev"]), _side(figures["head"])
    return {
        "bench": "against", "tables": tables, "seconds": seconds, "turns": turns, "loop": loop,
        "rev": {"name": rev, "commit": old_commit, "turns": figures["rev"], "median": rev_side},
        "head": {"commit": head_commit, "turns": figures["head"], "median": head_side},
        "change": {k: _change(rev_side[k], head_side[k]) for k in rev_side},
        "load": "this checkout's simulators/loadgen.py on both sides",
    }


def _cmd(args: argparse.Namespace) -> int:
    from dealer.cli.args import fail

    try:
        result = run_against(args.rev, tables=args.tables, seconds=args.seconds, turns=args.turns, loop=args.loop)
    except AgainstError as exc:
        return fail("dealer bench against", str(exc))
    print(json.dumps(result, sort_keys=True))
    return 0


def register(bsub: argparse._SubParsersAction) -> None:
    """``dealer bench against`` (added to ``dealer bench`` by :mod:`tools.cli`)."""
    from dealer.cli.args import int_range, seconds

    p = bsub.add_parser("against", help="bench latency of an older commit beside this checkout's, in turns")
    p.add_argument("rev", help="the commit to compare with (any git revision: a hash, a tag, HEAD~5)")
    p.add_argument("--tables", type=int_range(1, 10_000), default=200, metavar="N", help="tables (default 200)")
    p.add_argument("--seconds", type=seconds(0, 86_400), default=20.0, metavar="S", help="seconds a turn (default 20)")
    p.add_argument("--turns", type=int_range(1, 20), default=2, metavar="K",
                   help="turns of each side, alternating, the older first (default 2)")
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop", help="event loop (default uvloop)")
    p.set_defaults(func=_cmd)
