"""Token buckets: a flooding sender is counted, not journaled row by row.

Pure: the caller passes the (monotonic) time, so tests need no clock.
"""

from __future__ import annotations


class TokenBuckets:
    """One bucket per key: ``burst`` tokens at most, refilled at ``per_second``."""

    def __init__(self, burst: int, per_second: float, max_keys: int = 10_000) -> None:
        self.burst, self.rate, self.max_keys = burst, per_second, max_keys
        self._buckets: dict[tuple[str, ...], tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, *key_and_now: object) -> bool:
        """``take(k1, ..., now)``: True when the key had a token (and spends it)."""
        *key, now = key_and_now
        k = tuple(str(x) for x in key)
        tokens, at = self._buckets.get(k, (float(self.burst), float(now)))  # type: ignore[arg-type]
        tokens = min(float(self.burst), tokens + (float(now) - at) * self.rate)  # type: ignore[arg-type]
        if len(self._buckets) >= self.max_keys and k not in self._buckets:
            self._buckets.clear()  # bounded memory: forgetting every bucket only ever allows more
        if tokens < 1:
            self._buckets[k] = (tokens, float(now))  # type: ignore[arg-type]
            return False
        self._buckets[k] = (tokens - 1, float(now))  # type: ignore[arg-type]
        return True
