"""Studies: what drives runs and reads their evidence, above the pure :mod:`h9eval.analysis`.

The threshold tuner (:mod:`h9eval.studies.tune`), the all-policies comparison
(:mod:`h9eval.studies.all_policies`) and the bill check build run specs or sweeps, execute them, and
hand the tables to the analysis (which never runs anything). Sits between ``analysis`` and ``cli`` in
the layer diagram."""
