"""fleetgate's reconciler: watches the Karmada API and enforces the engine's decisions.

With ``webhook/``, the only package that imports ``kubernetes``. It imports the core
(``engine``); the core never imports it, and it never imports ``sandbox``
(tests/test_layering.py checks both).

- :mod:`reconciler.informer`: list+watch of one resource into a cache.
- :mod:`reconciler.informers`: the set of informers the reconciler needs, and the snapshot input.
"""
