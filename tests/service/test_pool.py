"""privatize_detailed: the same output as privatize_texts on the texts, plus correct per-word flags."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from deniable import get_mechanism
from deniable.service.pool import privatize_detailed
from deniable.text.privatize import privatize_texts
from deniable.text.tokenize import lookup_key, split_words

from .conftest import WORDS, small_vocab

_emb, _bin = small_vocab()
MECHS = {"madlib": get_mechanism("madlib", _emb, epsilon=3.0), "brr": get_mechanism("brr", _bin, epsilon=0.5)}
_pieces = st.sampled_from(WORDS + ["The", "NASA", "zzq", "x-17", "café", "😀", "", " ", ", ", "...", "\n", "Ünknown"])
_texts = st.lists(st.lists(_pieces, max_size=12).map(" ".join), min_size=1, max_size=5)


@given(texts=_texts, name=st.sampled_from(sorted(MECHS)), oov=st.sampled_from(["unk", "drop"]), case=st.sampled_from(["preserve", "lower"]), seed=st.integers(0, 2**32))
@settings(max_examples=60, deadline=None, derandomize=True)
def test_same_output_as_privatize_texts(texts, name, oov, case, seed):
    mech = MECHS[name]
    res = privatize_detailed(mech, texts, rng=seed, oov=oov, case=case, segments=True)
    assert res["texts"] == privatize_texts(mech, texts, rng=seed, oov=oov, case=case)
    words = [w for t in texts for w in split_words(t)[1::2]]
    assert res["words"] == len(words) == sum(p["words"] for p in res["per_text"])
    out_words = [s["text"] for seg in res["segments"] for s in seg if s["word"]]
    flags = [s["changed"] for seg in res["segments"] for s in seg if s["word"]]
    assert len(out_words) == len(words)
    for w, o, f in zip(words, out_words, flags):
        assert f == (o == "" or lookup_key(o, lower=True) != lookup_key(w, lower=True))
        if lookup_key(w, lower=True) not in WORDS:
            assert f and o != w  # unknown words always change: never copied
    assert res["changed"] == sum(flags)
