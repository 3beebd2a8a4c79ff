"""Reports about one privatization run, for the people who sign it off.

:class:`PrivacyReport` (``deniable privatize --privacy-report REPORT.html``) collects, for one job
on one input, what a privacy engineer needs to approve or reject it: the mechanism and its ε, the
guarantee in words, per-document bounds, the input words most likely to survive, the recovery
rate of a Bayes adversary, warnings and plots. It is computed from the input text and names
input words: it stays with the text's owner and is never released with the output.
"""

from .privacy import PrivacyReport, RunRecorder, build_report, document_bounds, n_w_of_words, privatize_with_report, read_examples

__all__ = ["PrivacyReport", "RunRecorder", "build_report", "document_bounds", "n_w_of_words", "privatize_with_report", "read_examples"]
