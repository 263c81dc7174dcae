"""Per-episode domain randomization of the quadruped worlds (ranges in ``config``).

:class:`Randomizer` holds the parameters drawn for every world and writes the model-side ones
(floor friction, link and trunk masses, trunk centre of mass, joint damping and dry friction)
into the batch's per-world model
fields; the actuator-side ones (motor strength, PD gain scales, action latency) are read by the
task's PD loop. ``None`` config = the nominal robot in every world.
"""

from __future__ import annotations

import numpy as np

from scenefactory.engines.mjbatch import BatchedSim
from scenefactory.engines.mjwarp import WarpSim
from scenefactory.go1.config import RandomizationConfig
from scenefactory.go1.robot import NUM_JOINTS, Go1Index


class Randomizer:
    """Draws and applies per-world physical parameters; arrays are (N, ...) numpy."""

    def __init__(
        self, sim: BatchedSim | WarpSim, index: Go1Index, cfg: RandomizationConfig | None, physics_hz: float
    ) -> None:
        """Start every world at the nominal parameters."""
        n = sim.num_worlds
        self.sim, self.index, self.cfg, self.physics_hz = sim, index, cfg, physics_hz
        self.friction = np.ones(n)
        self.link_mass_scale = np.ones((n, NUM_JOINTS))
        self.trunk_added_mass_kg = np.zeros(n)
        self.trunk_com_offset_m = np.zeros((n, 3))
        self.motor_strength = np.ones((n, NUM_JOINTS))
        self.kp_scale = np.ones(n)
        self.kd_scale = np.ones(n)
        self.latency_steps = np.zeros(n, dtype=np.int64)
        self.joint_friction_scale = np.ones(n)
        m = sim.model
        self._mass0 = m.body_mass.copy()
        self._ipos0 = m.body_ipos.copy()
        self._damping0 = m.dof_damping.copy()
        self._frictionloss0 = m.dof_frictionloss.copy()
        self.friction[:] = m.geom_friction[index.floor_geom, 0]
        if cfg is not None:
            self._geom_friction = sim.expand("geom_friction")
            self._body_mass = sim.expand("body_mass")
            self._body_ipos = sim.expand("body_ipos")
            if cfg.joint_friction_scale != (1.0, 1.0):
                self._dof_damping = sim.expand("dof_damping")
                self._dof_frictionloss = sim.expand("dof_frictionloss")

    def sample(self, ids: np.ndarray, rng: np.random.Generator) -> None:
        """Draw new parameters for worlds ``ids`` and write them into the simulation."""
        c = self.cfg
        if c is None or ids.size == 0:
            return
        n = ids.size
        self.friction[ids] = rng.uniform(*c.floor_friction, n)
        self.link_mass_scale[ids] = rng.uniform(*c.link_mass_scale, (n, NUM_JOINTS))
        self.trunk_added_mass_kg[ids] = rng.uniform(*c.trunk_added_mass_kg, n)
        self.trunk_com_offset_m[ids] = rng.uniform(-c.trunk_com_offset_m, c.trunk_com_offset_m, (n, 3))
        self.motor_strength[ids] = rng.uniform(*c.motor_strength, (n, NUM_JOINTS))
        self.kp_scale[ids] = rng.uniform(*c.pd_gain_scale, n)
        self.kd_scale[ids] = rng.uniform(*c.pd_gain_scale, n)
        lat = rng.uniform(*c.latency_s, n)
        self.latency_steps[ids] = np.floor(lat * self.physics_hz + 0.5).astype(np.int64)
        ix = self.index
        self._geom_friction[ids, ix.floor_geom, 0] = self.friction[ids]
        rows = ids[:, None]
        self._body_mass[rows, ix.link_bodies] = self._mass0[ix.link_bodies] * self.link_mass_scale[ids]
        self._body_mass[ids, ix.trunk_body] = self._mass0[ix.trunk_body] + self.trunk_added_mass_kg[ids]
        self._body_ipos[ids, ix.trunk_body] = self._ipos0[ix.trunk_body] + self.trunk_com_offset_m[ids]
        if c.joint_friction_scale != (1.0, 1.0):  # no draw otherwise: older runs reproduce
            self.joint_friction_scale[ids] = rng.uniform(*c.joint_friction_scale, n)
            dofs, scale = ix.joint_qvel, self.joint_friction_scale[ids][:, None]
            self._dof_damping[rows, dofs] = self._damping0[dofs] * scale
            self._dof_frictionloss[rows, dofs] = self._frictionloss0[dofs] * scale
        self.sim.set_const(ids)

    def privileged(self, joint_scale: bool | None = None) -> np.ndarray:
        """(N, 20) drawn parameters for the critic: μ, Δm, ΔCoM (3), strength (12), Kp, Kd, latency
        [s]; (N, 21) with the joint damping/friction scale last when that is randomized (only then,
        so that runs without it keep their critic's width and reproduce) or ``joint_scale`` asks."""
        parts = [
            self.friction[:, None],
            self.trunk_added_mass_kg[:, None],
            self.trunk_com_offset_m,
            self.motor_strength,
            self.kp_scale[:, None],
            self.kd_scale[:, None],
            self.latency_steps[:, None] / self.physics_hz,
        ]
        if joint_scale is None:
            joint_scale = self.cfg is not None and self.cfg.joint_friction_scale != (1.0, 1.0)
        if joint_scale:
            parts.append(self.joint_friction_scale[:, None])
        return np.concatenate(parts, axis=1)
