"""``dealer bench publish``: CPU per QoS 1 publish on the backend's MQTT path, beside the library's.

Every card costs the backend several QoS 1 publishes (the event, the prompt, the retained
prompt and state), and at a thousand tables paho's per-message work is the largest share of
its CPU. This measures, through one private Mosquitto, in one process, in turns:

* ``aiomqtt``: the library's own ``Client.publish`` (``asyncio.wait_for`` on an Event);
* ``publish``: :meth:`drivers.mqtt.MqttBus.publish` (a bare future and a timer);
* ``publish_nowait``: :meth:`drivers.mqtt.MqttBus.publish_nowait` (no coroutine, no Task: the
  path the backend's live and retained messages took on paho);
* ``gmqtt_publish_nowait``: the same on the bus's default client since issue 31, gmqtt in
  MQTT 3.1.1 (drivers/mqtt_gmqtt.py): what the backend pays per message today.

The first three run on a bus told to speak paho (``client="paho"``, the rollback).

``window`` publishes are in flight at a time (as many tables publishing at once); the figure is
CPU time per publish (µs, every thread of the process), the median of ``rounds`` turns.

Beside them, in the same turns and through the same Mosquitto, other asyncio clients that track
PUBACKs (a publish counts as done only once its PUBACK has arrived), each in a subprocess from a
venv of its own that the bench builds on demand under a cache folder (``~/.cache/dealer-bench``):
the backend's dependencies do not grow, and aiomqtt 3 (the same package name as aiomqtt 2.5)
can be measured at all. The subprocess (:mod:`tools.bench_publish_client`) measures its own CPU
the same way (``getrusage`` of its process, connect and warm-up left out) and prints JSON:

* ``aiomqtt3``: aiomqtt 3.0.0a1 (a pre-release: paho dropped for the ``mqtt5`` codec, MQTT 5 only);
* ``gmqtt``: gmqtt 0.8.0 (MQTT 5, falling back to 3.1.1 when a broker refuses 5);
* ``gmqtt311``: gmqtt 0.8.0 told to speak MQTT 3.1.1 (as paho does here);
* ``amqtt``: amqtt 0.12.1's client (MQTT 3.1.1).

A client whose venv cannot be built (no network, no wheel) has ``null`` figures and says why
(``clients.NAME.unavailable``); the bench goes on. With ``brokers`` on, every client (today's
``aiomqtt2`` through :class:`~drivers.mqtt.MqttBus`, and each of the others) also connects,
publishes QoS 1 and waits for its PUBACK on a private Mosquitto, RabbitMQ and NATS (the brokers
the tests run): ``clients.NAME.brokers``, with the reason for each ``false``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiomqtt

from drivers.mqtt import MqttBus
from simulators.broker import MosquittoProcess
from simulators.brokers import BROKER_KINDS, NatsProcess, RabbitMqProcess

PAYLOAD = b"x" * 300  # about a card_registered event
WORKER = Path(__file__).with_name("bench_publish_client.py")

#: The third-party clients, each in a venv of its own: ``install`` is what pip installs there
#: (``--pre``: aiomqtt 3 is a pre-release); ``substitute``, when the pinned install fails, an
#: install that is measured instead and says how it differs (``clients.NAME.deviation``).
THIRD_PARTY: dict[str, dict[str, Any]] = {
    "aiomqtt3": {"install": ["aiomqtt==3.0.0a1"],
                 # aiomqtt 3.0.0a1 pins mqtt5~=0.5.0, which has no wheel for glibc Linux on x86-64
                 # (musllinux, macOS and Windows only): its sdist needs Rust and crates.io. mqtt5
                 # 0.6.0 has one; aiomqtt 3.0.0a1 runs on it.
                 "substitute": {"install": [["--no-deps", "aiomqtt==3.0.0a1"], ["mqtt5==0.6.0"]],
                                "deviation": "mqtt5 0.6.0 in place of the pinned mqtt5~=0.5.0 "
                                             "(pip install --no-deps aiomqtt==3.0.0a1, then mqtt5==0.6.0)"}},
    "gmqtt": {"install": ["gmqtt==0.8.0"]},
    # gmqtt told to speak MQTT 3.1.1 from the start (as paho here): RabbitMQ 3.10 drops an MQTT 5
    # CONNECT without a CONNACK, so gmqtt's own fall-back to 3.1.1 (on a refusing CONNACK) never comes
    "gmqtt311": {"install": ["gmqtt==0.8.0"], "venv": "gmqtt"},
    "amqtt": {"install": ["amqtt==0.12.1"]},
}
CLIENT_NAMES = tuple(THIRD_PARTY)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def default_cache() -> Path:
    """Where the clients' venvs are kept (``$XDG_CACHE_HOME/dealer-bench``, else ``~/.cache/dealer-bench``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dealer-bench"


def _pip_reason(out: str) -> str:
    """The lines of a failed pip run that say why (pip's own wording), short."""
    telling = [ln.strip() for ln in out.splitlines()
               if any(w in ln for w in ("Could not resolve", "No matching distribution", "Could not find a version",
                                        "failed to get", "Network is unreachable"))]
    if telling:
        return " | ".join(dict.fromkeys(telling))[:500]
    keep = [ln.strip() for ln in out.splitlines()
            if ln.strip() and "is ignored" not in ln
            and any(w in ln.lower() for w in ("error", "could not", "no matching", "failed"))]
    seen: list[str] = []
    for ln in keep:
        if ln not in seen:
            seen.append(ln)
    return " | ".join(seen[-4:])[:500] or out.strip()[-300:]


def _extra_packages() -> list[str]:
    """uvloop at the backend's version, so a client runs on the same event loop as the paths here."""
    try:
        return [f"uvloop=={importlib.metadata.version('uvloop')}"]
    except importlib.metadata.PackageNotFoundError:
        return []


def ensure_venv(name: str, cache: Path, install: bool = True) -> tuple[Path | None, dict[str, Any]]:
    """The Python of client ``name``'s venv under ``cache``, built (``python -m venv`` and pip)
    unless it is already there for the same install; ``(None, {"unavailable": why})`` when it
    cannot be had. The pip failures are remembered with the venv: delete the folder to retry."""
    spec = THIRD_PARTY[name]
    extra = _extra_packages()
    what = {k: v for k, v in spec.items() if k != "venv"}  # clients that share a venv share its key
    key = hashlib.sha256(json.dumps([what, extra, sys.version]).encode()).hexdigest()[:16]
    venv = cache / f"venv-{spec.get('venv', name)}"
    marker = venv / "dealer-bench.json"
    py = venv / "bin" / "python"
    try:
        done = json.loads(marker.read_text())
    except (OSError, ValueError):
        done = None
    if done is not None and done.get("key") == key and (py.exists() or "unavailable" in done):
        info = dict(done["info"])
        if "unavailable" in info:
            info["unavailable"] += f" (remembered from an earlier run: delete {venv} to try again)"
        return (None if "unavailable" in info else py), info
    if not install:
        return None, {"unavailable": f"no venv for {name} at {venv} and installing is off"}

    def pip(*args: str) -> tuple[bool, str]:
        r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                           capture_output=True, text=True, timeout=900)
        return r.returncode == 0, r.stdout + r.stderr

    info: dict[str, Any] = {"venv": str(venv)}
    try:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True,
                       timeout=300)
        ok, out = pip("--pre", *spec["install"], *extra)
        if not ok:
            why = f"pip install {' '.join(spec['install'])} failed: {_pip_reason(out)}"
            sub = spec.get("substitute")
            if sub is None:
                info["unavailable"] = why
            else:
                for i, args in enumerate(sub["install"]):
                    ok, out = pip("--pre", *args, *(extra if i == len(sub["install"]) - 1 else []))
                    if not ok:
                        info["unavailable"] = f"{why}; the substitute failed too: {_pip_reason(out)}"
                        break
                else:
                    info.update(deviation=sub["deviation"], pinned_install_failed=why)
    except (OSError, subprocess.SubprocessError) as e:
        info["unavailable"] = f"could not build the venv {venv}: {type(e).__name__}: {e}"[:500]
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"key": key, "info": info, **({"unavailable": True} if "unavailable" in info
                                                                   else {})}))
    except OSError:
        pass
    return (None if "unavailable" in info else py), info


async def _worker(py: Path, *args: str, timeout: float) -> dict[str, Any]:
    """Run the client side (:mod:`tools.bench_publish_client`) and return its JSON, or
    ``{"error": ...}``."""
    proc = await asyncio.create_subprocess_exec(str(py), "-I", str(WORKER), *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return {"error": f"the client's process did not finish within {timeout:.0f} s"}
    try:
        return dict(json.loads(out.decode().strip().splitlines()[-1]))
    except (ValueError, IndexError):
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"[:500]}


async def _probe_ours(url: str, timeout: float = 20.0) -> dict[str, Any]:
    """Today's path on a broker: an :class:`MqttBus` (aiomqtt 2.5 on paho, MQTT 3.1.1) connects
    and publishes three QoS 1 messages, each awaited to its PUBACK."""
    bus = MqttBus(url, client_id=f"probe-aiomqtt2-{os.getpid()}", client="paho")
    task = asyncio.create_task(bus.run())
    step = "connect"
    try:
        async with asyncio.timeout(timeout):
            t0 = time.monotonic()
            await bus.wait_connected()
            connect_s = round(time.monotonic() - t0, 2)
            for i in range(3):
                step = f"QoS 1 publish {i + 1} (waiting for its PUBACK)"
                await bus.publish(f"bench/probe/{i}", PAYLOAD)
        return {"ok": True, "protocol": "3.1.1", "connect_s": connect_s}
    except TimeoutError:
        return {"ok": False, "error": f"{step}: no answer within {timeout:.0f} s"}
    except Exception as e:  # noqa: BLE001 - the reason is the answer
        return {"ok": False, "error": f"{step}: {type(e).__name__}: {e}"[:300]}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _broker_matrix(mosquitto_url: str, pythons: dict[str, Path], loop: str) -> dict[str, dict[str, Any]]:
    """For ``aiomqtt2`` and each client in ``pythons``: on each broker kind, whether it connects,
    publishes QoS 1 and gets the PUBACK (the bench's Mosquitto; a private RabbitMQ and NATS
    started here), and why not."""
    names = ["aiomqtt2", *pythons]
    matrix: dict[str, dict[str, Any]] = {n: {"brokers": {}, "broker_errors": {}, "broker_protocols": {}}
                                         for n in names}

    async def probe_all(kind: str, url: str) -> None:
        port = url.rsplit(":", 1)[1]
        for n in names:
            if n == "aiomqtt2":
                r = await _probe_ours(url)
            else:
                r = await _worker(pythons[n], "probe", "--client", n, "--port", port, "--n", "3", "--timeout", "20",
                                  "--loop", loop, timeout=60)
            ok = bool(r.get("ok"))
            matrix[n]["brokers"][kind] = ok
            if not ok:
                matrix[n]["broker_errors"][kind] = r.get("error", "no answer")
            elif "protocol" in r:
                matrix[n]["broker_protocols"][kind] = f"MQTT {r['protocol']}, connected in {r.get('connect_s')} s"

    for kind in BROKER_KINDS:
        if kind == "mosquitto":
            await probe_all(kind, mosquitto_url)
            continue
        with tempfile.TemporaryDirectory(prefix=f"dealer-bench-publish-{kind}-") as tmp:
            broker = RabbitMqProcess(Path(tmp)) if kind == "rabbitmq" else NatsProcess(Path(tmp))
            try:
                await asyncio.to_thread(broker.start)
            except Exception as e:  # noqa: BLE001 - a broker that cannot start is a finding, not a crash
                for n in names:
                    matrix[n]["brokers"][kind] = None
                    matrix[n]["broker_errors"][kind] = f"the {kind} broker did not start: {e}"[:300]
                continue
            try:
                await probe_all(kind, broker.url)
            finally:
                await asyncio.to_thread(broker.stop)
    return matrix


def broker_versions() -> dict[str, str | None]:
    """The Debian packages' versions of the brokers (None where unknown)."""
    out: dict[str, str | None] = {}
    for kind, pkg in (("mosquitto", "mosquitto"), ("rabbitmq", "rabbitmq-server"), ("nats", "nats-server")):
        try:
            r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True, timeout=10)
            out[kind] = r.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            out[kind] = None
    return out


async def run_publish_bench(n: int = 20_000, window: int = 50, rounds: int = 3, *, brokers: bool = False,
                            clients: tuple[str, ...] = CLIENT_NAMES, cache: Path | None = None,
                            install: bool = True, loop: str = "uvloop") -> dict[str, Any]:
    """``clients``: the third-party clients to measure (their venvs built in ``cache`` unless
    ``install`` is off); ``brokers``: also the broker matrix (a RabbitMQ and a NATS booted:
    about 20 s more); ``loop``: the event loop the clients' subprocesses run (as this one's)."""
    cache = cache if cache is not None else default_cache()
    pythons: dict[str, Path] = {}
    infos: dict[str, dict[str, Any]] = {}
    for name in clients:
        py, info = await asyncio.to_thread(ensure_venv, name, cache, install)
        infos[name] = {"process": "a subprocess from its own venv", **info}
        if py is not None:
            pythons[name] = py
    with tempfile.TemporaryDirectory(prefix="dealer-bench-publish-") as tmp:
        mq = MosquittoProcess(Path(tmp), persistence=False)
        mq.start()
        bus = MqttBus(mq.url, client_id="bench-publish", client="paho")
        gbus = MqttBus(mq.url, client_id="bench-publish-gmqtt", client="gmqtt")
        tasks = [asyncio.create_task(b.run()) for b in (bus, gbus)]
        try:
            await asyncio.wait_for(asyncio.gather(bus.wait_connected(), gbus.wait_connected()), 10)
            client = bus._client  # the connected aiomqtt client, for the library's own publish
            assert client is not None

            async def library(topic: str) -> None:
                await aiomqtt.Client.publish(client, topic, PAYLOAD, qos=1, timeout=10)  # type: ignore[arg-type]

            async def ours(topic: str) -> None:
                await bus.publish(topic, PAYLOAD)

            paths = {"aiomqtt": lambda t: library(t), "publish": lambda t: ours(t),
                     "publish_nowait": lambda t: bus.publish_nowait(t, PAYLOAD),
                     "gmqtt_publish_nowait": lambda t: gbus.publish_nowait(t, PAYLOAD)}
            samples: dict[str, list[float]] = {k: [] for k in (*paths, *clients)}
            for _ in range(rounds):
                for name, send in paths.items():
                    c0 = _cpu()
                    for k in range(0, n, window):
                        await asyncio.wait_for(asyncio.gather(*(send(f"bench/t{i % 1000}/events")
                                                                for i in range(k, k + window))), 30)
                    samples[name].append((_cpu() - c0) / n * 1e6)
                for name, py in pythons.items():
                    if "error" in infos[name]:
                        continue  # failed once: the other turns would too
                    r = await _worker(py, "bench", "--client", name, "--port", str(mq.port), "--n", str(n),
                                      "--window", str(window), "--warmup", str(min(n, 10 * window)), "--loop", loop,
                                      timeout=600)
                    if "cpu_us_per_publish" in r:
                        samples[name].append(r.pop("cpu_us_per_publish"))
                        infos[name].update(r)
                    else:
                        infos[name]["error"] = r.get("error", "no figure")
            matrix = await _broker_matrix(mq.url, {k: v for k, v in pythons.items()}, loop) if brokers else {}
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            mq.stop()
    ours_info: dict[str, Any] = {
        "process": "this one", "paths": list(paths), "protocol": "3.1.1",
        "library": {k: importlib.metadata.version(k) for k in ("aiomqtt", "paho-mqtt", "gmqtt")}}
    infos = {"aiomqtt2": ours_info, **infos}
    for name, info in infos.items():
        info.update(matrix.get(name, {"brokers": {}, "broker_errors": {}, "broker_protocols": {}}))
    return {"bench": "publish", "publishes": n, "window": window, "rounds": rounds,
            "cpu_us_per_publish": {k: round(statistics.median(v), 1) if v else None for k, v in samples.items()},
            "runs_us": {k: [round(x, 1) for x in v] for k, v in samples.items()},
            "clients": infos,
            "brokers": ({"versions": broker_versions(), "kinds": list(BROKER_KINDS)} if brokers
                        else {"skipped": "--no-brokers"}),
            "machine": {"python": platform.python_version(), "loop": loop}}


def _cmd(args: argparse.Namespace) -> int:
    from dealer.edge.logs import configure_logging
    from dealer.edge.runner import run_loop

    configure_logging("warning")
    clients = tuple(c for c in args.clients.split(",") if c) if args.clients != "none" else ()
    unknown = sorted(set(clients) - set(CLIENT_NAMES))
    if unknown:
        raise SystemExit(f"dealer bench publish: unknown client(s) {', '.join(unknown)} "
                         f"(known: {', '.join(CLIENT_NAMES)}, or none)")
    result = run_loop(run_publish_bench(args.publishes, args.window, args.rounds, brokers=args.brokers,
                                        clients=clients, cache=args.cache, install=args.install, loop=args.loop),
                      args.loop)
    print(json.dumps(result, sort_keys=True))
    return 0


def register(bsub: argparse._SubParsersAction) -> None:
    """``dealer bench publish`` (added to ``dealer bench`` by :mod:`tools.cli`)."""
    from dealer.cli.args import int_range

    p = bsub.add_parser("publish", help="CPU per QoS 1 publish: the backend's path beside aiomqtt's own")
    p.add_argument("--publishes", type=int_range(100, 10_000_000), default=20_000, metavar="N",
                   help="publishes per path per turn (default 20,000)")
    p.add_argument("--window", type=int_range(1, 10_000), default=50, metavar="W",
                   help="publishes in flight at a time (default 50)")
    p.add_argument("--rounds", type=int_range(1, 100), default=3, metavar="K",
                   help="turns of each path, alternating; the median is reported (default 3)")
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop",
                   help="event loop (default uvloop, as dealer run)")
    p.add_argument("--clients", default=",".join(CLIENT_NAMES), metavar="LIST",
                   help=f"third-party clients to measure beside today's paths, comma-separated, or 'none' "
                        f"(default {','.join(CLIENT_NAMES)}); each runs from a venv of its own")
    p.add_argument("--brokers", action=argparse.BooleanOptionalAction, default=True,
                   help="also the broker matrix: each client on a private Mosquitto, RabbitMQ and NATS "
                        "(default on; --no-brokers saves about 20 s)")
    p.add_argument("--cache", type=Path, default=None, metavar="DIR",
                   help="where the clients' venvs are built and kept (default ~/.cache/dealer-bench)")
    p.add_argument("--install", action=argparse.BooleanOptionalAction, default=True,
                   help="build a missing client venv with pip (default on; --no-install: only venvs already built)")
    p.set_defaults(func=_cmd)
