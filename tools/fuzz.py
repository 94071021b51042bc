"""``dealer bench fuzz``: every parser that reads bytes from outside, fed generated garbage.

No network and no corpus files: a seeded :class:`random.Random` builds each input from a
corpus of *valid* seeds taken from the code itself (``encode_frame`` of valid frames,
``model_dump_json`` of the messages a real round produces, the configuration of real
tables) and then breaks it: bit flips, truncation, splicing, field swaps, huge numbers,
unicode, NaN and floats where money goes, deep nesting, overlong lines, CRCs recomputed
after a mutation so the damage reaches the field checks.

The contract checked for every input of every target:

* **no crash**: a parser may only refuse an input with its documented exception
  (:class:`~drivers.frames.FrameError`, pydantic ``ValidationError``,
  :class:`~dealer.edge.config.ConfigError`, ``ValueError`` from ``json``); the stream decoder,
  the MQTT scanner ingest and the service's command handler may not raise at all;
* **every rejection carries a reason**: a non-empty message (and, for frames, a reason
  category; for the service, one refusal and a published ``rejected`` event);
* **no hang**: each call is timed; one taking longer than ``slow_s`` (1 s) is reported;
* a few cheap oracles: an accepted message re-validates from its own JSON, a decoded frame
  re-encodes to the same bytes, the stream decoder's output does not depend on how the
  bytes were chunked, a refused command changes no table, a frame without a valid MAC
  at an authenticating reader becomes one ``FORGED`` input that changes no session state,
  a configuration ``load_settings`` accepts builds the service's tables.

Anything else is a **finding**: recorded with the exception, where it was raised, how
often and a few example inputs (``repr``, truncated), deduplicated by (target, kind,
exception, location). ``run_fuzz`` returns stable JSON (timings aside) for a seed.

``stud_commands``, ``seotda_commands`` and ``matgo_commands`` (:mod:`tools.fuzz_games`) play
rounds of the peer games on a live service and fuzz their players' and station's commands
there, with the games' own invariants (one clear answer, refusals change nothing, no action
applied twice, chips conserved, the journal and its replay).

``--engine atheris`` runs the same targets coverage-guided (libFuzzer through atheris),
one child process per target, when atheris is installed (it is optional).

Inputs are derived from ``(seed, target, index)``, so a stateless target's finding can
be regenerated with :func:`generate_input`; the stateful ones (``reader_session``,
``scanner_ingest``, ``service_actions``) also depend on the inputs before it, and the
recorded example input is the reproduction.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import mmap
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.fuzz_inputs import KEY, MSG_LIMIT, OTHER_KEY, Violation, dump_toml, encode_text  # noqa: F401 (tests)
from tools.fuzz_target import Target, corpus  # noqa: F401 (corpus: tools.fuzz.corpus, as the tests read it)
from tools.fuzz_codec_targets import (
    BeeTekStreamTarget,
    FrameDecodeTarget,
    FrameStreamTarget,
    ReaderSessionTarget,
    ScannerIngestTarget,
    ScannerJsonTarget,
)
from tools.fuzz_message_targets import (
    ActionsTarget,
    ConfigTarget,
    EventsTarget,
    PlayerMessageTarget,
    RoundEventTarget,
    RoundResultTarget,
    ServiceActionsTarget,
    StationPromptTarget,
)

SLOW_S = 1.0
MAX_EXAMPLES = 3
_REPR_LIMIT = 400

TARGETS: tuple[str, ...] = (
    "frame_decode",
    "frame_stream",
    "beetek_stream",
    "reader_session",
    "scanner_json",
    "scanner_ingest",
    "actions",
    "events",
    "round_result",
    "player_message",
    "station_prompt",
    "round_event",
    "service_actions",
    "config",
    # the peer games' commands on a live service (tools/fuzz_games.py)
    "stud_commands",
    "seotda_commands",
    "matgo_commands",
)
#: The targets that run a live service and play rounds (slower: a group commit per input).
GAME_TARGETS: tuple[str, ...] = ("stud_commands", "seotda_commands", "matgo_commands")


_BASE_CLASSES: dict[str, type[Target]] = {cls.name: cls for cls in (
    FrameDecodeTarget, FrameStreamTarget, BeeTekStreamTarget, ReaderSessionTarget, ScannerJsonTarget, ScannerIngestTarget, ActionsTarget,
    EventsTarget, RoundResultTarget, PlayerMessageTarget, StationPromptTarget, RoundEventTarget,
    ServiceActionsTarget, ConfigTarget)}


def _target_classes() -> dict[str, type[Target]]:
    """Every target by name: the codec and message targets, then the peer games'
    (tools/fuzz_games.py and tools/fuzz_game_players.py, imported when first needed)."""
    from tools.fuzz_game_players import GAME_CLASSES

    classes = {**_BASE_CLASSES, **GAME_CLASSES}
    assert tuple(classes) == TARGETS
    return classes


@contextlib.contextmanager
def open_target(name: str, seed: int = 0) -> Iterator[Target]:
    """A set-up target (``check`` one input, ``generate`` one) for tests and reproductions."""
    classes = _target_classes()
    if name not in classes:
        raise ValueError(f"unknown fuzz target {name!r} (known: {', '.join(TARGETS)})")
    target = classes[name]()
    target.setup(seed)
    try:
        with _quiet_logs():
            yield target
    finally:
        target.close()


def generate_input(name: str, seed: int, index: int) -> Any:
    """The ``index``-th generated input of a stateless target for ``seed`` (reproduction)."""
    with open_target(name, seed) as target:
        return target.generate(random.Random(f"{seed}:{name}:{index}"))


# --- running ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    result: str  # accepted, rejected or finding
    kind: str = ""
    exception: str = ""
    message: str = ""
    where: str = ""


_ROOT = str(Path(__file__).resolve().parent.parent) + os.sep
#: The fuzzer's own modules: a frame in them is never where a finding was raised.
_SELF = frozenset(os.path.abspath(Path(__file__).with_name(f"{m}.py")) for m in (
    "fuzz", "fuzz_inputs", "fuzz_target", "fuzz_codec_targets", "fuzz_message_targets"))


def _where(tb: Any) -> str:
    """The innermost frame of the project (dealer/, drivers/) that is not the fuzzer's own."""
    best = last = None
    while tb is not None:
        code = tb.tb_frame.f_code
        name = code.co_filename if os.path.isabs(code.co_filename) else os.path.abspath(code.co_filename)
        last = (name, tb.tb_lineno, code.co_name)
        if name.startswith(_ROOT) and name not in _SELF and os.sep + ".venv" + os.sep not in name:
            best = last
        tb = tb.tb_next
    found = best or last
    if found is None:
        return ""
    name, line, func = found
    name = name.removeprefix(_ROOT)
    return f"{name}:{line} in {func}"


def run_one(target: Target, inp: Any) -> Outcome:
    """Classify one input: accepted, rejected (documented exception with a message), or a finding."""
    try:
        ok = target.check(inp)
        return Outcome("accepted" if ok else "rejected")
    except Violation as v:
        return Outcome("finding", "property", "", str(v)[:MSG_LIMIT], v.key)
    except RecursionError as exc:  # before `allowed`: RecursionError is a RuntimeError, never documented
        return Outcome("finding", "exception", type(exc).__name__, str(exc)[:MSG_LIMIT], _where(exc.__traceback__))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - classifying everything is the point
        if target.allowed and isinstance(exc, target.allowed):
            try:
                target.rejection(exc)
            except Violation as v:
                return Outcome("finding", "rejection", type(exc).__name__, str(v)[:MSG_LIMIT],
                               f"{v.key} @ {_where(exc.__traceback__)}")
            return Outcome("rejected")
        return Outcome("finding", "exception", type(exc).__name__, str(exc)[:MSG_LIMIT], _where(exc.__traceback__))


def _short_repr(inp: Any) -> str:
    text = repr(inp)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 40] + f"...<{len(text)} chars>..." + text[-20:]


def _input_len(inp: Any) -> int:
    if isinstance(inp, (bytes, str)):
        return len(inp)
    if isinstance(inp, tuple) and inp and isinstance(inp[-1], (bytes, str)):
        return len(inp[-1])
    if isinstance(inp, tuple) and inp and isinstance(inp[0], bytes):
        return len(inp[0])
    return 0


class _Stats:
    def __init__(self, name: str, slow_s: float) -> None:
        self.name, self.slow_s = name, slow_s
        self.inputs = self.accepted = self.rejected = 0
        self.max_s = 0.0
        self.slowest: dict[str, Any] = {}
        self.seconds = 0.0
        self.findings: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(self, index: int, inp: Any, outcome: Outcome, elapsed: float) -> None:
        self.inputs += 1
        if elapsed > self.max_s:
            self.max_s = elapsed
            self.slowest = {"index": index, "ms": round(elapsed * 1000, 3), "input_len": _input_len(inp),
                            "input": _short_repr(inp)[:120]}
        if outcome.result == "accepted":
            self.accepted += 1
        else:
            self.rejected += 1  # a finding is still an input the parser did not accept
        if outcome.result == "finding":
            self._finding(outcome.kind, outcome.exception, outcome.message, outcome.where, index, inp)
        if elapsed > self.slow_s:
            self._finding("slow", "", f"one call took {elapsed:.3f} s (limit {self.slow_s} s)", "", index, inp)

    def _finding(self, kind: str, exc: str, message: str, where: str, index: int, inp: Any) -> None:
        key = (kind, exc, where)
        f = self.findings.get(key)
        if f is None:
            f = self.findings[key] = {"target": self.name, "kind": kind, "exception": exc, "message": message,
                                      "where": where, "count": 0, "examples": []}
        f["count"] += 1
        if len(f["examples"]) < MAX_EXAMPLES:
            f["examples"].append({"index": index, "input": _short_repr(inp), "input_len": _input_len(inp)})

    def result(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs, "accepted": self.accepted, "rejected": self.rejected,
            "findings": sorted(self.findings.values(), key=lambda f: (f["kind"], f["exception"], f["where"], f["message"])),
            "max_ms": round(self.max_s * 1000, 3), "slowest": self.slowest, "seconds": round(self.seconds, 3),
            "inputs_per_s": round(self.inputs / self.seconds) if self.seconds > 0 else 0,
        }


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """The service logs every bad message; a million of them would drown the report."""
    import structlog

    saved = dict(structlog.get_config())
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        yield
    finally:
        structlog.configure(**saved)


def _split(inputs: int, names: list[str]) -> dict[str, int]:
    base, extra = divmod(inputs, len(names))
    return {n: base + (1 if i < extra else 0) for i, n in enumerate(names)}


def _check_targets(targets: list[str] | None) -> list[str]:
    names = list(dict.fromkeys(targets)) if targets else list(TARGETS)
    unknown = [t for t in names if t not in TARGETS]
    if unknown:
        raise ValueError(f"unknown fuzz target(s) {unknown} (known: {', '.join(TARGETS)})")
    return names


def _totals(per: dict[str, dict[str, Any]], seconds: float) -> dict[str, Any]:
    n = sum(r["inputs"] for r in per.values())
    return {"inputs": n, "accepted": sum(r["accepted"] for r in per.values()),
            "rejected": sum(r["rejected"] for r in per.values()),
            "findings": sum(len(r["findings"]) for r in per.values()),
            "finding_inputs": sum(f["count"] for r in per.values() for f in r["findings"]),
            "seconds": round(seconds, 3), "inputs_per_s": round(n / seconds) if seconds > 0 else 0}


def run_fuzz(inputs: int, seed: int, targets: list[str] | None = None, *, slow_s: float = SLOW_S,
             progress: bool | None = None) -> dict[str, Any]:
    """Fuzz ``targets`` (default: all) with ``inputs`` generated inputs in total, split evenly.

    Returns ``{"engine", "seed", "inputs", "targets": {name: {inputs, accepted, rejected,
    findings, max_ms, seconds, inputs_per_s}}, "totals": {...}}``; apart from the timings
    (and ``slow`` findings) the result is the same for the same seed.
    """
    names = _check_targets(targets)
    counts = _split(inputs, names)
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=inputs, unit="in", file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
    per: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    try:
        for name in names:
            stats = _Stats(name, slow_s)
            rng = random.Random()
            with open_target(name, seed) as target:
                if bar is not None:
                    bar.set_description(name)
                t_start = time.perf_counter()
                for i in range(counts[name]):
                    rng.seed(f"{seed}:{name}:{i}")
                    try:
                        inp = target.generate(rng)
                    except Exception as exc:  # the generator itself: a bug here, not in the target
                        raise RuntimeError(f"fuzz generator of {name} failed at input {i}: {exc!r}") from exc
                    t0 = time.perf_counter()
                    outcome = run_one(target, inp)
                    stats.add(i, inp, outcome, time.perf_counter() - t0)
                    if bar is not None and i % 256 == 255:
                        bar.update(256)
                stats.seconds = time.perf_counter() - t_start
                if bar is not None:
                    bar.update(counts[name] % 256)
                reached = getattr(target, "reached", None)  # a game target: what its rounds went through
            per[name] = stats.result()
            if reached is not None:
                per[name]["reached"] = dict(sorted(reached.items()))
    finally:
        if bar is not None:
            bar.close()
    return {"engine": "generator", "seed": seed, "inputs": inputs, "slow_s": slow_s, "targets": per,
            "totals": _totals(per, time.perf_counter() - started),
            "python": ".".join(map(str, sys.version_info[:3]))}


# --- coverage-guided engine (atheris, optional) ----------------------------------------------

_STAT_FIELDS = 4  # inputs, accepted, rejected, max_ns


def atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def run_atheris(inputs: int, seed: int, targets: list[str] | None = None, *, slow_s: float = SLOW_S,
                timeout_s: float | None = None) -> dict[str, Any]:
    """Coverage-guided: libFuzzer (atheris) drives each target for its share of ``inputs``
    runs, in a child process per target (libFuzzer exits the process when done), seeded
    with the generator's valid and mutated inputs. Findings are classified exactly as in
    :func:`run_fuzz`."""
    if not atheris_available():
        raise RuntimeError("atheris is not installed (pip install atheris); use the default generator engine")
    names = _check_targets(targets)
    counts = _split(inputs, names)
    per: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"dealer-atheris-{name}-") as tmp:
            work = Path(tmp)
            seeds = work / "corpus"
            seeds.mkdir()
            with open_target(name, seed) as target:
                rng = random.Random()
                for i in range(64):
                    rng.seed(f"{seed}:{name}:seed:{i}")
                    data = target.to_bytes(target.generate(rng))[:4096]
                    (seeds / f"seed-{i:03d}").write_bytes(data)
            (work / "stats").write_bytes(b"\0" * 8 * _STAT_FIELDS)
            cmd = [sys.executable, "-m", "tools.fuzz", "--atheris-child", name, "--runs", str(counts[name]),
                   "--seed", str(seed), "--workdir", str(work), "--slow-s", str(slow_s)]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False,
                                  cwd=str(Path(__file__).resolve().parent.parent))
            elapsed = time.perf_counter() - t0
            n, accepted, rejected, max_ns = struct.unpack(f"<{_STAT_FIELDS}q", (work / "stats").read_bytes())
            stats = _Stats(name, slow_s)
            stats.inputs, stats.accepted, stats.rejected, stats.max_s, stats.seconds = n, accepted, rejected, max_ns / 1e9, elapsed
            findings_file = work / "findings.jsonl"
            if findings_file.exists():
                for line in findings_file.read_text().splitlines():
                    rec = json.loads(line)
                    stats._finding(rec["kind"], rec["exception"], rec["message"], rec["where"], rec["index"],
                                   bytes.fromhex(rec["input"]))
            if proc.returncode != 0:
                tail = (proc.stderr or "")[-MSG_LIMIT:]
                stats._finding("engine", f"exit {proc.returncode}", tail, "", n, b"")
            result = stats.result()
            result["coverage"] = _last_cov(proc.stderr or "")
            per[name] = result
    return {"engine": "atheris", "seed": seed, "inputs": inputs, "slow_s": slow_s, "targets": per,
            "totals": _totals(per, time.perf_counter() - started),
            "python": ".".join(map(str, sys.version_info[:3]))}


def _last_cov(log: str) -> int | None:
    found = re.findall(r"\bcov: (\d+)", log)
    return int(found[-1]) if found else None


_INSTRUMENTED = ("drivers.scan", "drivers.frames", "drivers.scanner_json", "drivers.bus", "dealer.core.money", "dealer.core.cards",
                 "dealer.core.events", "dealer.games", "dealer.core.messages", "dealer.core.round", "dealer.core.table", "dealer.edge.topics",
                 "dealer.edge.config", "dealer.edge.service")


def _atheris_child(name: str, runs: int, seed: int, work: Path, slow_s: float) -> None:
    """Runs inside the child: libFuzzer calls ``one`` until ``runs`` and then exits the process,
    so counters live in a shared file mapping and findings are appended as they happen."""
    import importlib

    import atheris

    # Coverage of the code under test only: instrumenting every loaded module (pydantic,
    # structlog ...) with instrument_all() costs half a minute per child and adds noise.
    with atheris.instrument_imports(include=["dealer", "drivers"]):
        for module in _INSTRUMENTED:
            importlib.import_module(module)
    fd = os.open(work / "stats", os.O_RDWR)
    mm = mmap.mmap(fd, 8 * _STAT_FIELDS)
    counters = memoryview(mm).cast("q")
    out = os.open(work / "findings.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    seen: dict[tuple[str, str, str], int] = {}
    target = _target_classes()[name]()
    target.setup(seed)
    _quiet_logs().__enter__()  # for the whole child, which libFuzzer ends with exit()

    def one(data: bytes) -> None:
        inp = target.from_bytes(data)
        t0 = time.perf_counter_ns()
        outcome = run_one(target, inp)
        elapsed = time.perf_counter_ns() - t0
        index = counters[0]
        counters[0] += 1
        counters[1 if outcome.result == "accepted" else 2] += 1
        counters[3] = max(counters[3], elapsed)
        records = []
        if outcome.result == "finding":
            records.append((outcome.kind, outcome.exception, outcome.message, outcome.where))
        if elapsed > slow_s * 1e9:
            records.append(("slow", "", f"one call took {elapsed / 1e9:.3f} s (limit {slow_s} s)", ""))
        for kind, exc, message, where in records:
            key = (kind, exc, where)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] <= 1000:  # the count of a finding is capped in this engine
                os.write(out, (json.dumps({"kind": kind, "exception": exc, "message": message, "where": where,
                                           "index": index, "input": data[:2048].hex()}) + "\n").encode())

    args = [sys.argv[0], f"-runs={runs}", f"-seed={seed % 2**31 or 1}", "-max_len=8192", "-timeout=30",
            "-rss_limit_mb=4096", "-print_final_stats=1", str(work / "corpus")]
    atheris.Setup(args, one)
    atheris.Fuzz()


# --- command line -----------------------------------------------------------------------------


def _add_arguments(p: argparse.ArgumentParser) -> None:
    from dealer.cli.args import int_range, seconds

    p.add_argument("--inputs", type=int_range(0), default=1_000_000,
                   help="generated inputs in total, split evenly over the targets (default 1000000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (default 0)")
    p.add_argument("--target", action="extend", nargs="+", choices=TARGETS, metavar="T",
                   help=f"only these targets (repeatable; default all: {', '.join(TARGETS)})")
    p.add_argument("--engine", choices=["generator", "atheris"], default="generator",
                   help="generator: structured mutation from valid seeds (default); atheris: coverage-guided "
                        "libFuzzer, the same targets and checks (needs `pip install atheris`)")
    p.add_argument("--slow-ms", type=seconds(0, 3_600_000, unit="milliseconds"), default=SLOW_S * 1000,
                   help="report a single call slower than this many milliseconds")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")


def _cmd(args: argparse.Namespace) -> int:
    if args.inputs < 0:
        print("dealer bench fuzz: --inputs must be >= 0", file=sys.stderr)
        return 2
    slow_s = args.slow_ms / 1000
    if args.engine == "atheris":
        if not atheris_available():
            print("dealer bench fuzz: --engine atheris needs atheris (pip install atheris)", file=sys.stderr)
            return 2
        result = run_atheris(args.inputs, args.seed, args.target, slow_s=slow_s)
    else:
        result = run_fuzz(args.inputs, args.seed, args.target, slow_s=slow_s, progress=False if args.quiet else None)
    print(json.dumps(result, sort_keys=True))
    return 1 if result["totals"]["findings"] else 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``fuzz`` to the ``dealer bench`` subcommands: ``register(bench_subparsers)``."""
    p = subparsers.add_parser("fuzz", help="fuzz the frame codec, every MQTT payload parser, the action handler, "
                                           "the config loader and the stud, Seotda and Matgo commands on a live "
                                           "service (JSON figures; exit 1 on findings)")
    _add_arguments(p)
    p.set_defaults(func=_cmd)
    return p


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.fuzz", description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    p.add_argument("--atheris-child", metavar="TARGET", help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("--slow-s", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.atheris_child:
        _atheris_child(args.atheris_child, args.runs, args.seed, Path(args.workdir),
                       args.slow_s if args.slow_s is not None else SLOW_S)
        return 0
    return _cmd(args)


if __name__ == "__main__":
    raise SystemExit(main())
