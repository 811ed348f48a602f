"""The contract between the planner and everything after it.

`model` (the typed plan), `io` (plan.json written and read through the strict reader), `schema` (its published
JSON Schema), `outdir` (the generated folder's layout and its plan.json), and the views of the plan that renderers
and day-2 tools share: `tables` (devices, ports, addresses, cables as rows) and `switch_model` (the OS-neutral
per-switch configuration every switch OS renders). Nothing here imports the planner.
"""
