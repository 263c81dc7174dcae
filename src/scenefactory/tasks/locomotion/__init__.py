"""Velocity tracking for a Go1-class quadruped (``robots.go1``) on the batched MuJoCo stepper."""
