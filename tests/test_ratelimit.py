"""The pure rate limiters: token buckets and the per-reader flood windows."""

from __future__ import annotations

import pytest

from dealer.edge.ratelimit import FloodWindows, TokenBuckets


def test_token_buckets_allow_a_burst_then_the_rate() -> None:
    b = TokenBuckets(burst=3, per_second=1.0)
    assert [b.take("k", 0.0) for _ in range(4)] == [True, True, True, False]
    assert b.take("other", 0.0)  # buckets are per key
    assert not b.take("k", 0.5) and b.take("k", 1.6)


def test_a_single_bad_read_and_a_dealers_pace_are_never_held_back() -> None:
    f = FloodWindows(burst=20, window=10.0)
    t = 0.0
    for _ in range(2000):  # a bad read every 0.6 s, forever: below burst/window = 2 per second
        ok, ended = f.admit("SC1", "noread", t)
        assert ok and ended == []
        t += 0.6
    ok, _ = f.admit("SC2", "corrupt_frame", t)
    assert ok and f.next_deadline() is None


def test_a_burst_of_bad_reads_in_a_row_passes_up_to_the_burst() -> None:
    f = FloodWindows(burst=5, window=10.0)
    assert [f.admit("SC1", "misread", 0.01 * i)[0] for i in range(7)] == [True] * 5 + [False] * 2
    assert f.flooding("SC1") and not f.flooding("SC2")
    assert f.admit("SC2", "misread", 0.1)[0]  # another reader has its own budget


def test_a_flood_is_one_summary_per_window() -> None:
    f = FloodWindows(burst=3, window=2.0)
    passed, summaries = 0, []
    for i in range(10_000):  # 1000 corrupt frames a second for 10 s
        ok, ended = f.admit("SC1", "corrupt_frame", i / 1000)
        passed += ok
        summaries += ended
    summaries += f.due(12.0)
    assert passed == 3  # the first burst only: a steady flood never earns a new one
    assert len(summaries) == 5  # one per 2 s window
    assert sum(s.total for s in summaries) + passed == 10_000
    assert all(s.kind == "corrupt_frame" and s.key == "SC1" for s in summaries)
    assert summaries[0].detail() == f"flood: {summaries[0].total} bad frames in the last 2.0 s"
    assert f.next_deadline() is None and f.due(100.0) == []  # each summary once


def test_the_window_ends_on_time_and_the_budget_refills_after_a_flood() -> None:
    f = FloodWindows(burst=2, window=1.0)
    for i in range(5):
        f.admit("SC1", "noread", 0.1 * i)
    assert f.next_deadline() == pytest.approx(0.2 + 1.0)  # the window opened at the first held-back read
    assert f.due(1.0) == []
    [s] = f.due(1.2)
    assert (s.total, s.counts, s.started, s.ended) == (3, {"noread": 3}, pytest.approx(0.2), 1.2)
    assert f.admit("SC1", "noread", 10.0) == (True, [])  # quiet for a while: a bad read gets its rescan again


def test_a_mixed_flood_is_summarised_by_kind_and_flush_ends_it_early() -> None:
    f = FloodWindows(burst=1, window=60.0)
    f.admit("SC1", "corrupt_frame", 0.0)
    for kind in ["corrupt_frame", "frame_lost", "corrupt_frame", "forged_frame"]:
        assert f.admit("SC1", kind, 1.0) == (False, [])
    s = f.flush("SC1", 3.0)  # a valid card: the summary goes first
    assert s is not None and s.kind == "corrupt_frame"
    assert s.counts == {"corrupt_frame": 2, "frame_lost": 1, "forged_frame": 1}
    assert s.detail() == "flood: 4 bad frames in the last 2.0 s (corrupt_frame 2, frame_lost 1, forged_frame 1)"
    assert f.flush("SC1", 3.0) is None and not f.flooding("SC1")


def test_a_window_that_ended_is_reported_before_the_next_read() -> None:
    f = FloodWindows(burst=1, window=1.0)
    f.admit("SC1", "noread", 0.0)
    f.admit("SC1", "noread", 0.5)
    ok, ended = f.admit("SC1", "noread", 1.6)
    assert [s.total for s in ended] == [1] and ok  # 1.1 s of refill: a token again


@pytest.mark.parametrize("burst,window", [(0, 1.0), (1, 0.0), (1, -1.0)])
def test_bad_parameters_are_refused(burst: int, window: float) -> None:
    with pytest.raises(ValueError):
        FloodWindows(burst, window)
