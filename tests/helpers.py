"""Builders used by several test modules (spec §10 notation)."""

from __future__ import annotations

from h9eval.core.messages import Message, ToolCall


def S(c: str = "sys") -> Message:
    return Message("system", c)


def U(c: str) -> Message:
    return Message("user", c)


def A(c: str = "", calls: list[ToolCall] | tuple[ToolCall, ...] = ()) -> Message:
    return Message("assistant", c, tuple(calls))


def R(i: str, c: str) -> Message:
    return Message("user", c, (), i)


def TC(i: str, name: str = "bash", args: str = "{}") -> ToolCall:
    return ToolCall(i, name, args)


def L(n: int) -> str:
    return "a" * n
