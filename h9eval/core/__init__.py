"""The bottom layer: errors, messages, token estimates and counters, paths and atomic writes,
provenance, the one Anthropic SDK wrapper and the one registry type. Imports nothing of h9eval
above it."""
