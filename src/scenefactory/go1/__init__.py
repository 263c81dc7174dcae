"""A Go1-class quadruped, one folder (as MuJoCo Playground keeps one robot per folder): the robot
model (``robot``), the velocity-tracking task (``config``, ``env``, ``observations``, ``rewards``,
``randomization``), its PPO recipe (``train``), evaluation and rendering, deployment (``deploy``)
and the jobs the ``go1`` commands run (``jobs``)."""
