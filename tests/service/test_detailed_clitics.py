"""The service's detailed privatization gives the library's output, clitics included."""

from __future__ import annotations

import deniable
from deniable.service.pool import privatize_detailed


def test_detailed_output_equals_the_library_for_texts_with_clitics():
    mech = deniable.get_mechanism("madlib", deniable.load_embedding(limit=3000), epsilon=12)
    texts = ["I'm at my mother's house, don't wait.", "They'll say it's fine", "no clitic here", ""]
    for seed in range(5):
        got = privatize_detailed(mech, texts, rng=seed, segments=True)
        assert got["texts"] == mech.privatize(texts, rng=seed)
        for text, segs in zip(got["texts"], got["segments"]):
            assert "".join(s["text"] for s in segs) == text  # segments rebuild the output
        _, summary = mech.privatize(texts, rng=seed, return_summary=True)
        assert got["words"] == summary.words and got["unknown"] == summary.unknown
