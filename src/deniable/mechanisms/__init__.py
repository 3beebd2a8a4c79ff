"""Word-level metric-DP mechanisms (one module per mechanism) and the name registry."""

from .base import EmbeddingMechanism, Guarantee, Mechanism
from .madlib import Madlib
from .mahalanobis import Mahalanobis
from .registry import available_mechanisms, get_mechanism, mechanism_class, register_mechanism

__all__ = [
    "Mechanism",
    "EmbeddingMechanism",
    "Guarantee",
    "Madlib",
    "Mahalanobis",
    "get_mechanism",
    "register_mechanism",
    "available_mechanisms",
    "mechanism_class",
]
