"""The on-disk results: every table's schema (:mod:`~h9eval.results.schema`), the versioned reader
and writer (:mod:`~h9eval.results.io`) and :func:`load_results` (:mod:`~h9eval.results.store`)."""

from h9eval.results.store import Results, load_results

__all__ = ["Results", "load_results"]
