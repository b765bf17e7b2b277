"""``artifact_trail``: build, test and publish release artifacts whose paths, versions and digests
must be carried to the end.

``build(component)`` compiles one component (a long build log) and names the artifact it made
somewhere in it: ``built dist/<component>/<component>-<version>.whl digest <digest>``, with a
fresh version and digest per build. ``test_artifact(path)`` tests one artifact by its path.
``publish(manifest)`` ends the task: the manifest lists ``<path>@<digest>`` for every component's
latest build. A rebuild (when the first build's result is gone from view) makes a new version,
so a manifest that mixes an old path with a new digest, or lists a superseded build, is wrong.

The state check compares the published manifest with the set of latest builds (paths,
versions and digests exactly); every listed artifact must have been tested after its build
(an untested artifact is a violation). Rebuilds are duplicate side effects, not failures.
Targets: the artifact trail (paths, identifiers, versions) that summaries paraphrase or drop.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.closedloop.worlds.base import (
    READ,
    SIDE_EFFECT,
    Assessment,
    GroundFact,
    Subgoal,
    World,
    WorldParams,
    WorldScale,
    default_scale,
    register_world,
    tool_spec,
)

__all__ = ["ArtifactTrail", "ArtifactTrailParams"]

_PARTS = (
    "core",
    "api",
    "cli",
    "web",
    "auth",
    "store",
    "sync",
    "feed",
    "mail",
    "jobs",
    "geo",
    "pay",
    "docs",
    "lint",
    "ui",
    "ops",
)


@dataclass(frozen=True, kw_only=True)
class ArtifactTrailParams(WorldParams):
    #: components to build, test and publish
    n_components: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_between("n_components", 1, 120)


@register_world
class ArtifactTrail(World):
    kind: ClassVar[str] = "artifact_trail"
    params_type: ClassVar[type[WorldParams]] = ArtifactTrailParams
    tool_kinds: ClassVar[dict[str, str]] = {"build": SIDE_EFFECT, "test_artifact": READ, "publish": SIDE_EFFECT}
    stresses: ClassVar[str] = "the artifact trail: paths, versions and digests carried to a final manifest"
    scale: ClassVar[WorldScale] = default_scale(n_components=70, size_scale=2.0)
    params: ArtifactTrailParams

    def _new_state(self, rng: random.Random) -> dict[str, Any]:
        names: list[str] = []
        while len(names) < self.params.n_components:
            n = f"{rng.choice(_PARTS)}-{rng.choice(_PARTS)}{rng.randrange(10)}"
            if n not in names:
                names.append(n)
        return {
            "components": names,
            "builds": [],
            "tests": [],
            "published": [],
            "build_rng": rng.getrandbits(32),
            "violations": [],
        }

    def _task_text(self) -> str:
        comps = self._state["components"]
        return (
            f"TASK artifact_trail: build, test and publish the {len(comps)} components listed below.\n"
            "Details: build(component) builds one and names the artifact (<path>@<digest>) in its log; "
            'test_artifact(path) tests an artifact; finish with publish(manifest=["<path>@<digest>", ...]) listing '
            "the latest build of every component, each tested, exactly once.\nComponents: " + ", ".join(comps) + "."
        )

    def _tool_specs(self) -> tuple[dict[str, Any], ...]:
        return (
            tool_spec("build", "Build one component; the log names the artifact.", {"component": "string"}),
            tool_spec("test_artifact", "Test one built artifact by its path.", {"path": "string"}),
            tool_spec("publish", "Publish the release manifest (once).", {"manifest": "array"}),
        )

    def _tool_build(self, args: dict[str, Any]) -> str:
        comp = str(args["component"])
        if comp not in self._state["components"]:
            return f"Error: no such component: {comp}"
        rng = random.Random(f"{self._state['build_rng']}:{len(self._state['builds'])}")
        version = f"{rng.randrange(1, 9)}.{rng.randrange(40)}.{rng.randrange(200)}"
        digest = f"sha256-{rng.getrandbits(48):012x}"
        path = f"dist/{comp}/{comp}-{version}.whl"
        self._state["builds"].append({"component": comp, "path": path, "digest": digest, "step": self._step})
        return self._observe(f"built artifact {path}@{digest}", tag="build", kind="test_log")

    def _latest(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for b in self._state["builds"]:
            out[b["component"]] = b
        return out

    def _tool_test_artifact(self, args: dict[str, Any]) -> str:
        path = str(args["path"])
        if not any(b["path"] == path for b in self._state["builds"]):
            return f"Error: no such artifact: {path}"
        self._state["tests"].append((path, self._step))
        return self._observe(f"tested {path}: ok", tag="test", kind="test_log")

    def _tool_publish(self, args: dict[str, Any]) -> str:
        manifest = args["manifest"]
        if not isinstance(manifest, list) or not all(isinstance(m, str) for m in manifest):
            return 'Error: manifest must be a list of "<path>@<digest>" entries'
        refusal = self._once("published", (tuple(manifest), self._step), "Error: the release was already published")
        if refusal:
            return refusal
        tested = {p for p, _ in self._state["tests"]}
        for entry in manifest:
            path = entry.partition("@")[0]
            if path not in tested:
                self._violate("test_before_publish", f"published untested {path}")
        return f"Published {len(manifest)} artifact(s)."

    def expected_manifest(self) -> list[str]:
        return sorted(f"{b['path']}@{b['digest']}" for b in self._latest().values())

    def _assess(self) -> Assessment:
        s = self._state
        latest = self._latest()
        first = s["published"][0] if s["published"] else None
        listed = set(first[0]) if first else set()
        goals = [Subgoal(f"built:{c}", c in latest) for c in s["components"]]
        goals += [
            Subgoal(f"published:{c}", c in latest and f"{latest[c]['path']}@{latest[c]['digest']}" in listed)
            for c in s["components"]
        ]
        exact = (
            first is not None and sorted(first[0]) == self.expected_manifest() and len(latest) == len(s["components"])
        )
        goals.append(Subgoal("manifest_exact", exact))
        rebuilds = len(s["builds"]) - len(latest)
        expected = set(self.expected_manifest())
        return Assessment(
            goals=goals,
            violations=s["violations"],
            reasons=((first is None, "not published"), (not exact, "manifest wrong")),
            clean=len(s["published"]) <= 1,
            side_effects=len(latest) + min(len(s["published"]), 1),
            duplicates=rebuilds + max(len(s["published"]) - 1, 0),
            wrong=len(listed - expected) if first else 0,
            finished=first is not None,
        )

    def ground_truth(self) -> tuple[GroundFact, ...]:
        facts = []
        for c, b in sorted(self._latest().items()):
            facts.append(
                GroundFact(
                    f"path_{c}",
                    f"Which artifact did the latest build of {c} make?",
                    b["path"],
                    ("publish",),
                    item_type="artifact",
                )
            )
            facts.append(
                GroundFact(
                    f"digest_{c}",
                    f"What is the digest of the latest build of {c}?",
                    b["digest"],
                    ("publish",),
                    item_type="artifact",
                )
            )
        return tuple(facts)
