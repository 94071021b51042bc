"""The latency benchmark's judgment of what set its figures (tools/bench_verdict.py), on
planted figures: a saturated or late load generator, a saturated broker, backend or machine,
and a clean run."""

from __future__ import annotations

from tools.bench_verdict import floor_of, floor_ratio, judge

QUIET_GEN = {"cpu_share": 0.05, "loop_lag_ms": {"count": 100, "p50": 0.1, "p99": 1.0},
             "deal_delay_ms": {"count": 50, "p50": 0.1, "p99": 0.5}}
S2P = {"count": 50, "p50": 2.0, "p99": 4.0}


def test_a_clean_run_is_the_backends() -> None:
    v = judge(backend_cpu_share=0.3, loadgen=QUIET_GEN, broker_cpu_share=0.1, scan_to_publish=S2P, cpus=2)
    assert v == {"verdict": "backend",
                 "findings": ["nothing but the backend was near a limit: the figures are the backend's"]}


def test_a_saturated_or_late_load_generator_is_named_first() -> None:
    gen = QUIET_GEN | {"cpu_share": 0.97, "deal_delay_ms": {"count": 50, "p50": 3.0, "p99": 40.0}}
    v = judge(backend_cpu_share=0.5, loadgen=gen, broker_cpu_share=0.2, scan_to_publish=S2P, cpus=4)
    assert v["verdict"] == "load_generator"
    assert v["findings"][0] == "load generator saturated: 97% of a core"
    assert "deal delay p99 40.0 ms is more than the backend's scan->publish p99 4.0 ms" in v["findings"][1]


def test_a_saturated_broker_backend_or_machine_is_said() -> None:
    v = judge(backend_cpu_share=0.2, loadgen=QUIET_GEN, broker_cpu_share=0.9, scan_to_publish=S2P, cpus=8)
    assert v["verdict"] == "broker" and v["findings"] == ["broker saturated: 90% of a core"]
    v = judge(backend_cpu_share=0.99, loadgen=QUIET_GEN, broker_cpu_share=0.3, scan_to_publish=S2P, cpus=8)
    assert v["verdict"] == "backend" and "backend saturated: 99% of a core" in v["findings"][0]
    v = judge(backend_cpu_share=0.8, loadgen=QUIET_GEN | {"cpu_share": 0.6}, broker_cpu_share=0.5,
              scan_to_publish=S2P, cpus=2)
    assert v["verdict"] == "machine" and v["findings"] == [
        "machine saturated: backend, load generator and broker use 1.90 of 2 cores"]


def test_several_backend_processes_saturate_one_by_one_not_together() -> None:
    """Two processes at 60 % each use 1.2 cores together but neither is saturated (each event
    loop is its own core); one at 90 % is, whatever the other does."""
    v = judge(backend_cpu_share=1.2, loadgen=QUIET_GEN, broker_cpu_share=0.1, scan_to_publish=S2P, cpus=4,
              backend_process_shares=[0.6, 0.6])
    assert v["verdict"] == "backend" and v["findings"] == [
        "nothing but the backend was near a limit: the figures are the backend's"]
    v = judge(backend_cpu_share=1.2, loadgen=QUIET_GEN, broker_cpu_share=0.1, scan_to_publish=S2P, cpus=4,
              backend_process_shares=[0.9, 0.3])
    assert v["findings"] == ["backend saturated: its busiest of 2 processes at 90% of a core (each event loop is one core)"]


def test_a_failed_load_generator_is_never_read_as_the_backend() -> None:
    v = judge(backend_cpu_share=0.1, loadgen={"error": "printed no figures within 80 s"}, broker_cpu_share=None,
              scan_to_publish=None, cpus=2)
    assert v["verdict"] == "load_generator" and "printed no figures" in v["findings"][0]


def test_the_floor_is_the_peers_in_series_and_the_ratio_is_over_it() -> None:
    floor = floor_of({"count": 30, "p50": 0.7, "p99": 0.9}, {"count": 30, "p50": 0.6, "p99": 1.2})
    assert floor == {"p50": 1.3, "p99": 2.1}
    assert floor_ratio({"count": 10, "p50": 1.56, "p99": 3.15}, floor) == {"p50": 1.2, "p99": 1.5}
    assert floor_of({"count": 0}, {"count": 30, "p50": 0.6, "p99": 1.2}) is None
    assert floor_ratio({"count": 0}, floor) is None


def test_the_database_beside_them_counts_toward_the_machine() -> None:
    """A PostgreSQL journal's server runs on the same machine: its CPU is part of the total."""
    v = judge(backend_cpu_share=0.9, loadgen=QUIET_GEN | {"cpu_share": 0.4}, broker_cpu_share=0.1,
              scan_to_publish=S2P, cpus=2, backend_process_shares=[0.45, 0.45], database_cpu_share=0.5)
    assert v["verdict"] == "machine" and v["findings"] == [
        "machine saturated: backend, load generator, broker and database use 1.90 of 2 cores"]
