"""Orchestration above the analysis: the threshold tuner drives sweeps and replays of candidate
configurations and reads their evidence with :mod:`h9eval.analysis` (``tune``; see
:mod:`h9eval.tuning.tune`). Sits between ``analysis`` and ``cli`` in the layer diagram."""
