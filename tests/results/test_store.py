"""Golden results folders: one written by this version loads, one with a table of an unknown
schema version is refused, naming the table and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from h9eval.core.errors import FormatError
from h9eval.results.store import load_results


GOLDEN = Path(__file__).resolve().parents[1] / "data"


def test_golden_results_of_the_current_version_load() -> None:
    """A results folder written by this version (checked in) loads; its tables keep their rows."""
    r = load_results(GOLDEN / "results-v1")
    assert len(r.runs) == 2 and set(r.runs["status"]) == {"ok"}
    assert len(r.calls) == 80 and len(r.compactions) > 0
    assert set(r.runs["policy_kind"]) == {"keep_all", "progressive"}


def test_golden_results_of_an_unknown_table_version_are_refused_by_name() -> None:
    """The same folder with its compactions tables stamped version 99: refused, naming the table
    and the file, while the other tables' versions are fine."""
    with pytest.raises(
        FormatError,
        match=r"compactions\.parquet: compactions table schema_version 99 is not supported; this h9eval reads "
        r"schema_version 1",
    ):
        load_results(GOLDEN / "results-unknown-version")
