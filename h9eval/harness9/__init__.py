"""harness9's own artefacts: its SQLite session store, its JSONL compaction-records folders, and
the runner of the reference cases produced by its code."""
