"""A journal URL as messages and logs may show it: without its password (in the user part or a
``password`` parameter), and the password itself, to keep it out of every message. No driver
needed: the CLI, the tools and the journals all use these."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def redact(url: str) -> str:
    """The URL without its password (in the user part or a ``password`` parameter): what is logged."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, hosts = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{hosts}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_password(url: str) -> str | None:
    """The password in a URL (to keep it out of every message), if it has one."""
    try:
        parts = urlsplit(url)
        return parts.password or dict(parse_qsl(parts.query)).get("password") or None
    except ValueError:
        return None


__all__ = ["redact", "url_password"]
