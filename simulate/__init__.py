"""fleetgate simulate: a discrete-event replay of a job trace through the real scheduling cycle.

Imports the core (``engine``), never imported by it. See docs/simulator.md.
"""
