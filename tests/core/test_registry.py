"""One registry type: a name registered twice is refused (policies, scorers, summarizers), and an
unknown name or parameter gets a did-you-mean answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from h9eval.compaction.base import POLICIES, Policy, register
from h9eval.core.errors import ConfigError
from h9eval.core.registry import Registry
from h9eval.probes.scorers import SCORERS, register_scorer
from h9eval.summarizers.registry import SUMMARIZERS


def test_a_second_registration_of_a_name_is_refused() -> None:
    r: Registry[int] = Registry("widget")
    r.add("a", 1)
    with pytest.raises(ConfigError, match=r"widget 'a' is already registered"):
        r.add("a", 2)
    assert r.get("a") == 1


def test_a_policy_kind_registered_twice_is_refused() -> None:
    """``@register`` used to replace the built-in silently: every later run of that kind ran the
    replacement."""
    builtin = POLICIES.get("keep_all")
    with pytest.raises(ConfigError, match=r"policy 'keep_all' is already registered"):

        @register
        @dataclass(frozen=True, kw_only=True)
        class Impostor(Policy):
            kind: ClassVar[str] = "keep_all"

    assert POLICIES.get("keep_all") is builtin


def test_a_scorer_name_registered_twice_is_refused() -> None:
    builtin = SCORERS.get("recall")
    with pytest.raises(ConfigError, match=r"scorer 'recall' is already registered"):

        @register_scorer
        class Impostor:
            name: ClassVar[str] = "recall"

    assert SCORERS.get("recall") is builtin
    with pytest.raises(ConfigError, match=r"already registered"):
        SUMMARIZERS.add("offline", object)


def test_unknown_names_and_parameters_get_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown policy 'progresive'; did you mean 'progressive'\?"):
        POLICIES.get("progresive")
    with pytest.raises(ConfigError, match=r"did you mean 'warn_frac'\?"):
        POLICIES.check_params("progressive", ["warn_fracc"], ["warn_frac", "soft_frac"])
    with pytest.raises(ConfigError, match=r"unknown scorer 'recal'; did you mean 'recall'\?"):
        SCORERS.get("recal")
