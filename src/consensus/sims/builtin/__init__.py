"""``sim: builtin`` (the default): our simulator node ``sim`` (``ros``: the ROS wiring around a world, the
kinematic world of ``consensus.control.dynamics.world``), started by ``processes``. Only the record is here, so
that naming a simulator imports none of its code."""
from consensus.control.motion import Simulator

SIM = Simulator(
    "builtin", "our simulator node `sim` (consensus.sims.builtin.ros): the kinematics, odometry and /clock",
    "consensus.sims.builtin.processes:processes", ground_truth=True,
    executables={"sim": "consensus.sims.builtin.ros"})
