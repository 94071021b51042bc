"""The one thread a journal's blocking calls run in, so that they never overlap: its commits (a
blocking backend's), and the service's replays, retention steps and reads beside them. Each
journal has its own, made when first asked for (a journal a tool opens never starts one) and
stopped when the journal closes."""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor


class WriterThread:
    """:attr:`writer` of a journal (a base class of every backend)."""

    _writer_pool: ThreadPoolExecutor | None = None

    @property
    def writer(self) -> Executor:
        """The journal's writer thread (one worker, made on first use)."""
        if self._writer_pool is None:
            self._writer_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        return self._writer_pool

    def _stop_writer(self) -> None:
        """Let the writer thread end once its queued work is done (closing the journal)."""
        pool, self._writer_pool = self._writer_pool, None
        if pool is not None:
            pool.shutdown(wait=False)


__all__ = ["WriterThread"]
