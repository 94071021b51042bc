"""Is the broker there? One bounded connection attempt before a command relies on it.

A command that needs a broker (``dealer demo --broker``, ``dealer bench latency --broker``)
tries it once, for a few seconds, and says at once that it cannot reach it, instead of
retrying in silence until some later timeout turns into a traceback.
"""

from __future__ import annotations

import asyncio
import secrets

#: How long a command waits for a broker to accept a connection before it gives up.
BROKER_WAIT_SECONDS = 5.0


class BrokerUnreachable(Exception):
    """The broker did not accept a connection: the message is one line for the user."""


async def reach_broker(url: str, timeout: float = BROKER_WAIT_SECONDS, *, client_prefix: str = "dealer-probe") -> None:
    """Connect to ``url`` once (MQTT CONNECT and CONNACK) and leave, within ``timeout``.
    Raises ValueError for a URL that is not a broker URL, :class:`BrokerUnreachable` otherwise."""
    import aiomqtt

    from drivers.mqtt import explain, make_tls_context, parse_broker_url

    host, port, tls = parse_broker_url(url)
    why = f"no answer within {timeout:g} s"
    try:
        async with asyncio.timeout(timeout):
            async with aiomqtt.Client(host, port, identifier=f"{client_prefix}-{secrets.token_hex(4)}",
                                      tls_context=make_tls_context() if tls else None, timeout=timeout + 5,
                                      clean_session=True):
                return
    except TimeoutError:
        pass
    except aiomqtt.MqttError as exc:  # refused, reset, bad credentials, TLS
        why = explain(exc)
    except OSError as exc:  # name resolution, TLS files
        why = explain(exc.strerror or exc)
    raise BrokerUnreachable(f"cannot reach the broker at {url}: {why}")


__all__ = ["BROKER_WAIT_SECONDS", "BrokerUnreachable", "reach_broker"]
