"""One registry type for every name -> implementation table (policies, summarizers, scorers).

A second registration of a name is an error (OpenHands refuses it too): a silent replacement
would let a plugin or a test quietly change what a name means in every later run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from h9eval.core.errors import ConfigError, did_you_mean

__all__ = ["Registry"]

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
            raise ConfigError(f"{self.what} {name!r} is already registered ({self._entries[name]!r}); pick another name")
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
