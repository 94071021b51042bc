"""IO adapters between the physical table and the sans-IO dealer core.

Everything here turns bytes from a device or a broker into plain values (``ScanInput``,
``LinkStatus``, ...) so that the core never sees a socket, a serial port or a clock.
"""
