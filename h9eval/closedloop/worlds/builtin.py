"""Imports every built-in world module so that each registers itself."""

from h9eval.closedloop.worlds import fact_chain, mini_repo, ticket_queue  # noqa: F401
