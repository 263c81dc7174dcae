"""The ``train go1`` recipe: :func:`train_spec`, the training spec that
:class:`~scenefactory.go1.options.RecipeOptions` (the options beyond size and seed) make from the
default task, each option checked with a ``UserError`` that names its flag. The named recipes
(stages of these options) are in :mod:`scenefactory.go1.recipes`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from scenefactory.errors import UserError
from scenefactory.go1.config import CommandConfig, Go1TaskConfig, RewardTerm, TerrainConfig, nominal
from scenefactory.go1.options import RecipeOptions
from scenefactory.go1.rewards import OPTIONAL_FUNCTIONS, track_ang_vel_z_fine
from scenefactory.go1.terrain import column_kinds
from scenefactory.go1.train import Go1TrainSpec, go1_ppo_config
from scenefactory.go1.whole_body import whole_body_task

MAX_ACTION_STD = 2.0
"""Largest ``--action-std`` (PPO's initial noise is 1.0; the actions are clipped at ±6)."""

DISTILL_ACTION_STD = 0.2
"""Standard deviation of the student's sampled actions while it is distilled (DAgger rollouts)."""


def _reweighted(
    rewards: tuple[RewardTerm, ...], weights: tuple[tuple[str, float], ...]
) -> tuple[RewardTerm, ...]:
    """``rewards`` with the weights of ``weights`` replaced; a name of
    ``rewards.OPTIONAL_FUNCTIONS`` not in ``rewards`` is added with its weight."""
    names = [t.name for t in rewards]
    optional = {f.__name__: f for f in OPTIONAL_FUNCTIONS if f.__name__ not in names}
    new = dict(weights)
    for name in new:
        if name not in names and name not in optional:
            raise UserError(
                f"--reward-weight: unknown term '{name}', expected one of {', '.join(names)} "
                f"(or an optional term: {', '.join(sorted(optional))})"
            )
    added = tuple(RewardTerm(n, optional[n], w) for n, w in new.items() if n in optional)
    return tuple(replace(t, weight=new.get(t.name, t.weight)) for t in rewards) + added


def _limited(
    commands: CommandConfig,
    limits: tuple[float, float, float] | None,
    *,
    forward_only: bool = False,
    min_forward_mps: float | None = None,
) -> CommandConfig:
    """``commands`` with each range cut to ``±limit`` (vx, vy [m/s], yaw rate [rad/s]) and the
    forward speed's lower bound raised to ``min_forward_mps`` (0 with ``forward_only``)."""
    if limits is not None:
        if not all(x > 0 for x in limits):
            got = " ".join(f"{x:g}" for x in limits)
            raise UserError(f"--command-limits VX VY YAW must be positive, got {got}")
        vx, vy, yaw = limits

        def cut(pair: tuple[float, float], x: float) -> tuple[float, float]:
            return (max(pair[0], -x), min(pair[1], x))

        commands = replace(
            commands,
            vx_mps=cut(commands.vx_mps, vx),
            vy_mps=cut(commands.vy_mps, vy),
            yaw_radps=cut(commands.yaw_radps, yaw),
        )
    lo, hi = commands.vx_mps
    if min_forward_mps is not None and not min_forward_mps < hi:
        raise UserError(
            f"--min-forward-speed {min_forward_mps:g} must be below the forward-speed limit ({hi:g} m/s)"
        )
    floor = min_forward_mps if min_forward_mps is not None else 0.0 if forward_only else None
    if floor is not None:
        commands = replace(commands, vx_mps=(max(lo, floor), hi))
    return commands


BASE_RECIPE = RecipeOptions()
"""The base recipe: every option at its default."""


def train_spec(
    envs: int, iterations: int, seed: int, options: RecipeOptions = BASE_RECIPE, resuming: bool = False
) -> Go1TrainSpec:
    """The spec ``train go1`` runs: the default task (or its nominal twin for ``--no-robustness``)
    with the recipe options applied. ``init_from`` must be a file unless the run is ``resuming``
    (a resumed run does not read its start again: a stage resumed from a committed stage checkpoint
    names a start that lived in another session's run folder)."""
    base = Go1TaskConfig(num_envs=envs)
    if options.history is not None:
        base = replace(base, history=options.history)
    if options.whole_body:
        base = whole_body_task(base)
    if options.height_scan_actor and options.terrain == "flat":
        raise UserError("--height-scan-actor needs --terrain (rough or a tile kind): flat ground has no scan")
    try:
        ground = TerrainConfig(kind=options.terrain, height_scan_actor=options.height_scan_actor)
    except ValueError as exc:
        raise UserError(f"--terrain {options.terrain}: {exc}") from exc
    if options.terrain_spacing_m is not None:
        if options.terrain == "flat":
            raise UserError(
                "--terrain-spacing needs --terrain (rough or a tile kind): flat ground has no grid"
            )
        try:
            ground = replace(ground, horizontal_scale_m=options.terrain_spacing_m)
        except ValueError as exc:
            raise UserError(f"--terrain-spacing: {exc}") from exc
    if options.terrain_proportions is not None:
        if options.terrain != "rough":
            raise UserError(
                f"--terrain-proportions shares the columns of --terrain rough, not {options.terrain}"
            )
        try:
            ground = replace(ground, proportions=options.terrain_proportions)
        except ValueError as exc:
            raise UserError(f"--terrain-proportions: {exc}") from exc
        cols = column_kinds(ground)
        if lost := [k for k, w in ground.proportions if w > 0 and k not in cols]:
            raise UserError(
                f"--terrain-proportions: {', '.join(lost)} get no column of the {ground.num_cols} "
                f"(a share below 1/{ground.num_cols} of the total rounds to none)"
            )
    base = replace(base, terrain=ground)
    rewards = base.rewards
    if options.yaw_precision_weight:
        rewards += (RewardTerm("track_ang_vel_z_fine", track_ang_vel_z_fine, options.yaw_precision_weight),)
    lo, hi = options.joint_friction_scale
    if not 0 <= lo <= hi:
        raise UserError(f"--joint-friction-dr must be LOW HIGH with 0 <= LOW <= HIGH, got {lo} {hi}")
    assert base.randomization is not None
    rnd = replace(base.randomization, joint_friction_scale=(lo, hi))
    if options.latency_ms is not None:
        lat_lo, lat_hi = options.latency_ms
        if not 0 <= lat_lo <= lat_hi:
            raise UserError(f"--latency-ms must be LOW HIGH with 0 <= LOW <= HIGH, got {lat_lo} {lat_hi}")
        period_ms = 1000.0 / base.policy_hz
        if lat_hi > period_ms:
            raise UserError(
                f"--latency-ms: HIGH must be at most one policy period ({period_ms:g} ms; a longer "
                f"latency acts as {period_ms:g} ms), got {lat_hi:g}"
            )
        rnd = replace(rnd, latency_s=(lat_lo / 1000.0, lat_hi / 1000.0))
    task = replace(
        base,
        commands=_limited(
            replace(base.commands, pure_turn_prob=options.pure_turn_prob, heading_prob=options.heading_prob),
            options.command_limits,
            forward_only=options.forward_only,
            min_forward_mps=options.min_forward_mps,
        ),
        randomization=rnd,
        rewards=_reweighted(rewards, options.reward_weights),
    )
    if options.foot_clearance_target_m is not None:
        if "foot_clearance" not in {t.name for t in task.rewards}:
            raise UserError("--foot-clearance-target needs the term: add --reward-weight foot_clearance=W")
        try:
            task = replace(task, foot_clearance_target_m=options.foot_clearance_target_m)
        except ValueError as exc:
            raise UserError(f"--foot-clearance-target: {exc}") from exc
    init = None if options.init_from is None else str(options.init_from)
    if init is not None and not resuming and not Path(init).is_file():
        raise UserError(f"--init-from {init}: checkpoint not found")
    teacher = None if options.teacher is None else str(options.teacher)
    if teacher is not None and not Path(teacher).is_file():
        raise UserError(f"--teacher {teacher}: policy not found")
    if teacher is not None and init is not None:
        raise UserError("--teacher and --init-from exclude each other (a distilled student starts afresh)")
    if teacher is not None and options.critic_warmup:
        raise UserError("--critic-warmup is for PPO fine-tuning; distillation (--teacher) has no critic")
    if teacher is not None and options.privileged_actor:
        raise UserError("--privileged-actor trains a teacher; a student (--teacher) must be deployable")
    ppo = replace(go1_ppo_config(), actor_rnn_type=options.rnn, actor_rnn_hidden_dim=options.rnn_hidden)
    if options.entropy_coef is not None:
        if teacher is not None:
            raise UserError("--entropy-coef is a PPO setting; distillation (--teacher) has no entropy bonus")
        if not 0 <= options.entropy_coef <= 1:
            raise UserError(f"--entropy-coef must be in [0, 1], got {options.entropy_coef}")
        ppo = replace(ppo, entropy_coef=options.entropy_coef)
    if options.init_action_std is not None:
        if init is None:
            raise UserError("--action-std restarts a fine-tune's action noise: it needs --init-from")
        if not 0 < options.init_action_std <= MAX_ACTION_STD:
            raise UserError(f"--action-std must be in (0, {MAX_ACTION_STD:g}], got {options.init_action_std}")
    if options.privileged_actor:
        ppo = replace(ppo, actor_obs_groups=("policy", "params"))
    if teacher is not None:
        ppo = replace(ppo, init_noise_std=DISTILL_ACTION_STD)
    return Go1TrainSpec(
        task=task if options.robust else nominal(task),
        ppo=ppo,
        iterations=iterations,
        seed=seed,
        init_from=init,
        teacher=teacher,
        critic_warmup=options.critic_warmup,
        init_action_std=options.init_action_std,
    )
