"""The public Python API: build the batched driving and Go1 environments and step them.

Everything a user needs to build and step an environment is importable from here (``__all__``);
the Gymnasium and PettingZoo views need the ``adapters`` extra and are imported from their modules:
:class:`scenefactory.api.gym_vector.DrivingVectorEnv`, :class:`scenefactory.api.gym_vector.Go1VectorEnv`
and :class:`scenefactory.api.parallel_env.DrivingParallelEnv`. The docs page "Your own training
loop" (``docs/tutorials/python-api.md``) has a runnable example.
"""

from scenefactory.api.envs import (
    DEFAULT_ENGINE,
    DEFAULT_NUM_SCENES,
    driving_scenes,
    make_driving_env,
    make_go1_env,
)
from scenefactory.engines.base import Engine
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.go1.config import Go1TaskConfig, nominal
from scenefactory.go1.env import Go1Env, LocoStep
from scenefactory.scenes.library import load_scene_dir, procedural_scenes
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig, ObservationConfig, with_traffic_signals
from scenefactory.tasks.driving.env import DrivingEnv, FinishedEpisodes, StepResult
from scenefactory.tasks.driving.metrics import EpisodeLog, summarize
from scenefactory.tasks.driving.status import AgentStatus

__all__ = [
    "DEFAULT_ENGINE",
    "DEFAULT_NUM_SCENES",
    "AgentStatus",
    "DrivingEnv",
    "DrivingTaskConfig",
    "Engine",
    "EngineSpec",
    "EpisodeLog",
    "FinishedEpisodes",
    "Go1Env",
    "Go1TaskConfig",
    "LocoStep",
    "ObservationConfig",
    "Scene",
    "StepResult",
    "UserError",
    "driving_scenes",
    "load_scene_dir",
    "make_driving_env",
    "make_go1_env",
    "nominal",
    "procedural_scenes",
    "summarize",
    "with_traffic_signals",
]
