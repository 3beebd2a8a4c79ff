"""Word embeddings: the :class:`Embedding` type and loaders for common file formats."""

from .embedding import UNK_ID, Embedding
from .loaders import FORMATS, detect_format, load_default_embedding, load_embedding

__all__ = ["Embedding", "UNK_ID", "FORMATS", "detect_format", "load_embedding", "load_default_embedding"]
