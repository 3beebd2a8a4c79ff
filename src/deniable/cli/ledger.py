"""``deniable ledger``: the totals of a release ledger; and the ledger side of ``deniable privatize
--ledger`` (:class:`LedgerRun`).

    deniable privatize tickets.jsonl -o out.jsonl -m madlib -e 10 --column body --ledger releases.db --user-column user_id --max-total 30
    deniable ledger show releases.db
    deniable ledger show releases.db --json

The ledger (:class:`deniable.Ledger`, docs/ledger.md) holds one row per release and never any
text. ``ledger show`` prints one table of totals per dataset and per user key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from ..errors import DataError
from ..ledger import BudgetExceeded, Ledger, Tally, Total
from ..text.io import detect_format

#: environment variable holding the secret under which user keys (and unnamed datasets' file
#: hashes) are stored as keyed hashes; unset: user keys are stored as given
KEY_VARIABLE = "DENIABLE_LEDGER_KEY"

_MEANING = (
    "epsilon_sum    sum of epsilon over the releases, per word: a word released in all of them is bound by epsilon_sum * d",
    "record_bound   sum of epsilon * words of the largest record: one record, every word moved by at most D, by record_bound * D",
    "epsilon_words  sum of epsilon * words: all the key's records, every word moved by at most D, by epsilon_words * D",
    "(metric DP, basic composition: epsilon * d per word, summed, in the metric d of the releases; see docs/ledger.md)",
)


def _hash_key() -> str | None:
    return os.environ.get(KEY_VARIABLE) or None


# -- deniable ledger show ----------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def ledger() -> None:
    """Read a release ledger (written by deniable privatize --ledger or deniable.Ledger).

    The ledger records one row per release (time, dataset identity, user keys, mechanism, epsilon
    and how it was chosen, words privatized per record, output location), never any text. See
    docs/ledger.md for what the totals bound and what they do not.
    """


@ledger.command("show")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the totals as one JSON object instead of a table.")
def show(path: str, as_json: bool) -> None:
    """Print the totals per dataset and per user key of the ledger PATH.

    \b
    epsilon_sum    sum of epsilon over the releases that touched the key: the bound per word
    record_bound   sum of epsilon * (words of its largest record): the bound per record, per unit of d
    epsilon_words  sum of epsilon * (its words): the bound for all of its records, per unit of d

    Each is basic sequential composition of metric DP (epsilon * d per word, summed), valid for
    one metric d: a key whose releases used several metrics is marked.
    """
    book = Ledger(path, create=False)
    try:
        datasets, users, count = book.totals("dataset"), book.totals("user"), len(book)
    finally:
        book.close()
    if as_json:
        click.echo(json.dumps({"ledger": path, "releases": count, "datasets": [t.to_dict() for t in datasets], "users": [t.to_dict() for t in users]}, indent=2))
        return
    click.echo(f"ledger {path}: {count} release(s), {len(datasets)} dataset(s), {len(users)} user key(s)")
    if not count:
        return
    metrics = sorted({m for t in datasets + users for m in t.metrics})
    number = {m: i + 1 for i, m in enumerate(metrics)}
    header = ("scope", "key", "releases", "records", "words", "epsilon_sum", "record_bound", "epsilon_words", "d", "last release")
    rows = [header] + [_row(t, number) for t in datasets + users]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    numeric = {2, 3, 4, 5, 6, 7}
    for r in rows:
        click.echo("  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    for m, i in number.items():
        click.echo(f"d{i}: {m}")
    if any(len(t.metrics) > 1 for t in datasets + users):
        click.echo("note: a key marked with several d had releases under different metrics: its sums are bookkeeping, not one guarantee")
    for line in _MEANING:
        click.echo(line)


def _row(t: Total, number: dict[str, int]) -> tuple[str, ...]:
    key = t.key if len(t.key) <= 28 else t.key[:27] + "…"
    return (
        t.scope, key, str(t.releases), str(t.records), str(t.words), f"{t.epsilon_sum:.6g}", f"{t.record_bound:.6g}", f"{t.epsilon_words:.6g}",
        ",".join(f"d{number[m]}" for m in t.metrics), t.last[:19].replace("T", " "),
    )


# -- deniable privatize --ledger ---------------------------------------------------------------------


class LedgerRun:
    """The ledger side of one ``deniable privatize`` run: usage checks (exit 2), the budget check
    of every input's dataset before anything is privatized, the per-record word counts (and user
    keys) while it runs, and the check-and-append of each input's release before its output is
    committed (a refused release raises, so the atomic output is never written)."""

    def __init__(self, path: str, dataset: str | None, max_total: float | None, user_column: str | None) -> None:
        self.path, self.dataset, self.max_total, self.user_column = path, dataset, max_total, user_column
        self.book: Ledger | None = None
        self.identities: dict[str, str] = {}
        self.recorded: list[str] = []

    @classmethod
    def from_options(
        cls, path: str | None, dataset: str | None, max_total: float | None, user_column: str | None, *,
        inputs: tuple[str, ...], output: str, column: str, fmt: str | None, spark: bool,
    ) -> LedgerRun | None:
        """None without ``--ledger``; usage errors (exit 2) for options that cannot work together."""
        if path is None:
            for name, value in (("--dataset", dataset), ("--max-total", max_total), ("--user-column", user_column)):
                if value is not None:
                    raise click.BadParameter(f"{name} applies to a ledger; add --ledger PATH", param_hint=name)
            return None
        if dataset is not None and not dataset.strip():
            raise click.BadParameter("needs a non-empty name", param_hint="--dataset")
        if dataset is not None and len(inputs) > 1:
            raise click.BadParameter("--dataset names one input; with several inputs each is identified by a hash of its bytes", param_hint="--dataset")
        if dataset is None and spark:
            raise click.BadParameter("--ledger with --spark needs --dataset NAME: a Spark input (a directory of part files) is not hashed", param_hint="--dataset")
        if dataset is None and "-" in inputs:
            raise click.BadParameter("stdin has no file to identify: name the dataset with --dataset NAME", param_hint="--dataset")
        if max_total is not None and output == "-":
            raise click.BadParameter(
                "--max-total needs -o FILE: a release the ledger refuses after the run must leave no output, and stdout cannot be taken back",
                param_hint="--max-total",
            )
        if user_column is not None:
            if user_column == column:
                raise click.BadParameter(f"--user-column {user_column!r} is the text column; the ledger never stores text", param_hint="--user-column")
            for p in inputs if not spark else ():  # Spark: the job checks the column
                if (fmt or ("txt" if p == "-" else detect_format(p))) == "txt":
                    raise click.BadParameter(f"{p} is plain text; --user-column needs jsonl or csv input", param_hint="--user-column")
        if Path(path).is_dir():
            raise click.BadParameter(f"{path} is a folder; give the ledger's file name", param_hint="--ledger")
        return cls(path, dataset, max_total, user_column)

    def precheck(self, mech: Any, inputs: tuple[str, ...]) -> None:
        """Open the ledger, identify every input, and refuse the run (exit 1) if one input's
        dataset is already at its budget: nothing has been privatized or written yet."""
        self.book = Ledger(self.path, max_total=self.max_total, hash_key=_hash_key())
        for p in inputs:
            self.identities[p] = self.dataset if self.dataset is not None else self.book.file_identity(p)
        try:
            if self.user_column is not None:
                self.book.check_user_keys()
            for p in inputs:
                self.book.check(mech, dataset=self.identities[p])
        except BudgetExceeded as exc:
            raise click.ClickException(f"{exc}; nothing was privatized or written") from None
        finally:
            self.book.close()  # reopened by the next call: no connection held while privatizing

    def spark_options(self, mech: Any, output: str) -> dict[str, Any]:
        """The ledger options of :func:`deniable.spark.privatize_column` for a ``--spark`` run,
        after refusing (exit 1) a dataset already at its budget. The release is recorded by the
        job before its output is written; :meth:`spark_refused` turns a refusal into one line."""
        assert self.dataset is not None
        self.book = Ledger(self.path, max_total=self.max_total, hash_key=_hash_key())
        try:
            if self.user_column is not None:
                self.book.check_user_keys()
            self.book.check(mech, dataset=self.dataset)
        except BudgetExceeded as exc:
            raise click.ClickException(f"{exc}; nothing was privatized or written") from None
        return {"ledger": self.book, "dataset": self.dataset, "user_col": self.user_column}

    def spark_recorded(self, output: str) -> None:
        """Report the release the Spark job recorded (its row with this run's new output)."""
        assert self.book is not None
        where = str(Path(output).resolve())
        rel = [r for r in self.book.releases(dataset=self.dataset) if r.output == where][-1]
        self.book.close()
        users = f", {rel.users} user key(s)" if self.user_column else ""
        click.echo(
            f"ledger: release {rel.release_id[:12]} recorded in {self.path} (dataset {rel.dataset[:28]}, epsilon {rel.epsilon:g}, "
            f"{rel.records} records, {rel.words} words{users})",
            err=True,
        )

    def tally(self) -> RecordCounts:
        """A fresh per-input counter for ``_process``."""
        return RecordCounts(self.user_column)

    def commit(self, mech: Any, path: str, counts: RecordCounts, target: str) -> None:
        """Check the budget and append the release of input ``path`` in one transaction; called
        inside the output's atomic block, so a refusal leaves no output file."""
        assert self.book is not None
        where = "<stdout>" if target == "-" else str(Path(target).resolve())
        try:
            rel = self.book.record(mech, dataset=self.identities[path], words=counts.tally, output=where)
        except BudgetExceeded as exc:
            raise click.ClickException(f"{exc}; the output was not written" + ("" if target == "-" else f" ({target})")) from None
        finally:
            self.book.close()
        users = f", {rel.users} user key(s)" if self.user_column else ""
        self.recorded.append(
            f"ledger: release {rel.release_id[:12]} recorded in {self.path} (dataset {rel.dataset[:28]}, epsilon {rel.epsilon:g}, "
            f"{rel.records} records, {rel.words} words{users})"
        )

    def report(self) -> None:
        """One line on stderr per release recorded (after the progress bar is gone)."""
        for line in self.recorded:
            click.echo(line, err=True)


class RecordCounts:
    """Words privatized per record (the pieces of a long record summed) and, with
    ``--user-column``, each record's user key, read from the record's other fields."""

    def __init__(self, user_column: str | None) -> None:
        self.user_column = user_column
        self.tally = Tally()
        self._user: str | int | None = None
        self._words = 0

    def add(self, reader: Any, batch: list[Any], counts: list[int]) -> None:
        for rec, n in zip(batch, counts):
            if rec.first:
                self._user = None if self.user_column is None else self._key(reader, rec)
                self._words = 0
            self._words += n
            if rec.last:
                self.tally.add(self._words, self._user)

    def _key(self, reader: Any, rec: Any) -> str | int | None:
        col = self.user_column
        assert col is not None
        if reader.format == "csv":
            row, _ = rec.frame
            if col not in reader.header:
                raise DataError(f"no column {col!r} (--user-column) in the CSV header (columns: {', '.join(reader.header)})", path=reader.name, line=1)
            value: Any = row[reader.header.index(col)]
        else:
            prefix, suffix = rec.frame
            if prefix is None:  # a blank line: no record text, no user
                return None
            fields = json.loads(prefix + '""' + suffix)  # the text field's value left out
            if col not in fields:
                raise DataError(f"no field {col!r} (--user-column) in this record", path=reader.name, line=rec.line)
            value = fields[col]
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            raise DataError(f"the user key {col!r} must be a non-empty string or an integer, got {json.dumps(value)}", path=reader.name, line=rec.line)
        return value
