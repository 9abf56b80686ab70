"""Benchmark inputs: seeded synthetic fleets for ``fleetgate bench``."""
