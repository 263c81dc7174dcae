"""Dynamics grounding: transition datasets, learned dynamics, grounded engines."""
