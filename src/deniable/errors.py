"""Exceptions and warnings raised by deniable.

Parameter problems raise the built-in ``TypeError`` / ``ValueError`` with a message that names
the parameter and the value. Problems in user data (files, embeddings, input text) raise
:class:`DataError`, which carries the file and line where they were found, so the CLI can print
one readable line and exit with status 1.
"""

from __future__ import annotations

from os import PathLike

__all__ = ["DataError", "DeniableWarning", "PrivacyWarning"]


class DataError(ValueError):
    """Bad input data: a malformed file, an unusable embedding, undecodable text.

    ``str(error)`` reads ``"PATH:LINE: problem"`` (path and line when known).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | PathLike[str] | None = None,
        line: int | None = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path + (f":{self.line}" if self.line is not None else "") + ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        return where + self.message


class DeniableWarning(UserWarning):
    """Something worth knowing that does not stop the work (e.g. duplicate words dropped)."""


class PrivacyWarning(DeniableWarning):
    """An explicit opt-out that weakens privacy, such as passing unknown words through."""
