"""Browsing run directories: `reinagent runs` (a list), `reinagent show` (one task in the
terminal) and `reinagent view` (a local web viewer, in `reinagent.viewer`).

    cli.py        the verbs
    listing.py    finding runs under a folder, one row each (what ran, how far it got)
    show.py       one task's trajectories and reflections for a terminal

Everything here reads only run directories (spec.json, records.jsonl, run.lock), like the reports.
"""
