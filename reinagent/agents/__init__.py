"""Agents: one file per agent type."""
