"""Step 3c of the cycle: co-admission groups. Their members and units (``formation``), placed
(``place``) and preempting (``preempt``) as a whole.
"""
