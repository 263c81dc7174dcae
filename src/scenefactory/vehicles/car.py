"""A parameterized articulated passenger car in MJCF, the world of K cars on a road, and their index.

One car (:func:`car_mjcf`) is 5 bodies and 16 degrees of freedom:

- ``{p}chassis``: the sprung mass on a free joint ``{p}free``; its body frame origin is the centre of
  mass (x forward, y left, z up), so the free joint's position is the CoM the engine reports. One box
  geom ``{p}body`` (length × width × height, lifted by the ground clearance) is what collides with
  other cars and, if a car rolls over, with the road.
- ``{p}wheel_{fl,fr,rl,rr}``: one body per wheel at (±a, ±track/2, radius − CoM height) from the CoM,
  with, in this order, a suspension slide joint ``{p}susp_*`` along the chassis z (spring with
  ``stiffness``/``springref`` preloaded so that the static ride height is at q = 0, ``damping``,
  ``range`` ± travel), on the front wheels a steering hinge ``{p}steer_*`` about z driven by a
  ``position`` servo ``{p}steer_servo_*`` (ctrl = road-wheel angle [rad], positive = left), and a
  spin hinge ``{p}spin_*`` about the (steered) wheel axis y, whose driven wheels carry a drive motor
  ``{p}drive_*`` (ctrl = commanded wheel torque [N·m], positive drives forward; see below).

Drive. Each driven wheel has an electric-motor torque–speed line, torque = ctrl · (1 − ω/ω₀),
clamped to ± :attr:`CarParams.max_drive_torque_nm`, with ω₀ the spin rate at
:attr:`CarParams.drive_free_speed_mps` (an ``affine``-gain ``general`` actuator, which MuJoCo's
``implicitfast`` integrator treats implicitly). ctrl is the torque at standstill; at wheel speed ω
the engine gets the torque T by writing ctrl = T / (1 − ω/ω₀). The falling line gives the car a
realistic power limit (peak T_max·ω₀/4 per wheel, 2 × 68 kW with the defaults) and, more
important, caps the spin of an unloaded driven wheel at ω₀: with a constant-torque ``motor`` a
wheel lifted in a crash spun up to 5000 rad/s at full throttle and threw cars metres into the air
when it touched down again.

Tyre–road contact. Each wheel is a sphere of the wheel radius: sphere–plane contact is one point
under the wheel centre, smooth, cheap and robust at any speed and any camber, while cylinder–plane
contact is a multi-point rim contact (more constraint rows per wheel, and rim edges that catch). The
contact point lies on the steering axis (zero scrub radius), so with ``condim`` 3 (sliding friction
only, no torsional or rolling friction) the steering servo only moves wheel inertia, and the tyre's
grip is MuJoCo's Coulomb friction: the wheel rolls without slipping until the friction cone
saturates, then slides at μ·N. The road geom has ``priority`` 1 above every car geom, so the
*road's* friction, condim, solref and solimp govern every contact with it (MuJoCo uses the
higher-priority geom's values instead of the element-wise max; checked on this build for friction,
condim, solref and solimp): ``geom_friction[ground]`` (per world through
``Batch.expand('geom_friction')``) is the tyre–road μ. The world uses an ``elliptic`` friction cone,
so the grip limit does not depend on the heading: MuJoCo's default pyramidal cone is √2 weaker along
its diagonals, measured as a 41 % longer locked-wheel stop at a 45° heading. It costs ≈ 25 % more
solver time.

Brakes. A disc brake is dry friction on the wheel spin joint: the world writes it as the spin dofs'
``frictionloss`` (0 in the model), which MuJoCo's solver enforces as a Coulomb constraint, so the
engine sets ``dof_frictionloss[spin dofs]`` = brake torque [N·m] (per world through
``Batch.expand('dof_frictionloss')``). Unlike a motor torque of sign −sign(ω), it holds a stopped
wheel exactly, never chatters, and acts inside every physics substep without Python in the loop.
:attr:`CarParams.max_brake_torque_nm` locks the wheels on any road (lock needs μ·F_z·r ≈ 2.2 kN·m on
the front wheels of a car braking at μ = 1.17, with load transfer), so full braking slides the tyres
and stops in v²/(2μg).

Contact filtering (``contype``/``conaffinity`` bits): road = 1, wheel = 2, body = 4. Wheels touch only
the road; bodies touch the road and each other; nothing touches a wheel but the road. A ``touch``
sensor ``{p}touch`` on a site ``{p}touch`` enclosing the body box (with room for soft-contact
overlap) reads the total normal force [N] on the body: > 0 means the car hit another car or put
its body on the road (wheel contacts belong to the wheel bodies and do not count).

Sources: Rajamani, *Vehicle Dynamics and Control* (2nd ed.), ch. 2 and 9 (load transfer, tyre
force limit F ≤ μ·F_z); MuJoCo documentation, MJCF reference (geom priority, condim, frictionloss,
joint springref, position actuator kv).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields

import mujoco
import numpy as np
import numpy.typing as npt

GRAVITY_MPS2 = 9.81
"""Gravitational acceleration of the world [m/s²]."""

WHEELS = ("fl", "fr", "rl", "rr")
"""Wheel order used by every per-wheel array: front-left, front-right, rear-left, rear-right."""

STEERED_WHEELS = ("fl", "fr")
"""The steered wheels, in the order of the steering columns of :class:`CarIndex`."""

GROUND_GEOM = "ground"
"""Name of the road plane geom."""

CONTYPE_ROAD = 1
CONTYPE_WHEEL = 2
CONTYPE_BODY = 4


class DriveLayout(enum.Enum):
    """Which wheels the drive motors turn."""

    FRONT = "front"
    REAR = "rear"
    ALL = "all"

    @property
    def driven_wheels(self) -> tuple[str, ...]:
        """The driven wheels, in :data:`WHEELS` order."""
        return {
            DriveLayout.FRONT: ("fl", "fr"),
            DriveLayout.REAR: ("rl", "rr"),
            DriveLayout.ALL: WHEELS,
        }[self]


@dataclass(frozen=True)
class CarParams:
    """A mid-size passenger car (≈ 1.5 t, wheelbase 2.7 m), its articulation, actuators and limits.

    Geometry and limits match :class:`scenefactory.engines.base.VehicleParams` defaults (wheelbase,
    CoM position, 4.5 × 1.9 m footprint, 0.6 rad steering) so that actions mean the same on every tier.

    Mass and inertia
        - ``chassis_mass_kg``: sprung mass [kg].
        - ``inertia_box_m``: (length, width, height) of the uniform box the chassis inertia is taken
          from [m]: I_xx ≈ 650, I_yy ≈ 2780, I_zz ≈ 2940 kg·m² with the defaults.
        - ``com_height_m``: centre of mass above the road at static ride height [m].
        - ``wheel_mass_kg``: mass of one wheel with tyre, brake and upright (unsprung) [kg].
        - ``wheel_width_m``: tyre width, for the wheel's inertia and drawing only [m].
    Geometry
        - ``wheelbase_m``: front-to-rear axle distance [m].
        - ``rear_axle_to_com_m``: CoM ahead of the rear axle [m]; sets the static axle loads.
        - ``track_m``: left-to-right wheel centre distance [m].
        - ``wheel_radius_m``: loaded tyre radius [m].
        - ``body_length_m``, ``body_width_m``, ``body_height_m``: collision box of the body [m]. It
          is the band where cars meet (sills to beltline, 0.15–0.95 m), centred at the CoM height
          so that impact forces pass through the CoM: a full-height box (to the 1.45 m roof) puts
          them above it, pitches the cars into each other and launches them at 120 Hz.
        - ``ground_clearance_m``: road to bottom of the collision box at ride height [m].
    Suspension (per corner, along the chassis z)
        - ``suspension_stiffness_npm``: spring rate [N/m]; 35 kN/m gives ≈ 1.5 Hz body bounce.
        - ``suspension_damping_nspm``: damper rate [N·s/m]; 3.5 kN·s/m is ≈ 0.5 of critical.
        - ``suspension_travel_m``: bump and rebound travel from static ride height [m].
    Steering (front wheels, no Ackermann linkage: see :func:`ackermann_angles`)
        - ``max_steer_rad``: road-wheel angle limit; the servo ctrlrange [rad].
        - ``steer_kp_nmprad``: servo stiffness [N·m/rad].
        - ``steer_kv_nmsprad``: servo damping [N·m·s/rad].
        - ``steer_armature_kgm2``: reflected steering-rack inertia about the kingpin [kg·m²].
    Drive and brakes
        - ``drive_layout``: driven wheels (:class:`DriveLayout`).
        - ``max_drive_torque_nm``: motor torque limit per driven wheel [N·m]; ctrlrange is ± this.
          1500 N·m on the rear axle is ≈ 5.7 m/s² for the whole car from standstill and ≈ 3.3 m/s²
          at 25 m/s (VehicleParams asks for 4.0; the rear tyres saturate first below μ ≈ 0.95).
        - ``drive_free_speed_mps``: car speed at which the motor torque falls to zero [m/s]; the
          torque–speed line of the module docs; also the top speed (the model has no drag). See
          :func:`drive_ctrl` for the ctrl that gives a wanted torque.
        - ``max_brake_torque_nm``: brake torque limit per wheel [N·m] (applied as spin-joint
          ``frictionloss``, see the module docs); high enough to lock every wheel on a dry road.
    Contacts
        - ``body_friction``: friction of the body box against other cars [-]; low because MuJoCo's
          soft contacts (≈ 0.2–0.4 m overlap in a 30–50 m/s closing crash) let friction on tilted
          contact normals lift cars onto each other (measured: 0.3–0.5 → cars up to 3 m high at
          120 Hz, 0.1 → none). The road's own μ governs body–road contact through its priority.
    """

    chassis_mass_kg: float = 1500.0
    inertia_box_m: tuple[float, float, float] = (4.5, 1.8, 1.4)
    com_height_m: float = 0.55
    wheel_mass_kg: float = 20.0
    wheel_width_m: float = 0.22
    wheelbase_m: float = 2.7
    rear_axle_to_com_m: float = 1.35
    track_m: float = 1.6
    wheel_radius_m: float = 0.33
    body_length_m: float = 4.5
    body_width_m: float = 1.9
    body_height_m: float = 0.8
    ground_clearance_m: float = 0.15
    suspension_stiffness_npm: float = 35_000.0
    suspension_damping_nspm: float = 3_500.0
    suspension_travel_m: float = 0.10
    max_steer_rad: float = 0.6
    steer_kp_nmprad: float = 3_000.0
    steer_kv_nmsprad: float = 150.0
    steer_armature_kgm2: float = 1.0
    drive_layout: DriveLayout = DriveLayout.REAR
    max_drive_torque_nm: float = 1_500.0
    drive_free_speed_mps: float = 60.0
    max_brake_torque_nm: float = 3_000.0
    body_friction: float = 0.1

    def __post_init__(self) -> None:
        """Reject non-physical or inconsistent values at construction (``ValueError`` naming the field)."""
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "drive_layout":
                if not isinstance(value, DriveLayout):
                    raise ValueError(f"CarParams.drive_layout must be a DriveLayout, got {value!r}")
            elif f.name == "inertia_box_m":
                if len(value) != 3 or not all(math.isfinite(v) and v > 0.0 for v in value):
                    raise ValueError(f"CarParams.inertia_box_m must be 3 positive lengths, got {value}")
            elif not (isinstance(value, int | float) and math.isfinite(value) and value > 0.0):
                raise ValueError(f"CarParams.{f.name} must be a positive finite number, got {value!r}")
        checks = (
            (self.rear_axle_to_com_m < self.wheelbase_m, "rear_axle_to_com_m must be < wheelbase_m"),
            (
                self.wheelbase_m + 2 * self.wheel_radius_m <= self.body_length_m,
                "wheelbase_m + 2 wheel_radius_m must fit in body_length_m",
            ),
            (self.track_m < self.body_width_m, "track_m must be < body_width_m"),
            (self.wheel_radius_m < self.com_height_m, "wheel_radius_m must be < com_height_m"),
            (self.ground_clearance_m < self.com_height_m, "ground_clearance_m must be < com_height_m"),
            (self.max_steer_rad < 1.2, "max_steer_rad must be < 1.2 rad"),
            (self.suspension_travel_m < self.wheel_radius_m, "suspension_travel_m must be < wheel_radius_m"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(f"CarParams: {message} ({self})")

    @property
    def total_mass_kg(self) -> float:
        """Chassis plus four wheels [kg]."""
        return self.chassis_mass_kg + 4.0 * self.wheel_mass_kg

    @property
    def drive_free_speed_radps(self) -> float:
        """Wheel spin rate ω₀ at which the drive torque falls to zero [rad/s]."""
        return self.drive_free_speed_mps / self.wheel_radius_m

    @property
    def chassis_inertia_kgm2(self) -> tuple[float, float, float]:
        """Principal moments (I_xx, I_yy, I_zz) of the chassis, a uniform box [kg·m²]."""
        lx, ly, lz = self.inertia_box_m
        k = self.chassis_mass_kg / 12.0
        return k * (ly**2 + lz**2), k * (lx**2 + lz**2), k * (lx**2 + ly**2)

    @property
    def wheel_inertia_kgm2(self) -> tuple[float, float, float]:
        """Principal moments (I_xx, I_yy = spin, I_zz) of a wheel, a solid disc [kg·m²]."""
        m, r, w = self.wheel_mass_kg, self.wheel_radius_m, self.wheel_width_m
        i_side = m * (3.0 * r**2 + w**2) / 12.0
        return i_side, 0.5 * m * r**2, i_side

    def static_spring_load_n(self, front: bool) -> float:
        """Static load on one front (or rear) spring from the chassis weight [N]."""
        front_share = self.rear_axle_to_com_m / self.wheelbase_m
        share = front_share if front else 1.0 - front_share
        return 0.5 * share * self.chassis_mass_kg * GRAVITY_MPS2

    def wheel_pos_m(self, wheel: str) -> tuple[float, float, float]:
        """Wheel centre in the chassis (CoM) frame at static ride height [m]."""
        x = self.wheelbase_m - self.rear_axle_to_com_m if wheel[0] == "f" else -self.rear_axle_to_com_m
        y = 0.5 * self.track_m if wheel[1] == "l" else -0.5 * self.track_m
        return x, y, self.wheel_radius_m - self.com_height_m


def _f(*values: float) -> str:
    """Format numbers for MJCF attributes."""
    return " ".join(f"{v:.9g}" for v in values)


def car_prefix(index: int) -> str:
    """The name prefix of car ``index`` in :func:`world_mjcf` (``car3_``)."""
    return f"car{index}_"


def _wheel_xml(params: CarParams, p: str, wheel: str) -> str:
    """One wheel body: suspension slide, steering hinge (front), spin hinge, sphere tyre."""
    front = wheel[0] == "f"
    ixx, iyy, izz = params.wheel_inertia_kgm2
    springref = -params.static_spring_load_n(front) / params.suspension_stiffness_npm
    travel = params.suspension_travel_m
    steer = ""
    if wheel in STEERED_WHEELS:
        lim = 1.05 * params.max_steer_rad  # a little past the servo's range: the limit is a backstop
        steer = (
            f'<joint name="{p}steer_{wheel}" type="hinge" axis="0 0 1" limited="true" '
            f'range="{_f(-lim, lim)}" armature="{_f(params.steer_armature_kgm2)}"/>'
        )
    return (
        f'<body name="{p}wheel_{wheel}" pos="{_f(*params.wheel_pos_m(wheel))}">'
        f'<inertial pos="0 0 0" mass="{_f(params.wheel_mass_kg)}" diaginertia="{_f(ixx, iyy, izz)}"/>'
        f'<joint name="{p}susp_{wheel}" type="slide" axis="0 0 1" limited="true" '
        f'range="{_f(-travel, travel)}" '
        f'stiffness="{_f(params.suspension_stiffness_npm)}" springref="{_f(springref)}" '
        f'damping="{_f(params.suspension_damping_nspm)}"/>'
        f"{steer}"
        f'<joint name="{p}spin_{wheel}" type="hinge" axis="0 1 0"/>'
        f'<geom name="{p}wheel_{wheel}" type="sphere" size="{_f(params.wheel_radius_m)}" '
        f'contype="0" conaffinity="{CONTYPE_ROAD}" condim="3" rgba="0.1 0.1 0.1 1"/>'
        f"</body>"
    )


def car_mjcf(
    params: CarParams, prefix: str, pos_xy_m: tuple[float, float] = (0.0, 0.0), yaw_rad: float = 0.0
) -> str:
    """MJCF of one car named with ``prefix``, at ``pos_xy_m`` [m] heading ``yaw_rad`` at ride height.

    Returns a fragment ``<worldbody>…</worldbody><actuator>…</actuator><sensor>…</sensor>`` to paste
    inside a ``<mujoco>`` element (MJCF allows repeated sections) whose ``<compiler angle="radian"/>`` is set,
    as in :func:`world_mjcf`. Names: body ``{prefix}chassis``, joint ``{prefix}free``, geom
    ``{prefix}body``, per wheel w in :data:`WHEELS` body and geom ``{prefix}wheel_w`` and joints
    ``{prefix}susp_w``, ``{prefix}spin_w``; front joints ``{prefix}steer_w`` with actuators
    ``{prefix}steer_servo_w``; driven wheels' actuators ``{prefix}drive_w``; site and touch sensor
    ``{prefix}touch``.
    """
    p = prefix
    ixx, iyy, izz = params.chassis_inertia_kgm2
    half_len, half_wid, half_hgt = (
        0.5 * params.body_length_m,
        0.5 * params.body_width_m,
        0.5 * params.body_height_m,
    )
    box_z = params.ground_clearance_m + half_hgt - params.com_height_m
    quat = (math.cos(0.5 * yaw_rad), 0.0, 0.0, math.sin(0.5 * yaw_rad))
    wheels = "".join(_wheel_xml(params, p, w) for w in WHEELS)
    body = (
        f'<worldbody><body name="{p}chassis" pos="{_f(*pos_xy_m, params.com_height_m)}" quat="{_f(*quat)}">'
        f'<freejoint name="{p}free"/>'
        f'<inertial pos="0 0 0" mass="{_f(params.chassis_mass_kg)}" diaginertia="{_f(ixx, iyy, izz)}"/>'
        f'<geom name="{p}body" type="box" size="{_f(half_len, half_wid, half_hgt)}" pos="0 0 {_f(box_z)}" '
        f'contype="{CONTYPE_BODY}" conaffinity="{CONTYPE_BODY | CONTYPE_ROAD}" condim="3" '
        f'friction="{_f(params.body_friction)} 0 0" rgba="0.2 0.4 0.8 0.6"/>'
        f'<site name="{p}touch" type="box" size="{_f(half_len + 0.3, half_wid + 0.3, half_hgt + 0.3)}" '
        f'pos="0 0 {_f(box_z)}" rgba="0 0 0 0"/>'
        f"{wheels}</body></worldbody>"
    )
    kp, kv, lim = params.steer_kp_nmprad, params.steer_kv_nmsprad, params.max_steer_rad
    servos = "".join(
        f'<position name="{p}steer_servo_{w}" joint="{p}steer_{w}" kp="{_f(kp)}" kv="{_f(kv)}" '
        f'ctrlrange="{_f(-lim, lim)}"/>'
        for w in STEERED_WHEELS
    )
    tmax = params.max_drive_torque_nm
    slope = -params.wheel_radius_m / params.drive_free_speed_mps  # torque falls by ctrl·ω/ω₀
    motors = "".join(
        f'<general name="{p}drive_{w}" joint="{p}spin_{w}" gear="1" gaintype="affine" '
        f'gainprm="1 0 {_f(slope)}" biastype="none" ctrlrange="{_f(-tmax, tmax)}" '
        f'forcerange="{_f(-tmax, tmax)}"/>'
        for w in params.drive_layout.driven_wheels
    )
    sensor = f'<sensor><touch name="{p}touch" site="{p}touch"/></sensor>'
    return f"{body}<actuator>{servos}{motors}</actuator>{sensor}"


def parking_grid_xy_m(num_cars: int, spacing_m: tuple[float, float] = (8.0, 4.0)) -> npt.NDArray[np.float64]:
    """Default positions (num_cars, 2) [m]: a near-square grid around the origin, all facing +x.

    ``spacing_m`` is (along x, along y); the defaults leave 3.5 m and 2.1 m between 4.5 × 1.9 m cars.
    """
    if num_cars < 1:
        raise ValueError(f"num_cars must be >= 1, got {num_cars}")
    cols = math.ceil(math.sqrt(num_cars))
    i = np.arange(num_cars)
    xy = np.stack([(i % cols) * spacing_m[0], (i // cols) * spacing_m[1]], axis=1).astype(np.float64)
    return xy - xy.mean(axis=0)


def world_mjcf(
    num_cars: int,
    params: CarParams | None = None,
    friction: float = 1.0,
    timestep_s: float = 1.0 / 120.0,
    extent_m: float = 300.0,
) -> str:
    """MJCF of a flat road plane with ``num_cars`` cars (prefixes ``car0_`` …) parked on a grid.

    - ``friction``: tyre–road μ [-] of the plane ``ground`` (priority 1, so it governs every contact
      with the road; change it per world through ``geom_friction[ground_geom, 0]``).
    - ``timestep_s``: physics step [s]; stable from 1/500 to 1/120 s (see the option comments).
    - ``extent_m``: half-size of the drawn plane [m]; collision with a plane is unbounded anyway.

    Options: ``implicitfast`` integrates the suspension dampers and steering servo damping implicitly
    (a 20 kg wheel on a 3.5 kN·s/m damper is at the edge of explicit stability at 120 Hz); the
    ``Newton`` solver with an ``elliptic`` cone converges in a few iterations; ``impratio`` 10 makes
    friction 10× stiffer than the normal contact, which keeps soft-contact creep of a parked car
    negligible. Contacts use the road's default solref (0.02 s, critically damped), which MuJoCo
    requires to be ≥ 2 timesteps (true up to 1/100 s).
    """
    if num_cars < 1:
        raise ValueError(f"num_cars must be >= 1, got {num_cars}")
    if not (math.isfinite(friction) and friction > 0.0):
        raise ValueError(f"friction must be positive, got {friction}")
    if not 0.0 < timestep_s <= 0.01:
        raise ValueError(f"timestep_s must be in (0, 0.01] s for stable contacts, got {timestep_s}")
    if not extent_m > 0.0:
        raise ValueError(f"extent_m must be positive, got {extent_m}")
    params = params or CarParams()
    cars = "".join(
        car_mjcf(params, car_prefix(i), (float(x), float(y)))
        for i, (x, y) in enumerate(parking_grid_xy_m(num_cars))
    )
    return (
        '<mujoco model="scenefactory_road">'
        '<compiler angle="radian" autolimits="true"/>'
        f'<option timestep="{_f(timestep_s)}" gravity="0 0 {_f(-GRAVITY_MPS2)}" integrator="implicitfast" '
        'cone="elliptic" solver="Newton" iterations="50" ls_iterations="20" tolerance="1e-8">'
        '<flag energy="disable"/></option>'
        '<visual><global offwidth="1280" offheight="720"/></visual>'
        "<worldbody>"
        '<light pos="0 0 50" dir="0 0 -1" directional="true"/>'
        f'<geom name="{GROUND_GEOM}" type="plane" size="{_f(extent_m, extent_m)} 1" '
        f'friction="{_f(friction)} 0 0" priority="1" condim="3" '
        f'contype="{CONTYPE_ROAD}" conaffinity="0" rgba="0.35 0.35 0.35 1"/>'
        "</worldbody>"
        f"{cars}</mujoco>"
    )


IntArray = npt.NDArray[np.int64]


def _ids(model: mujoco.MjModel, obj: mujoco.mjtObj, names: list[list[str]]) -> IntArray:
    """Ids of named objects, shape of ``names``; a missing name is an error naming it."""
    out = np.empty((len(names), len(names[0])) if names else (0, 0), dtype=np.int64)
    for i, row in enumerate(names):
        for j, name in enumerate(row):
            idx = mujoco.mj_name2id(model, obj, name)
            if idx < 0:
                raise ValueError(f"model has no {obj.name} named '{name}': not built by world_mjcf?")
            out[i, j] = idx
    return out


@dataclass(frozen=True, eq=False)
class CarIndex:
    """Where K cars live in a model from :func:`world_mjcf`; every array is int64, first axis = car.

    Use with fancy indexing on batched arrays, e.g. ``qpos[:, index.free_qpos]`` → (nsim, K, 7).

    - ``free_qpos`` (K, 7): qpos of the free joint: position [m] (world), quaternion (w, x, y, z).
    - ``free_qvel`` (K, 6): qvel of the free joint: linear velocity [m/s] in the *world* frame,
      then angular velocity [rad/s] in the *body* frame (MuJoCo's free-joint convention).
    - ``steer_qpos`` (K, 2), ``steer_qvel`` (K, 2): steering joints, :data:`STEERED_WHEELS` order.
    - ``susp_qpos`` (K, 4), ``susp_qvel`` (K, 4): suspension slide joints [m], [m/s], :data:`WHEELS` order.
    - ``wheel_qpos`` (K, 4), ``wheel_qvel`` (K, 4): spin joints [rad], [rad/s]; ``wheel_qvel`` is
      also the dof index of each wheel, e.g. for ``dof_frictionloss`` (the brake torque [N·m]).
    - ``steer_actuator`` (K, 2): steering servos (ctrl = road-wheel angle [rad]).
    - ``drive_actuator`` (K, D): drive motors (ctrl = standstill wheel torque [N·m], see the
      module docs), D driven wheels.
    - ``drive_wheel`` (D,): column in :data:`WHEELS` order of each driven wheel.
    - ``chassis_body`` (K,), ``chassis_geom`` (K,), ``wheel_geom`` (K, 4).
    - ``touch_sensordata`` (K,): sensordata address of each body's touch sensor [N].
    - ``ground_geom``: the road plane's geom id.
    """

    num_cars: int
    free_qpos: IntArray
    free_qvel: IntArray
    steer_qpos: IntArray
    steer_qvel: IntArray
    susp_qpos: IntArray
    susp_qvel: IntArray
    wheel_qpos: IntArray
    wheel_qvel: IntArray
    steer_actuator: IntArray
    drive_actuator: IntArray
    drive_wheel: IntArray
    chassis_body: IntArray
    chassis_geom: IntArray
    wheel_geom: IntArray
    touch_sensordata: IntArray
    ground_geom: int

    @classmethod
    def from_model(cls, model: mujoco.MjModel) -> CarIndex:
        """Find every car ``car{i}_`` (i = 0, 1, … contiguous) of a :func:`world_mjcf` model by name."""
        num_cars = 0
        while mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"{car_prefix(num_cars)}chassis") >= 0:
            num_cars += 1
        if num_cars == 0:
            raise ValueError("model has no body 'car0_chassis': not built by world_mjcf?")
        prefixes = [car_prefix(i) for i in range(num_cars)]
        J, A, B, G, S = (
            mujoco.mjtObj.mjOBJ_JOINT,
            mujoco.mjtObj.mjOBJ_ACTUATOR,
            mujoco.mjtObj.mjOBJ_BODY,
            mujoco.mjtObj.mjOBJ_GEOM,
            mujoco.mjtObj.mjOBJ_SENSOR,
        )

        def joints(kind: str, wheels: tuple[str, ...]) -> IntArray:
            return _ids(model, J, [[f"{p}{kind}_{w}" for w in wheels] for p in prefixes])

        free = _ids(model, J, [[f"{p}free"] for p in prefixes])[:, 0]
        steer, susp, spin = joints("steer", STEERED_WHEELS), joints("susp", WHEELS), joints("spin", WHEELS)
        drive_names = [w for w in WHEELS if mujoco.mj_name2id(model, A, f"{prefixes[0]}drive_{w}") >= 0]
        if not drive_names:
            raise ValueError("model has no drive motors 'car0_drive_*': not built by world_mjcf?")
        ground = mujoco.mj_name2id(model, G, GROUND_GEOM)
        if ground < 0:
            raise ValueError(f"model has no geom named '{GROUND_GEOM}'")
        qpos_adr, dof_adr = model.jnt_qposadr.astype(np.int64), model.jnt_dofadr.astype(np.int64)
        return cls(
            num_cars=num_cars,
            free_qpos=qpos_adr[free][:, None] + np.arange(7),
            free_qvel=dof_adr[free][:, None] + np.arange(6),
            steer_qpos=qpos_adr[steer],
            steer_qvel=dof_adr[steer],
            susp_qpos=qpos_adr[susp],
            susp_qvel=dof_adr[susp],
            wheel_qpos=qpos_adr[spin],
            wheel_qvel=dof_adr[spin],
            steer_actuator=_ids(
                model, A, [[f"{p}steer_servo_{w}" for w in STEERED_WHEELS] for p in prefixes]
            ),
            drive_actuator=_ids(model, A, [[f"{p}drive_{w}" for w in drive_names] for p in prefixes]),
            drive_wheel=np.array([WHEELS.index(w) for w in drive_names], dtype=np.int64),
            chassis_body=_ids(model, B, [[f"{p}chassis"] for p in prefixes])[:, 0],
            chassis_geom=_ids(model, G, [[f"{p}body"] for p in prefixes])[:, 0],
            wheel_geom=_ids(model, G, [[f"{p}wheel_{w}" for w in WHEELS] for p in prefixes]),
            touch_sensordata=model.sensor_adr[_ids(model, S, [[f"{p}touch"] for p in prefixes])[:, 0]].astype(
                np.int64
            ),
            ground_geom=int(ground),
        )


def drive_ctrl(
    torque_nm: npt.NDArray[np.floating], wheel_speed_radps: npt.NDArray[np.floating], params: CarParams
) -> npt.NDArray[np.float64]:
    """The drive ctrl [N·m] that makes a motor deliver ``torque_nm`` at spin rate ``wheel_speed_radps``.

    Inverts the torque–speed line T = ctrl · (1 − ω/ω₀) (module docs), elementwise over any
    matching shapes, and clips to the ctrlrange ± ``max_drive_torque_nm``: near and above ω₀ the
    motor cannot deliver the torque and gets the full ctrl (which then brakes the wheel toward ω₀).
    """
    scale = 1.0 - np.asarray(wheel_speed_radps, dtype=np.float64) / params.drive_free_speed_radps
    limit = params.max_drive_torque_nm
    ctrl = np.asarray(torque_nm, dtype=np.float64) / np.maximum(scale, 1e-6)
    return np.clip(ctrl, -limit, limit)


def ackermann_angles(
    steer_rad: npt.NDArray[np.floating], params: CarParams
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Left and right road-wheel angles [rad] for a bicycle-model angle ``steer_rad`` (any shape).

    The two front wheels turn about the same point on the rear-axle line (Ackermann geometry), so
    neither scrubs sideways at low speed: with turn radius R = L / tan δ at the axle centre,
    δ_left = atan(L / (R − t/2)), δ_right = atan(L / (R + t/2)), written as
    atan(L·tan δ / (L ∓ (t/2)·tan δ)) so that δ = 0 and right turns (δ < 0) need no special case
    (the denominators stay positive for |δ| < atan(2L/t) ≈ 1.28 rad). Results are clipped to
    ±``max_steer_rad``.
    """
    tan = np.tan(np.asarray(steer_rad, dtype=np.float64))
    L, half = params.wheelbase_m, 0.5 * params.track_m
    left = np.arctan(L * tan / (L - half * tan))
    right = np.arctan(L * tan / (L + half * tan))
    lim = params.max_steer_rad
    return np.clip(left, -lim, lim), np.clip(right, -lim, lim)
