"""What the driving commands do, as functions of typed arguments (the CLI parses, a job runs)."""
