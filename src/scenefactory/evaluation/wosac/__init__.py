"""WOSAC, the Waymo Open Sim Agents Challenge realism metrics (2025 config), in batched torch.

``config`` (the challenge's constants), ``scenario`` (what is read from a WOMD ``Scenario``),
``geometry`` and ``features`` (the ten metric features), ``estimators`` and ``metrics`` (likelihoods,
buckets, meta-metric), ``rollouts`` (sim-agent policies) and ``benchmark`` (``scenefactory benchmark
wosac``). Each module names the file of waymo-open-dataset 1.6.7 it follows;
``benchmarks/wosac_official.py`` scores the same rollouts with the official code.
"""
