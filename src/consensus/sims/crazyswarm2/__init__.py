"""``sim: crazyswarm2``: crazyswarm2's own simulator (``crazyflie_sim``'s ``crazyflie_server``) flying the
Crazyflies of a robots file, driven by our unchanged robot nodes through each drone's ``crazyflie_link``
(``consensus.ros.crazyflie_link``, the same link that flies real Crazyflies through crazyswarm2's hardware server:
docs/real-robots.md). ``core`` holds the server's parameters and the checks; nothing else of ours sits between."""
from consensus.control.motion import Simulator

SIM = Simulator(
    "crazyswarm2", "crazyswarm2's simulator (crazyflie_server, backend none) for the Crazyflies of the robots file "
    "(make drivers)", "consensus.sims.crazyswarm2.core:processes", prepare="consensus.sims.crazyswarm2.core:prepare",
    headless=False, drives=("crazyflie",), sim_time="required")
