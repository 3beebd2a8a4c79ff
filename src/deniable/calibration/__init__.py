"""Choosing epsilon: plausible-deniability statistics, privacy ratio, epsilon selection, reports.

* :func:`plausible_deniability` — per-word N_w = Pr[M(w) = w] and effective support S_w
  (Madlib paper §3.2), exact or sampled with confidence intervals.
* :func:`sweep_epsilons`, :func:`summarize` — the same over several ε, in the papers' table shape.
* :func:`select_epsilon` — the largest ε meeting worst-case (or quantile) targets, erring on the
  private side; deprecated in favour of the calibration store (``get_mechanism(name,
  max_n_w=...)``, :func:`deniable.calibration.targets.calibration_for`).
* :func:`equivalent_epsilon`, :func:`mechanism_metric_stats` and the module
  :mod:`deniable.calibration.privacy_ratio` — the privacy ratio (BRR paper Definition 5.1) that
  makes ε comparable across metrics.
* :func:`document_guarantee`, :func:`document_bound` — per-document privacy-loss bounds.
* :func:`run_calibration`, :func:`render_html` — the ``deniable calibrate`` record and report.

Plots (:mod:`deniable.calibration.plots`) need the ``plot`` extra (matplotlib).
"""

from .document import DocumentGuarantee, document_bound, document_guarantee
from .plausible import PlausibleDeniability, effective_support, extreme_words, plausible_deniability, select_words, wilson_interval
from .privacy_ratio import MetricStats, equivalent_epsilon, mechanism_metric_stats, metric_stats
from .report import example_replacements, render_html, run_calibration, write_html
from .select import EpsilonSelection, meets_targets, select_epsilon
from .sweep import Sweep, summarize, sweep_epsilons

__all__ = [
    "plausible_deniability",
    "PlausibleDeniability",
    "select_words",
    "extreme_words",
    "effective_support",
    "wilson_interval",
    "sweep_epsilons",
    "Sweep",
    "summarize",
    "select_epsilon",
    "EpsilonSelection",
    "meets_targets",
    "document_guarantee",
    "document_bound",
    "DocumentGuarantee",
    "run_calibration",
    "example_replacements",
    "render_html",
    "write_html",
    "MetricStats",
    "metric_stats",
    "mechanism_metric_stats",
    "equivalent_epsilon",
]
