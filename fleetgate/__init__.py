"""The ``fleetgate`` command: the top floor, outside the core.

It parses arguments, wires the core (``engine``) to the edges that serve it (``webhook``, and
the sandbox, the reconciler and the simulator through the entry-point group
``fleetgate.commands``) and prints what they answer. Nothing in the distribution imports it;
``engine`` imports none of the edges nor this package (tests/test_layering.py).
"""
