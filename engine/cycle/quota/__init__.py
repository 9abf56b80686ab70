"""Step 5 of the cycle: hierarchical quota with borrowing and lending."""
