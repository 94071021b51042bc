"""Hardware and people stand-ins for tests and the demo: a virtual shoe whose reader speaks
the scanner protocol on a real PTY, with fault injection, so every path the backend takes
with real hardware can be driven reproducibly from a seed."""
