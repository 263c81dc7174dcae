"""The options of a Go1 training run beyond size and seed (:class:`RecipeOptions`), in a module of
their own that loads no Go1 stack: the CLI generates ``train go1``'s flags from its fields
(``cli.go1``) and the named recipes (``go1.recipes``) are values of it, both without MuJoCo or
rsl-rl; :func:`scenefactory.go1.recipe.train_spec` turns them into a training spec."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RecipeOptions:
    """The ``train go1`` options beyond size and seed (defaults: the base recipe).

    ``pure_turn_prob``: share of commands that turn on the spot; ``yaw_precision_weight``: weight of
    the fine yaw-tracking kernel (``rewards.track_ang_vel_z_fine``; 0 = not in the reward);
    ``joint_friction_scale``: range of the per-episode scale of joint damping and dry friction
    (randomized robots only); ``latency_ms``: the action-latency range (randomized robots; ``None``
    = the config's 0–20 ms); ``reward_weights``: (term name, weight) pairs replacing the default
    weights; ``history``: frames stacked in the actor's observation (``None`` = the config's 3);
    ``init_from``: a checkpoint to fine-tune (see :class:`Go1TrainSpec`); ``rnn`` / ``rnn_hidden``:
    a recurrent actor (``"gru"`` or ``"lstm"``, hidden width); ``teacher``: distil the actor from
    this policy instead of PPO (exploration noise :data:`DISTILL_ACTION_STD`); ``critic_warmup``:
    PPO iterations with the actor frozen at the start (see :class:`Go1TrainSpec`);
    ``privileged_actor``: the actor also reads the randomized parameters (a teacher to distil);
    ``whole_body``: trunk height, pitch and roll commands too (``go1.whole_body``; with ``init_from``
    a velocity-only policy, the new inputs start at zero weight, ``go1.widen``); ``terrain``: the
    ground (``"flat"``, ``"rough"`` or one tile kind, ``config.TerrainConfig``, with its curriculum
    and the critic's height scan); ``height_scan_actor``: the actor reads the height scan too;
    ``command_limits``: narrow the command ranges to at most ±vx, ±vy [m/s] and ±yaw rate [rad/s]
    (``None``: the config's ranges); ``foot_clearance_target_m``: the swing height the optional
    ``foot_clearance`` term asks for (``None``: the config's 8 cm); ``heading_prob``: share of
    command draws that steer to a random heading (``config.CommandConfig``; Isaac Lab's rough
    terrain: 1); ``terrain_proportions``: (kind, share) pairs for ``terrain="rough"``'s columns
    (``None``: the config's); ``entropy_coef``: PPO's entropy bonus (``None``: the recipe's 0.01;
    0 lets the action noise shrink, a polishing stage for a policy judged by its mean action);
    ``forward_only``: forward-speed commands never go below 0 (no walking backward; a terrain policy
    judged walking forward up and down the tiles spends no episodes climbing stairs backward);
    ``min_forward_mps``: the forward-speed range's lower bound (implies ``forward_only``; more of
    the training at the speeds a policy is judged at, the rest of the range untrained; the command
    curriculum scales both bounds by its fraction, so a fresh run starts below it, a fine-tune
    whose fraction is already 1 does not);
    ``terrain_spacing_m``: the height field's sample spacing (``None``: the config's 0.1 m, where a
    riser is a 45° ramp at 10 cm; 0.05 m makes it 72°, nearer a real stair, ``go1.terrain``);
    ``init_action_std``: with ``init_from``, the action noise restarts at this standard deviation
    (``Go1TrainSpec.init_action_std``)."""

    robust: bool = True
    pure_turn_prob: float = 0.0
    yaw_precision_weight: float = 0.0
    joint_friction_scale: tuple[float, float] = (1.0, 1.0)
    latency_ms: tuple[float, float] | None = None
    reward_weights: tuple[tuple[str, float], ...] = ()
    history: int | None = None
    init_from: Path | None = None
    rnn: str | None = None
    rnn_hidden: int = 64
    teacher: Path | None = None
    critic_warmup: int = 0
    privileged_actor: bool = False
    whole_body: bool = False
    terrain: str = "flat"
    height_scan_actor: bool = False
    command_limits: tuple[float, float, float] | None = None
    foot_clearance_target_m: float | None = None
    heading_prob: float = 0.0
    terrain_proportions: tuple[tuple[str, float], ...] | None = None
    entropy_coef: float | None = None
    forward_only: bool = False
    min_forward_mps: float | None = None
    terrain_spacing_m: float | None = None
    init_action_std: float | None = None
