"""scenefactory: batched driving simulation for RL and cross-simulator transfer."""

__version__ = "0.1.0"
