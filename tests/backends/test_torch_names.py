"""The torch backend's mechanism names are public API (the CLI needs no private names)."""

from __future__ import annotations

import pytest

from deniable.backends.torch_backend import TorchMadlib, torch_mechanism_class, torch_mechanisms
from deniable.mechanisms import Madlib, available_mechanisms


def test_torch_mechanisms_are_registered_names():
    names = torch_mechanisms()
    assert names == ["brr", "madlib", "mahalanobis", "tem", "vickrey"] and set(names) <= set(available_mechanisms())
    assert torch_mechanism_class("madlib") is TorchMadlib and issubclass(TorchMadlib, Madlib)


def test_a_mechanism_without_torch_backend_is_named():
    with pytest.raises(ValueError, match=r"'santext' has no torch backend \(torch backends: brr, madlib, mahalanobis, tem, vickrey\)"):
        torch_mechanism_class("santext")
