"""A ledger of text releases: one SQLite row per privatization, and the totals they add up to.

A privacy team that signs off on specific jobs needs a record of what was released over time.
:class:`Ledger` keeps it in a small SQLite file (standard library :mod:`sqlite3` only), appends
one row per release, answers totals per dataset and per user key, and can refuse a release that
would exceed a budget *before anything is written*. See docs/ledger.md.

**What a row records.** The time (UTC, ISO 8601); a unique release id; the dataset identity (a
name the caller gives, or :func:`file_identity`, a hash of the input file's bytes); the mechanism's
name, parameters (JSON), metric d and embedding fingerprint; ε and how it was chosen (the privacy
target, e.g. ``max_n_w``, when ε came from one); the number of records and of words privatized
(in all and in the largest record); per user key (optional) the same counts, the key stored as
given or as a keyed hash (HMAC-SHA256); the output location; the deniable version.

**What it never records.** Text: no input word, no output word, no input file name.

**What the totals bound.** Word-level metric differential privacy (d_χ-privacy; Feyisetan et al.
2020, "Privacy- and Utility-Preserving Textual Analysis via Calibrated Multivariate
Perturbations", WSDM, Sec. 2.3, eq. (1)): a mechanism M is ε·d-private when
``Pr[M(x) = y] <= exp(ε·d(x, x'))·Pr[M(x') = y]`` for all inputs x, x' and outputs y. Each word is
privatized independently, so a record of ℓ words gets ``ε·Σ_j d(x_j, x'_j)`` against any record
x' of the same ℓ words and layout (the string metric ``d(x, x') = Σ_j d(w_j, w'_j)`` of Sec. 2.4
and Theorem 1, Sec. 2.5):
*ε·d per word, summed*. Releases compose additively (basic sequential composition, which d_χ-
privacy shares with DP: Sec. 2.3, after Chatzikokolakis et al. 2013): releases drawn with
independent randomness multiply their likelihood ratios, so a word released k times with
ε_1, ..., ε_k has log-likelihood ratio at most ``(ε_1 + ... + ε_k)·d(w, w')``. For a dataset or user key, :meth:`Ledger.totals`
reports, over the releases that touched it:

* ``epsilon_sum`` = Σ_i ε_i, **per word**: one word released in every one of these releases is
  protected by ``epsilon_sum · d(w, w')``;
* ``record_bound`` = Σ_i ε_i·m_i, with m_i the number of words privatized in the largest record
  (of that dataset or user key) of release i: changing every word of one record by distance at
  most D changes the log-likelihood ratio by at most ``record_bound · D``. The ledger cannot tell
  whether two releases held the same record, so it assumes they did: an upper bound on the
  largest record's total, exact when that record was in every release;
* ``epsilon_words`` = Σ_i ε_i·n_i, with n_i the number of words of the key privatized in release
  i: changing every word of every record of the key by at most D costs at most
  ``epsilon_words · D`` (a user-level bound for records of unchanged length and layout).

They do **not** bound: what the number of records, their lengths and layout (whitespace,
punctuation) and copied fields reveal (those are released as they are, so whether a record or a
user is present at all is not protected); words that were not privatized (``oov="keep"`` copies
them verbatim); pairs of words at distance ∞ (CusText across output sets, SanText+'s non-sensitive
words); releases that were not recorded, or that shared their randomness (one seed reused).
ε adds up only within one metric: releases with
different metrics d_i (other mechanisms or embeddings) are bound by Σ_i ε_i·d_i(x, x'), which one
number does not summarize; each total lists its metrics so that a reader sees when they differ.

**Budget.** ``Ledger(path, max_total=X)`` refuses (:class:`BudgetExceeded`, before anything is
written) a release after which the ``epsilon_sum`` of its dataset or of one of its user keys would
exceed X. Check and append run in one ``BEGIN IMMEDIATE`` transaction, so concurrent writers never
pass the budget together.

**Concurrency.** Threads may share a :class:`Ledger`; processes open their own. The file is in WAL
mode; every write is one ``BEGIN IMMEDIATE`` transaction with a busy timeout, retried with backoff
when SQLite reports the file busy, and keyed by a random release id, so a retried write is never
appended twice. Keep the file on a local file system (WAL needs shared memory; network file
systems do not provide it).
"""

from __future__ import annotations

from .book import Ledger
from .records import BudgetExceeded, Release, Tally, Total, file_identity
from .store import APPLICATION_ID, RELATIVE_TOLERANCE, SCHEMA_VERSION

__all__ = ["Ledger", "Release", "Total", "Tally", "BudgetExceeded", "file_identity", "APPLICATION_ID", "RELATIVE_TOLERANCE", "SCHEMA_VERSION"]
