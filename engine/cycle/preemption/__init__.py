"""Step 7 of the cycle: victims for a job that quota or capacity keeps out. The search
(``search``) over the admitted jobs that may be taken (``victims``, ``protection``), its bounds
(``bounds``) and the cluster it takes them on (``ranking``).
"""
