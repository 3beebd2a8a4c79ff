"""One meaning of "words changed" across the run summary, the service and the evaluation.

A word token is changed when the word at its place in the output is not the input word (an
unknown word privatized as UNK always is). The run summary splits that count into in-vocabulary
words changed (``changed``) and unknown words (``unknown``); the service's ``changed`` and the
evaluation's :func:`~deniable.evaluation.utility.words_changed` count every token, so on the same
privatization ``service == evaluation == summary.changed + summary.unknown`` (``oov="unk"``).
"""

from __future__ import annotations

import pytest

import deniable
from deniable.evaluation.utility import words_changed
from deniable.service.pool import privatize_detailed

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "I don't think zzqx is a word, NASA said.",
    "Hello World! e-mail me at qqzzv tomorrow",
    "Ünïcode naïve café résumé, she'd've said",
] * 4


@pytest.mark.parametrize("name, epsilon", [("madlib", 12.0), ("tem", 4.0), ("custext", 3.0), ("santext", 3.0), ("diffractor", 2.0)])
def test_summary_service_and_evaluation_count_the_same_changed_words(name, epsilon):
    mech = deniable.get_mechanism(name, epsilon=epsilon)
    out, summary = mech.privatize(TEXTS, rng=1, return_summary=True)
    detailed = privatize_detailed(mech, TEXTS, rng=1)
    assert detailed["texts"] == out
    changed, total = words_changed(TEXTS, out)
    assert total == summary.words == detailed["words"]
    assert summary.unknown > 0 and 0 < summary.changed < summary.in_vocabulary
    assert detailed["changed"] == changed == summary.changed + summary.unknown
