"""``sim: mujoco``: a MuJoCo physics world (the ``mujoco`` extra): ``world`` holds the world (the MJCF of a run,
``MujocoWorld``, the contact judge, ``render_frames``), its processes and checks; ``ros`` the node ``mujoco_sim``
(docs/mujoco.md)."""
from consensus.control.motion import Simulator

SIM = Simulator(
    "mujoco", "a MuJoCo physics world (consensus.sims.mujoco.world): bodies with mass that really collide, and the "
    "contacts it counts", "consensus.sims.mujoco.world:processes", prepare="consensus.sims.mujoco.world:prepare",
    world="consensus.sims.mujoco.world:MujocoWorld", renderer="consensus.sims.mujoco.world:render_frames",
    ground_truth=True, executables={"mujoco_sim": "consensus.sims.mujoco.ros"})
