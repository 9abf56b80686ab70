"""The cycle's reading of jobs: each managed binding read once (``reading``) into values
(``model``), by the SchedulingPolicy's mapping (``mapping`` over ``values``), kept between cycles
(``cache``), and recorded in the result (``records``).
"""
