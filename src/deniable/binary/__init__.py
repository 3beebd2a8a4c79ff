"""Binary word embeddings for BRR: packed codes, binarizers, Hamming search (BRR paper §4).

``binarize(embedding, n_bits=256)`` turns a real embedding into a :class:`BinaryEmbedding`;
:func:`load_default_binary_embedding` returns the prebuilt 256-bit codes of the bundled default
embedding (built by ``scripts/build_default_binary.py``).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from .binarizers import (
    BINARIZERS,
    DEFAULT_METHOD,
    AutoencoderBinarizer,
    Binarizer,
    ITQBinarizer,
    RandomProjectionBinarizer,
    binarize,
    get_binarizer,
)
from .codes import BinaryEmbedding, majority_code, pack_bits, unpack_bits
from .hamming import HAMMING_INDEX_NAMES, FaissBinaryIndex, HammingIndex, make_hamming_index
from .quality import nn_overlap

__all__ = [
    # codes
    "BinaryEmbedding", "pack_bits", "unpack_bits", "majority_code",
    # binarizers
    "Binarizer", "AutoencoderBinarizer", "RandomProjectionBinarizer", "ITQBinarizer", "BINARIZERS", "DEFAULT_METHOD", "get_binarizer", "binarize",
    # Hamming search and code quality
    "HammingIndex", "FaissBinaryIndex", "make_hamming_index", "HAMMING_INDEX_NAMES", "nn_overlap",
    # the bundled codes
    "DEFAULT_BINARY_FILE", "load_default_binary_embedding",
]

#: The prebuilt codes of the bundled default embedding (256 bits, :data:`DEFAULT_METHOD`).
DEFAULT_BINARY_FILE = "glove840b300d_34k_256.brr"


@lru_cache(maxsize=1)
def load_default_binary_embedding() -> BinaryEmbedding:
    """The 256-bit codes of the bundled default embedding (see ``docs/mechanisms/brr.md``)."""
    ref = resources.files("deniable.binary") / "data" / DEFAULT_BINARY_FILE
    with resources.as_file(ref) as p:
        emb = BinaryEmbedding.load(p)
    emb.source = "deniable default (GloVe 840B 300d, 34k words, 256-bit codes)"
    return emb
