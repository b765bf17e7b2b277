"""One task through one policy: the replay loop (:mod:`~h9eval.runs.replay`) and
:func:`run_task`, which resolves names into objects once, at the edge (:mod:`~h9eval.runs.run`)."""
