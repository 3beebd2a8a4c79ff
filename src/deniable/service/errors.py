"""The service's error for requests the mechanism pool cannot serve (no web framework here)."""

from __future__ import annotations

__all__ = ["PoolError"]


class PoolError(ValueError):
    """A request names something the pool cannot build (``code`` says what, for the JSON error)."""

    def __init__(self, message: str, *, code: str = "invalid_parameters") -> None:
        super().__init__(message)
        self.code = code
