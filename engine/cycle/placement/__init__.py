"""Step 6 of the cycle: where a job can run. The placer (``placer``) over each cluster's room
(``capacity``: totals, node shapes in ``nodes``, ``nodebounds``, ``beyond``, ``answers``; the
estimators' answers in ``estimates``), scores (``scoring``, ``values``), the division of a
splittable job (``division``) and what is kept per policy version (``memo``).
"""
