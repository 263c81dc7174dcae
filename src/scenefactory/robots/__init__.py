"""Robot model builders and their constants (legged robots; cars live in ``vehicles``)."""
