"""Step 4 of the cycle: which job is considered next (queue tiers, weighted fair share, FIFO)."""
