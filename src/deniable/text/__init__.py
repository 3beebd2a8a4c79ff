"""Text handling: layout-preserving tokenization and batch privatization of texts."""

from .privatize import OOV_POLICIES, check_oov, load_compiled_loops, privatize_texts
from .tokenize import apply_case, case_pattern, lookup_key, split_words, word_pattern, words_of

__all__ = ["OOV_POLICIES", "check_oov", "privatize_texts", "load_compiled_loops", "split_words", "words_of", "word_pattern", "lookup_key", "case_pattern", "apply_case"]
