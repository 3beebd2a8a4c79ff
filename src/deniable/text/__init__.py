"""Text handling: layout-preserving tokenization and batch privatization of texts."""

from .privatize import OOV_POLICIES, check_oov, privatize_texts
from .tokenize import apply_case, case_pattern, split_words, words_of

__all__ = ["OOV_POLICIES", "check_oov", "privatize_texts", "split_words", "words_of", "case_pattern", "apply_case"]
