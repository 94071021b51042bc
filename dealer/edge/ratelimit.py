"""Token buckets: a flooding sender is counted, not journaled row by row.

Pure: the caller passes the (monotonic) time, so tests need no clock.
"""

from __future__ import annotations

from typing import cast


class TokenBuckets:
    """One bucket per key: ``burst`` tokens at most, refilled at ``per_second``."""

    def __init__(self, burst: int, per_second: float, max_keys: int = 10_000) -> None:
        self.burst, self.rate, self.max_keys = burst, per_second, max_keys
        self._buckets: dict[tuple[str, ...], tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, *key_and_now: object) -> bool:
        """``take(k1, ..., now)``: True when the key had a token (and spends it)."""
        *key, now = key_and_now
        t = float(cast(float, now))  # the last argument is the time (a number), the others the key
        k = tuple(str(x) for x in key)
        tokens, at = self._buckets.get(k, (float(self.burst), t))
        tokens = min(float(self.burst), tokens + (t - at) * self.rate)
        if len(self._buckets) >= self.max_keys and k not in self._buckets:
            self._buckets.clear()  # bounded memory: forgetting every bucket only ever allows more
        if tokens < 1:
            self._buckets[k] = (tokens, t)
            return False
        self._buckets[k] = (tokens - 1, t)
        return True


class FloodSummary:
    """The failed inputs of one reader that one flood window held back (kind -> count)."""

    __slots__ = ("key", "counts", "started", "ended")

    def __init__(self, key: str, counts: dict[str, int], started: float, ended: float) -> None:
        self.key, self.counts, self.started, self.ended = key, counts, started, ended

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def kind(self) -> str:
        """The most frequent kind (ties: the first seen)."""
        return max(self.counts, key=lambda k: self.counts[k])

    def detail(self, what: str = "bad frames") -> str:
        text = f"flood: {self.total} {what} in the last {max(self.ended - self.started, 0.0):.1f} s"
        if len(self.counts) > 1:
            text += " (" + ", ".join(f"{k} {n}" for k, n in self.counts.items()) + ")"
        return text

    def __repr__(self) -> str:
        return f"FloodSummary({self.key!r}, {self.counts!r}, {self.started!r}, {self.ended!r})"


class FloodWindows:
    """Per key (a reader), failed inputs beyond a burst are counted, then summarised once per window.

    Each key has a :class:`TokenBuckets` budget of ``burst`` failures, refilled at
    ``burst / window`` per second: a failure that finds a token passes (the caller handles it as
    it always did). One that finds none opens a *flood window* of ``window`` seconds: it and
    every later failure of that key until the window ends are held back and counted (each still
    spends the refill, so a steady flood never earns a new burst). When the window ends — the
    caller asks :meth:`due` at :meth:`next_deadline`, and :meth:`admit` closes ended windows
    first — one :class:`FloodSummary` stands for all of them. :meth:`flush` ends a key's window
    early (a valid read arrives: the summary belongs before it). So a flood costs at most
    ``burst`` passed failures and then one summary per window; failures at a rate below
    ``burst / window`` per second, after a burst of up to ``burst``, are never held back.

    Pure: the caller passes the (monotonic) time in seconds.
    """

    def __init__(self, burst: int, window: float, max_keys: int = 10_000) -> None:
        if burst < 1 or not window > 0:
            raise ValueError("burst must be >= 1 and window > 0")
        self.burst, self.window = burst, float(window)
        self._budget = TokenBuckets(burst=burst, per_second=burst / window, max_keys=max_keys)
        self._open: dict[str, tuple[float, dict[str, int]]] = {}  # key -> (window start, kind -> count)

    def admit(self, key: str, kind: str, now: float) -> tuple[bool, list[FloodSummary]]:
        """One failed input: (passes, summaries of windows that ended before it)."""
        ended = self.due(now)
        token = self._budget.take(key, now)
        win = self._open.get(key)
        if win is None:
            if token:
                return True, ended
            win = self._open[key] = (float(now), {})
        win[1][kind] = win[1].get(kind, 0) + 1
        return False, ended

    def flush(self, key: str, now: float) -> FloodSummary | None:
        """End ``key``'s window now (None: it had none)."""
        win = self._open.pop(key, None)
        return None if win is None else FloodSummary(key, win[1], win[0], float(now))

    def due(self, now: float) -> list[FloodSummary]:
        """Summaries of every window that has ended by ``now`` (each returned once)."""
        ended = [k for k, (start, _) in self._open.items() if now >= start + self.window]
        return [s for k in ended if (s := self.flush(k, now)) is not None]

    def next_deadline(self) -> float | None:
        """When the earliest open window ends (None: no key is flooding)."""
        return min((start + self.window for start, _ in self._open.values()), default=None)

    def flooding(self, key: str) -> bool:
        return key in self._open
