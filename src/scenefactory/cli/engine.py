"""The engine flags of every command that builds a driving environment (``--engine``,
``--physics-hz``, ``--dynamics-model``, ``--grounding``, ``--action-lag-steps``, ``--device``) and
the one place that turns them into an :class:`~scenefactory.engines.spec.EngineSpec` and a device,
checked before any work."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from scenefactory.bounds import LAG_STEPS, PHYSICS_HZ, policy_steps
from scenefactory.cli.argtypes import check_input
from scenefactory.dynamics.artifact import load_grounding
from scenefactory.dynamics.model_file import load_dynamics_model
from scenefactory.engines.mjwarp import check_device
from scenefactory.engines.spec import DEFAULT_PHYSICS_HZ, TIERS, EngineSpec

ENGINE_HELP = (
    "engine: kinematic (bicycle), mujoco (articulated cars, MuJoCo C), mujoco-warp (the same cars on "
    "MuJoCo Warp: GPU with --device cuda), learned (--dynamics-model) or grounded (--grounding)"
)
LAG_HELP = "actuator lag: apply each action this many policy steps late (any engine)"
PHYSICS_HELP = "mujoco and mujoco-warp physics rate [Hz]: a multiple of the policy rate, 100 to 1000"
DEVICE_HELP = (
    "where the environment, the engine and the policy run: cpu (default) or cuda[:N]; every engine "
    "but mujoco runs there (MuJoCo C steps on CPU threads and hands its state over)"
)


def engine_tier(text: str) -> str:
    """Argument type of ``--engine``: one of the tiers (:data:`~scenefactory.engines.spec.TIERS`)."""
    if text not in TIERS:
        raise argparse.ArgumentTypeError(f"unknown engine '{text}', expected one of {sorted(TIERS)}")
    return text


def add_engine_flags(parser: Any, default: str) -> None:
    """Add the six engine flags to ``parser``, ``--engine`` defaulting to the tier ``default``."""
    parser.add_argument("--engine", type=engine_tier, default=default, help=ENGINE_HELP)
    parser.add_argument("--physics-hz", type=PHYSICS_HZ, default=DEFAULT_PHYSICS_HZ, help=PHYSICS_HELP)
    parser.add_argument(
        "--dynamics-model", default=None, help="model.pt of 'fit-dynamics' for --engine learned"
    )
    parser.add_argument(
        "--grounding", default=None, help="folder of 'scenefactory ground' for --engine grounded"
    )
    parser.add_argument("--action-lag-steps", type=LAG_STEPS, default=0, help=LAG_HELP)
    parser.add_argument("--device", default="cpu", help=DEVICE_HELP)


def engine_spec(args: argparse.Namespace, policy_hz: float, policy: str) -> EngineSpec:
    """The command line's :class:`~scenefactory.engines.spec.EngineSpec`, checked before any scene is
    built: the tier's settings (the spec's own checks: ``--engine learned`` needs
    ``--dynamics-model``, ``--grounding`` only with ``--engine grounded``, ...), the file or folder
    the tier reads (it exists and loads safely: a foreign, unsafe or damaged one is refused here),
    and the physics rate, a whole multiple of the policy rate ``policy_hz`` (``policy`` names that
    rate in the error). Raises :class:`~scenefactory.errors.UserError` naming the flags."""
    spec = EngineSpec(
        tier=args.engine,
        physics_hz=args.physics_hz,
        dynamics_model=args.dynamics_model,
        grounding=args.grounding,
        action_lag_steps=args.action_lag_steps,
    )
    if spec.dynamics_model is not None:
        what = "a model.pt written by 'scenefactory fit-dynamics'"
        check_input(Path(spec.dynamics_model), "--dynamics-model", False, what)
        load_dynamics_model(Path(spec.dynamics_model))
    if spec.grounding is not None:
        check_input(Path(spec.grounding), "--grounding", True, "a folder written by 'scenefactory ground'")
        load_grounding(Path(spec.grounding))
    policy_steps(spec.physics_hz, policy_hz, policy)
    return spec


def engine_device(args: argparse.Namespace) -> str:
    """``--device`` checked (:func:`~scenefactory.engines.mjwarp.check_device`): ``cpu``, or a CUDA
    device that torch and Warp both see (``cuda`` becomes ``cuda:0``); a
    :class:`~scenefactory.errors.UserError` naming the flag otherwise."""
    return str(check_device(args.device))
