"""One JSON object per line for every log record of the process, on stderr.

Our own loggers are structlog loggers (``table_id`` / ``round_id`` bound through
contextvars); libraries log through the standard ``logging`` module (paho-mqtt via
aiomqtt, asyncio, pyserial, warnings). Both go through the same processors and end in
one handler on the root logger (one stream, one lock): a library record through its
:class:`structlog.stdlib.ProcessorFormatter` (``foreign_pre_chain``), a structlog event
rendered by structlog and written under the handler's lock. Every line has ``timestamp``,
``level``, ``logger`` and ``event``, and an exception is one ``exception`` string (its
traceback escaped inside the JSON, never on lines of its own).
An exception nobody caught (the main thread, another thread, an unraisable one in a
finalizer) is logged the same way instead of Python printing a bare traceback.

stderr, not stdout: commands that answer on stdout (``dealer bench``, ``dealer soak``,
``dealer outbox list``, ...) keep their answer apart from their logs; under systemd
journald captures both streams anyway.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any, TextIO

import structlog

#: Applied to structlog events and to library records alike, before rendering.
_SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.StackInfoRenderer(),
    structlog.processors.format_exc_info,
]


_HANDLER = "dealer.edge.logs"


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record is emitted (like logging's own
    last-resort handler), so a test that swaps stderr does not leave a dead stream behind."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


class _LineLogger:
    """structlog's final logger: writes the line structlog rendered through the root handler
    (its stream, under its lock), so our events and library records never interleave. Our
    events skip the ``logging`` machinery (two ``LogRecord`` objects and a caller lookup per
    line, about three times the cost) since structlog has already rendered them."""

    def __init__(self, handler: logging.StreamHandler[TextIO], name: str) -> None:
        self._handler = handler
        self.name = name  # structlog.stdlib.add_logger_name reads it

    def msg(self, message: str) -> None:
        h = self._handler
        h.acquire()
        try:
            stream = h.stream
            stream.write(message + "\n")
            stream.flush()
        except Exception:  # a closed or broken stream must not take the caller down
            pass
        finally:
            h.release()

    debug = info = warning = warn = error = critical = fatal = exception = log = msg


def formatter(*, json: bool = True) -> structlog.stdlib.ProcessorFormatter:
    """The formatter of the root handler: a structlog event or a foreign ``LogRecord`` -> one line."""
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_SHARED,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, _renderer(json)],
    )


def _renderer(json: bool) -> Any:
    return structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)


#: Libraries that log the same warning at every retry: psycopg_pool says "reconnection attempt
#: failed" every few seconds for as long as the database is down.
REPEATING_LOGGERS = ("psycopg.pool",)


class Throttle(logging.Filter):
    """Let one record of each message template through per ``seconds`` (the first at once): an
    outage is said when it starts and then once a minute, not at every retry."""

    def __init__(self, seconds: float = 60.0) -> None:
        super().__init__()
        self.seconds = seconds
        self._last: dict[tuple[str, str], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.seconds:
            return False
        self._last[key] = now
        return True


def configure_logging(level: str = "info", *, json: bool = True, stream: TextIO | None = None,
                      uncaught: bool = True) -> None:
    """Route every logger of the process (structlog's and the standard library's) through
    one handler at ``level``: JSON lines on ``stream`` (default: the current stderr).
    ``uncaught``: also log exceptions nobody caught (a process's entry point; a test
    runner keeps its own hooks)."""
    lvl = getattr(logging, level.upper())
    handler: logging.StreamHandler[TextIO] = _StderrHandler() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(formatter(json=json))
    handler.set_name(_HANDLER)
    root = logging.getLogger()
    for old in list(root.handlers):  # ours from an earlier call; a test runner's capture stays
        if old.get_name() == _HANDLER:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(lvl)
    for name in REPEATING_LOGGERS:
        lg = logging.getLogger(name)
        if not any(isinstance(f, Throttle) for f in lg.filters):
            lg.addFilter(Throttle())
    logging.captureWarnings(True)  # warnings.warn -> the "py.warnings" logger, not a bare line
    structlog.configure(
        processors=[*_SHARED, _renderer(json)],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=lambda *args: _LineLogger(handler, str(args[0]) if args else "dealer"),
        cache_logger_on_first_use=False,
    )
    if json and uncaught:
        _log_uncaught()


def _log_uncaught() -> None:
    """Exceptions nobody caught become one JSON line (level critical) instead of a bare
    traceback: the main thread's (the process then exits 1 as before), another thread's,
    and the "Exception ignored in ..." kind (``sys.unraisablehook``)."""
    crash = logging.getLogger("uncaught")

    def excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if issubclass(kind, KeyboardInterrupt):
            sys.__excepthook__(kind, exc, tb)
            return
        crash.critical("uncaught exception", exc_info=(kind, exc, tb))

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        crash.critical("uncaught exception in thread %s", args.thread.name if args.thread else "?",
                       exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback))

    def unraisable(u: Any) -> None:
        crash.error("%s: %r", u.err_msg or "exception ignored in", u.object,
                    exc_info=(u.exc_type, u.exc_value or u.exc_type(), u.exc_traceback))

    sys.excepthook = excepthook
    threading.excepthook = thread_hook
    sys.unraisablehook = unraisable


__all__ = ["configure_logging", "formatter"]
