"""Acceptance burn-in: plan the rounds of tests that exercise every cable of the compute fabric, render the jobs
that run them, read their results and name the suspect cables. Reads only the plan."""
