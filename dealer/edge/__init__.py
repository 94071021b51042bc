"""The service edge: IO around the pure core (broker, serial, journal, clock, config, metrics)."""
