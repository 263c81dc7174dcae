"""Reinforcement learning: rsl-rl behind one module, and one on-policy training loop for every task.

- :mod:`~scenefactory.rl.ppo`: the only module that imports rsl-rl (PPO config, actor, PPO and
  Distillation construction, their saved state).
- :mod:`~scenefactory.rl.runner`: the training loop (:class:`OnPolicyRunner`) and the hooks where
  tasks differ; :mod:`~scenefactory.rl.checkpoints` and :mod:`~scenefactory.rl.seeding`: resume
  checks and generator states. These read no scene, car or task (the Go1 task builds on them).
- :mod:`~scenefactory.rl.driving` and :mod:`~scenefactory.rl.driving_spec`: the driving task's
  VecEnv, hooks, ``Trainer``, ``TrainSpec`` and policy loading.
"""
