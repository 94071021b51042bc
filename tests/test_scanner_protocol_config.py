"""``[tables.scanner] protocol``: the default, the per-protocol baud rate, and every invalid
combination refused at start-up with a message that names it (pure: no IO)."""

from __future__ import annotations

from typing import Any

import pytest

from dealer.edge.config import ConfigError, load_settings


def scanner(game: str = "teen-patti", **keys: Any):
    sc = {"kind": "serial", "port": "/dev/serial/by-id/shoe", "reader_id": "SC1", **keys}
    return load_settings(tables=[{"id": "T1", "game": game, "scanner": sc}]).tables[0].scanner


def test_native_is_the_default_and_each_protocol_has_its_baud_rate() -> None:
    native = scanner()
    assert (native.protocol, native.baudrate, native.capabilities.heartbeats) == ("native", 115200, True)
    beetek = scanner(protocol="beetek")
    assert (beetek.protocol, beetek.baudrate, beetek.capabilities.heartbeats) == ("beetek", 9600, False)
    assert scanner(protocol="beetek", baudrate=19200).baudrate == 19200
    assert scanner(protocol="beetek", game="stud").protocol == "beetek"  # a 52-card game


@pytest.mark.parametrize("keys,game,message", [
    ({"protocol": "acme"}, "teen-patti", "unknown scanner protocol 'acme' (known: beetek, native)"),
    ({"protocol": "beetek", "require_mac": True}, "teen-patti", "protocol 'beetek' cannot authenticate frames"),
    ({"protocol": "beetek", "hmac_key_files": ["/etc/dealer/sc1.key"]}, "teen-patti",
     "protocol 'beetek' cannot authenticate frames"),
    ({"protocol": "beetek", "heartbeat_timeout": 5}, "teen-patti", "protocol 'beetek' has no heartbeat"),
    ({"protocol": "beetek", "kind": "mqtt", "port": None}, "teen-patti", "is for serial scanners"),
    ({"protocol": "beetek"}, "seotda", "cannot report the cards of seotda"),
    ({"protocol": "beetek"}, "matgo", "cannot report the cards of matgo"),
    ({"protocol": "beetek", "baudrate": 0}, "teen-patti", "baudrate"),
])
def test_invalid_combinations_are_refused_with_a_clear_message(keys: dict[str, Any], game: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        scanner(game=game, **keys)
    assert message in str(err.value)
    assert "Traceback" not in str(err.value)
