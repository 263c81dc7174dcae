"""What a recorded step knew of each controlled agent besides its pose: its smallest TTC and largest
DRAC against every object at that step, its reward and reward terms (for the HTML replay's agent
panel, :mod:`scenefactory.evaluation.html_replay`).

TTC and DRAC are computed as the environment computes them (``agent_ttc_drac``: each controlled
agent against the controlled agents and the scene's logged objects at the step), from the step's public
:class:`~scenefactory.tasks.driving.env.StepResult` and the scenes' replay logs, so the recording
does not depend on how the environment packs its logged objects.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.env import StepResult
from scenefactory.tasks.driving.pairs import agent_ttc_drac


class LoggedObjects:
    """The scenes' replayed objects padded to ``(W, N, T, ...)`` tensors (one scene per world)."""

    def __init__(self, scenes: Sequence[Scene], device: torch.device) -> None:
        """Pad every scene's :class:`~scenefactory.scenes.scene.ReplayLog` (``N`` the most objects)."""
        logs = [sc.replay for sc in scenes]
        n = max([lg.num_objects for lg in logs if lg is not None] + [0])
        t = max([lg.valid.shape[1] for lg in logs if lg is not None and lg.num_objects] + [1])
        w = len(scenes)
        xy, yaw, vel = np.zeros((w, n, t, 2)), np.zeros((w, n, t)), np.zeros((w, n, t, 2))
        valid = np.zeros((w, n, t), dtype=bool)
        length, width = np.zeros((w, n)), np.zeros((w, n))
        for i, lg in enumerate(logs):
            if lg is None or not lg.num_objects:
                continue
            m, tl = lg.valid.shape
            xy[i, :m, :tl], yaw[i, :m, :tl], vel[i, :m, :tl] = lg.xy, lg.yaw, lg.vel_xy
            valid[i, :m, :tl] = lg.valid
            length[i, :m], width[i, :m] = lg.length_m, lg.width_m

        def tensor(a: np.ndarray) -> torch.Tensor:
            dtype = torch.bool if a.dtype == bool else torch.float32
            return torch.as_tensor(a, dtype=dtype, device=device)

        self.num_objects = n
        self.num_steps = t
        self.xy, self.yaw, self.vel, self.valid = tensor(xy), tensor(yaw), tensor(vel), tensor(valid)
        self.length, self.width = tensor(length), tensor(width)

    def at(self, steps: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(pos_xy, yaw, vel_xy, length, width, valid)`` (W, N, ...) at each world's step ``steps`` (W,)."""
        t = steps.clamp(0, self.num_steps - 1)
        w = torch.arange(len(t), device=t.device)
        inside = (steps < self.num_steps).unsqueeze(-1)
        return (
            self.xy[w, :, t],
            self.yaw[w, :, t],
            self.vel[w, :, t],
            self.length,
            self.width,
            self.valid[w, :, t] & inside,
        )


def step_extras(
    res: StepResult,
    length: torch.Tensor,
    width: torch.Tensor,
    logged: LoggedObjects,
    steps: torch.Tensor,
    horizon_s: float,
) -> dict[str, np.ndarray]:
    """One step's ``ttc_s``, ``drac_mps2``, ``reward`` and ``term:NAME`` arrays (W, K), NaN for agents
    that were not active during the step.

    Args:
        res: the step's result (its ``state`` is the one right after the dynamics).
        length: (W, K) the controlled agents' lengths [m]; ``width`` likewise.
        width: (W, K) [m].
        logged: the worlds' logged objects.
        steps: (W,) the step index each world's logged objects are at (the episode step just taken).
        horizon_s: the TTC horizon [s] (the task's ``observations.ttc_horizon_s``).
    """
    st, active = res.state, res.was_active
    k = active.shape[1]
    own = (st.pos_xy, st.yaw, st.vel_xy, length, width, active)
    if logged.num_objects:
        rep = logged.at(steps)
        objs = [torch.cat((a.to(b.dtype), b), dim=1) for a, b in zip(own, rep, strict=True)]
    else:
        objs = list(own)
    ttc, drac = agent_ttc_drac(objs[0], objs[1], objs[2], objs[3], objs[4], objs[5], k, horizon_s)
    out = {
        "ttc_s": ttc.amin(-1),
        "drac_mps2": drac.amax(-1),
        "reward": res.reward,
        **{f"term:{name}": v for name, v in res.reward_terms.items()},
    }
    nan = torch.tensor(float("nan"), device=active.device)
    return {name: torch.where(active, v.float(), nan).detach().cpu().numpy() for name, v in out.items()}
