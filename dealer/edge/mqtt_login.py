"""The broker login of this node: shared by the service's bus, the anchor check and the tools."""

from __future__ import annotations

from dealer.edge.config import Settings


def mqtt_password(settings: Settings) -> str | None:
    """The broker password: the content of ``mqtt.password_file`` when set (without the
    trailing newline), else ``mqtt.password``."""
    m = settings.mqtt
    if m.password_file is not None:
        return m.password_file.read_text(encoding="utf-8").rstrip("\r\n")
    return m.password
