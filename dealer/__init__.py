"""Live-dealer table backend: the pure core (cards, games, rounds, money) and the service."""

__version__ = "0.1.0"
