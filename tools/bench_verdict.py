"""What limited a latency benchmark run: the backend, the load generator, the broker or the
machine (pure: figures in, findings out).

A benchmark that measures the backend on the same machine as its load generator and its
broker must say when one of those, not the backend, set the figures: a generator whose event
loop lags sends cards late and its end-to-end times include its own delay; a broker or a
machine at its limit slows every hop. Each finding names the figure it rests on.
"""

from __future__ import annotations

from typing import Any

#: A process using this share of one core or more is saturated (it cannot go faster).
SATURATED = 0.85
#: The machine is saturated when the processes together use this share of all its cores.
MACHINE_SATURATED = 0.9


def floor_ratio(measured: dict[str, Any] | None, floor: dict[str, float] | None) -> dict[str, float] | None:
    """scan→publish over the paced floor of the same run, at p50 and at p99."""
    if not measured or not floor or not measured.get("count"):
        return None
    out = {}
    for q in ("p50", "p99"):
        if floor.get(q):
            out[q] = round(measured[q] / floor[q], 2)
    return out or None


def floor_of(*peers: dict[str, Any] | None) -> dict[str, float] | None:
    """The floor under one card: the paced peers in series (a QoS 1 publish to PUBACK plus a
    durable commit), p50 and p99 each the sum of the peers' own."""
    if any(not p or not p.get("count") for p in peers):
        return None
    return {q: round(sum(p[q] for p in peers if p), 3) for q in ("p50", "p99")}


def judge(*, backend_cpu_share: float | None, loadgen: dict[str, Any], broker_cpu_share: float | None,
          scan_to_publish: dict[str, Any] | None, cpus: int,
          backend_process_shares: list[float] | None = None,
          database_cpu_share: float | None = None) -> dict[str, Any]:
    """Findings, most telling first, and one verdict: ``backend`` unless another part is shown
    to have set the figures. ``backend_cpu_share`` is all the backend's processes together;
    ``backend_process_shares`` each one's, when there are several (each event loop is one core:
    the busiest one saturates first)."""
    findings: list[str] = []
    verdicts: list[str] = []
    lag = loadgen.get("loop_lag_ms") or {}
    delay = loadgen.get("deal_delay_ms") or {}
    gen_share = loadgen.get("cpu_share")
    s2p_p99 = (scan_to_publish or {}).get("p99")
    if loadgen.get("error"):
        findings.append(f"load generator failed: {loadgen['error']}")
        verdicts.append("load_generator")
    if gen_share is not None and gen_share >= SATURATED:
        findings.append(f"load generator saturated: {gen_share:.0%} of a core")
        verdicts.append("load_generator")
    if delay.get("count") and s2p_p99 is not None and delay["p99"] > s2p_p99:
        findings.append(f"load generator sent cards late: deal delay p99 {delay['p99']} ms is more than the "
                        f"backend's scan->publish p99 {s2p_p99} ms, so its end-to-end figures are its own delay")
        verdicts.append("load_generator")
    if broker_cpu_share is not None and broker_cpu_share >= SATURATED:
        findings.append(f"broker saturated: {broker_cpu_share:.0%} of a core")
        verdicts.append("broker")
    busiest = max(backend_process_shares) if backend_process_shares else backend_cpu_share
    if busiest is not None and busiest >= SATURATED:
        findings.append(f"backend saturated: {busiest:.0%} of a core (its event loop is one core)" if not
                        backend_process_shares or len(backend_process_shares) == 1 else
                        f"backend saturated: its busiest of {len(backend_process_shares)} processes at {busiest:.0%} "
                        "of a core (each event loop is one core)")
        verdicts.append("backend")
    if database_cpu_share is not None and database_cpu_share >= SATURATED:
        findings.append(f"database saturated: {database_cpu_share:.0%} of a core")
        verdicts.append("database")
    total = sum(x for x in (backend_cpu_share, gen_share, broker_cpu_share, database_cpu_share) if x is not None)
    if cpus and total >= MACHINE_SATURATED * cpus:
        parts = "backend, load generator, broker and database" if database_cpu_share is not None else \
            "backend, load generator and broker"
        findings.append(f"machine saturated: {parts} use {total:.2f} of {cpus} cores")
        verdicts.append("machine")
    if lag.get("count") and lag["p99"] > 10:
        findings.append(f"load generator's event loop lags: p99 {lag['p99']} ms")
    verdict = verdicts[0] if verdicts else "backend"
    if not findings:
        findings.append("nothing but the backend was near a limit: the figures are the backend's")
    return {"verdict": verdict, "findings": findings}
