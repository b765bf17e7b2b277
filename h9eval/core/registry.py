"""One registry type for every name -> implementation table (policies, summarizers, scorers).

A second registration of a name is an error (OpenHands refuses it too): a silent replacement
would let a plugin or a test quietly change what a name means in every later run.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from h9eval.core.errors import ConfigError, did_you_mean

__all__ = ["Registry", "check_param_types"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one kind; ``what`` names the kind in messages (``"policy"``)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name``; a name already taken raises :class:`ConfigError`."""
        if not name:
            raise ConfigError(f"a {self.what} needs a non-empty name")
        if name in self._entries:
            raise ConfigError(
                f"{self.what} {name!r} is already registered ({self._entries[name]!r}); pick another name"
            )
        self._entries[name] = entry
        return entry

    def decorator(self, name_of: Callable[[T], str]) -> Callable[[T], T]:
        """A class decorator registering a class under ``name_of(cls)``."""

        def deco(entry: T) -> T:
            return self.add(name_of(entry), entry)

        return deco

    def get(self, name: str) -> T:
        """The entry for ``name``; an unknown name gets a did-you-mean :class:`ConfigError`."""
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(did_you_mean(name, self._entries, what=self.what)) from None

    def check_params(self, name: str, given: Iterable[str], accepted: Iterable[str]) -> None:
        """Refuse the first parameter of ``given`` that ``accepted`` lacks, with a did-you-mean."""
        accepted = list(accepted)
        for k in given:
            if k not in accepted:
                raise ConfigError(did_you_mean(k, accepted, what=f"parameter of {self.what} {name!r}"))

    def check_param_types(self, name: str, cls: type, params: Mapping[str, Any]) -> None:
        """:func:`check_param_types` with this registry's label (``policy 'x': ...``)."""
        check_param_types(cls, f"{self.what} {name!r}", params)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def remove(self, name: str) -> None:
        """Drop ``name`` (for tests that register a throw-away entry)."""
        self._entries.pop(name, None)


_TYPE_WORDS = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def check_param_types(cls: type, label: str, params: Mapping[str, Any]) -> None:
    """Refuse a value of the wrong basic type for a field of the dataclass ``cls``
    (``warn_frac="abc"`` from ``--set``, ``hops="3"`` from a spec) with an error naming the field,
    before the class's own validation compares it and fails with a bare ``TypeError``.

    Only int/float/bool/str (optionally ``| None``) are checked: an int is not a bool, a bool is
    not an int, an int is a float; other annotations (tuples...) are left to the class's own
    validation. ``label`` starts the message (``policy 'progressive'``)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: leave it to the class
        return
    for name, value in params.items():
        hint = hints.get(name)
        if hint is None:
            continue
        args = (
            typing.get_args(hint)
            if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
            else (hint,)
        )
        optional = type(None) in args
        kinds = [typing.get_origin(a) or a for a in args if a is not type(None)]
        if value is None:
            if not optional:
                raise ConfigError(f"{label}: {name} must not be null")
            continue
        ok = False
        for k in kinds:
            if k is bool:
                ok = ok or isinstance(value, bool)
            elif k is int:
                ok = ok or (isinstance(value, int) and not isinstance(value, bool))
            elif k is float:
                ok = ok or (isinstance(value, int | float) and not isinstance(value, bool))
            elif k is str:
                ok = ok or isinstance(value, str)
            else:
                ok = True  # a type this check does not know: left to the class
        if not ok:
            want = " or ".join(_TYPE_WORDS[k] for k in kinds)
            raise ConfigError(f"{label}: {name} must be {want}{' or null' if optional else ''}, got {value!r}")
