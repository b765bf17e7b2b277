"""Optional integrations with other frameworks, each behind an extra (``h9eval[inspect]``).

Nothing else in h9eval imports this package: a module here imports its framework at module level
and is imported by the user (``from h9eval.integrations.inspect import H9Compaction``).
"""
