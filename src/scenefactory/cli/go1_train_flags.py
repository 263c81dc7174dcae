"""``train go1``'s flags: the sizes, ``--recipe`` and ``--list-recipes``, and one flag per
:class:`~scenefactory.go1.options.RecipeOptions` field generated from the dataclass
(:func:`~scenefactory.cli.flags.add_flags`) with :data:`RECIPE_FLAGS`, the table of what the class
cannot say (help text, checked type, flag name). ``cli.go1`` maps them onto the job."""

from __future__ import annotations

import argparse
from pathlib import Path

from scenefactory.bounds import (
    MAX_ENVS,
    MAX_HIDDEN,
    MAX_HISTORY,
    MAX_ITERATIONS,
    MAX_LATENCY_MS,
    MAX_SCALE,
    MAX_WEIGHT,
    PROBABILITY,
    FloatRange,
    IntRange,
    positive,
)
from scenefactory.cli.flags import Flag, ListAction, add_flags
from scenefactory.go1.options import RecipeOptions
from scenefactory.go1.recipes import listing

ENVS = positive(MAX_ENVS)
SHARE = FloatRange(0.0, 100.0, what="a share")
LATENCY_MS = FloatRange(0.0, MAX_LATENCY_MS, what="a latency in ms")
SCALE = FloatRange(0.0, MAX_SCALE, what="a scale")
SPACING = FloatRange(0.0, 1.0, low_open=True, what="a height-field spacing in m")
WEIGHT = FloatRange(-MAX_WEIGHT, MAX_WEIGHT, what="a weight")
TILE_KINDS = ("random", "slope_up", "slope_down", "stairs_up", "stairs_down", "steps")
"""``go1.config.TERRAIN_KINDS``, spelled out so that ``--help`` loads no Go1 stack (a test checks
they agree)."""


def _term_weight(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected TERM=WEIGHT, e.g. action_rate=-0.03, got {text!r}")
    try:
        return name, WEIGHT(value)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"TERM=WEIGHT {name}: {exc}") from None


def _kind_share(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep or name not in TILE_KINDS:
        raise argparse.ArgumentTypeError(
            f"expected KIND=SHARE with KIND one of {', '.join(TILE_KINDS)}, e.g. stairs_up=0.4, got {text!r}"
        )
    try:
        return name, SHARE(value)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"KIND=SHARE {name}: {exc}") from None


RECIPE_FLAGS: dict[str, Flag] = {
    "robust": Flag(
        "train without domain randomization, pushes and sensor noise (the ablation)", name="--no-robustness"
    ),
    "pure_turn_prob": Flag(
        "share of commands that turn on the spot (default 0: uniform commands)", PROBABILITY
    ),
    "entropy_coef": Flag(
        "PPO's entropy bonus (default 0.01; 0 lets the action noise shrink, to polish a fine-tuned policy)",
        FloatRange(0.0, 1.0, what="an entropy coefficient"),
    ),
    "heading_prob": Flag(
        "share of commands that steer to a random heading, the yaw rate following the heading error "
        "(default 0: yaw-rate commands; Isaac Lab's rough terrain: 1)",
        FloatRange(0.0, 1.0, what="a share"),
    ),
    "command_limits": Flag(
        "narrow the command ranges to at most +-VX, +-VY m/s and +-YAW rad/s (default: vx -1..2, "
        "vy +-0.8, yaw +-1.8; Isaac Lab's rough terrain: 1 1 1)",
        FloatRange(0.0, 10.0, what="a command limit"),
        metavar=("VX", "VY", "YAW"),
    ),
    "init_action_std": Flag(
        "with --init-from: restart the action noise at this standard deviation (default: the "
        "checkpoint's; the entropy bonus lets it drift up, and noisy robots fail on terrain the mean "
        "action crosses)",
        FloatRange(0.0, 2.0, low_open=True, what="an action standard deviation"),
        name="--action-std",
        metavar="S",
    ),
    "forward_only": Flag(
        "forward-speed commands from 0 up (no walking backward): for a terrain policy judged walking "
        "forward, which then never trains climbing stairs backward"
    ),
    "min_forward_mps": Flag(
        "forward-speed commands from VX up (implies --forward-only): more training at the speeds a "
        "policy is judged at; standing commands are still drawn, and the command curriculum scales VX "
        "by its fraction until that reaches 1",
        FloatRange(0.0, 10.0, what="a forward speed in m/s"),
        name="--min-forward-speed",
        metavar="VX",
    ),
    "terrain_spacing_m": Flag(
        "sample spacing of the terrain's height field (default 0.1 m: a 10 cm riser is a 45 degree ramp "
        "one cell wide; 0.05 m makes it 72 degrees at about 1.4x the physics cost)",
        SPACING,
        name="--terrain-spacing",
        metavar="M",
    ),
    "foot_clearance_target_m": Flag(
        "swing height the foot_clearance term asks for, over the ground under each foot (default 0.08 "
        "m; needs --reward-weight foot_clearance=W)",
        FloatRange(0.0, 0.5, low_open=True, high_open=True, what="a swing height in m"),
        name="--foot-clearance-target",
        metavar="M",
    ),
    "yaw_precision_weight": Flag(
        "weight of the fine yaw-tracking kernel, sigma 0.01 (default 0: off)",
        FloatRange(0.0, MAX_WEIGHT, what="a weight"),
    ),
    "joint_friction_scale": Flag(
        "scale joint damping and dry friction by U(LOW, HIGH) per episode (default 1 1: off)",
        SCALE,
        name="--joint-friction-dr",
        metavar=("LOW", "HIGH"),
    ),
    "latency_ms": Flag(
        "action latency range drawn per episode (default 0 20)", LATENCY_MS, metavar=("LOW", "HIGH")
    ),
    "reward_weights": Flag(
        "replace a reward term's weight (repeatable), e.g. action_rate=-0.03; an optional term "
        "(foot_clearance, leg_contacts) is added with its weight",
        _term_weight,
        name="--reward-weight",
        metavar="TERM=W",
        repeat=True,
    ),
    "history": Flag(
        "frames stacked in the actor's observation (default 3; the exported policy follows; with "
        "--init-from, frames beyond the checkpoint's start at zero weight)",
        positive(MAX_HISTORY),
    ),
    "init_from": Flag(
        "fine-tune: start from this Go1 training checkpoint (or a distilled student); on the same "
        "terrain tiles its robots' terrain levels are kept"
    ),
    "rnn": Flag(
        "a recurrent actor: this layer before the actor MLP (default: feed-forward)", choices=("gru", "lstm")
    ),
    "rnn_hidden": Flag("hidden width of --rnn (default 64)", positive(MAX_HIDDEN)),
    "critic_warmup": Flag(
        "first N PPO iterations train only the critic (use when --init-from gives a distilled actor and "
        "no critic)",
        IntRange(0, MAX_ITERATIONS),
    ),
    "privileged_actor": Flag(
        "the actor also reads the randomized parameters: a teacher for --teacher, not deployable (with "
        "--init-from a deployable policy, the new inputs start at zero weight)"
    ),
    "teacher": Flag(
        "distil the actor from this Go1 policy (DAgger: the student acts, the teacher labels) instead of "
        "PPO; fine-tune the result with --init-from"
    ),
    "whole_body": Flag(
        "also command trunk height 0.20-0.34 m, pitch +-0.3 rad and roll +-0.2 rad (with --init-from a "
        "velocity-only policy, the new inputs start at zero weight)"
    ),
    "terrain": Flag(
        "ground: flat (default), rough (a grid of every tile kind with a level curriculum) or one tile "
        "kind; the critic reads a height scan (--init-from a flat policy needs --critic-warmup N)",
        choices=("flat", "rough", *TILE_KINDS),
    ),
    "terrain_proportions": Flag(
        "with --terrain rough: the tile kinds' shares of the grid's columns (normalized; default "
        "random=0.2 slope_up=0.1 slope_down=0.1 stairs_up=0.2 stairs_down=0.2 steps=0.2)",
        _kind_share,
        metavar="KIND=SHARE",
    ),
    "height_scan_actor": Flag(
        "the actor reads the height scan too (with --init-from a blind policy, at zero weight)"
    ),
}
"""``train go1``'s flag of each :class:`~scenefactory.go1.options.RecipeOptions` field: help
text, checked type, name where it differs from the field's; :func:`~scenefactory.cli.flags.add_flags`
derives the rest (switch, number of values, repetition) from the field's type hint."""

RECIPE_HELP = (
    "a named recipe (velocity, whole-body, rough, rough-scan; --list-recipes): its stages in "
    "OUT/<k>-<stage>, the flags given beside it replacing those fields in every stage"
)


def add_train_flags(t: argparse.ArgumentParser) -> None:
    """``train go1``'s size flags, ``--recipe`` and the generated :data:`RECIPE_FLAGS`."""
    t.add_argument(
        "--envs", type=ENVS, default=argparse.SUPPRESS, help="robots simulated in parallel (default 1024)"
    )
    t.add_argument(
        "--iterations",
        type=positive(MAX_ITERATIONS),
        default=argparse.SUPPRESS,
        help="PPO iterations (default 1500; with --recipe: every stage's, default each stage's own)",
    )
    t.add_argument("--recipe", default=None, metavar="NAME", help=RECIPE_HELP)
    t.add_argument(
        "--from-stage",
        default=None,
        metavar="STAGE",
        help="with --recipe: start at this stage, from --init-from CKPT instead of the stage before "
        "(e.g. --recipe whole-body --from-stage whole-body --init-from go1_robust.pt)",
    )
    t.add_argument(
        "--stage-checkpoint",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --recipe and --from-stage, in place of --init-from: resume that stage from a committed "
        "stage checkpoint (stages/README.md lists them and their commands)",
    )
    t.add_argument("--list-recipes", action=ListAction, listing=listing, help="list the recipes and exit")
    add_flags(t, RecipeOptions, RECIPE_FLAGS)
