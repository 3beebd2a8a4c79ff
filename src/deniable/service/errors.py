"""The service's error for requests the mechanism pool cannot serve (no web framework here)."""

from __future__ import annotations

__all__ = ["PoolError", "ServiceError"]


class PoolError(ValueError):
    """A request names something the pool cannot build (``code`` says what, for the JSON error)."""

    def __init__(self, message: str, *, code: str = "invalid_parameters") -> None:
        super().__init__(message)
        self.code = code


class ServiceError(Exception):
    """A request refused with an HTTP status other than 422 (e.g. 403 when the ledger's budget
    refuses the release), answered with the JSON error shape."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code
