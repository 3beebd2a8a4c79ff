"""The common part of the attack results (:class:`~deniable.evaluation.AuthorshipResult`,
:class:`~deniable.evaluation.MembershipResult`): their fields as a plain dict."""

from __future__ import annotations

import dataclasses
from typing import Any


class ResultRecord:
    """Mixin of the result dataclasses: :meth:`as_dict` gives every field (nested values copied)."""

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict (:func:`dataclasses.asdict`), ready for JSON or a table row."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]
