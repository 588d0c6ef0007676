"""Browsing run directories: `reinagent runs` (a list), `reinagent show` (one task in the
terminal) and `reinagent view` (a local web viewer, in `reinagent.viewer`).

Everything here reads only run directories (spec.json, records.jsonl, run.lock), like the reports.
"""
