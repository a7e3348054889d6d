"""Where an OpenAI-compatible endpoint is and whether it answers yet (no ``openai`` import): ``is_local_url`` and
``wait_for_models``, the one readiness poll of the LLM server that ``consensus run`` (``runs.ros_runner``) and the
robots' own processes (``ros.fleet.EndpointReady``, so that ``ros2 launch`` behaves the same) use."""
from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Callable
from urllib.parse import urlsplit

_LOCAL_HOSTS = {"localhost", "::1", "0.0.0.0"}


def is_local_url(base_url: str | None) -> bool:
    """True when ``base_url`` points at this machine (loopback or localhost)."""
    if not base_url:
        return False
    host = (urlsplit(base_url).hostname or "").lower()
    return host in _LOCAL_HOSTS or host.startswith("127.")


def models_url(base_url: str) -> str:
    """``<base_url>/models``: what a server answers once its model is loaded."""
    return base_url.rstrip("/") + "/models"


def wait_for_models(base_url: str, *, timeout_s: float, poll_s: float = 1.0,
                    give_up: Callable[[], bool] | None = None) -> bool:
    """Poll ``GET <base_url>/models`` every ``poll_s`` until it answers 200 (True), or until ``timeout_s`` has
    passed or ``give_up()`` is true (False). A refused connection, a timeout or an error status is "not yet"."""
    url = models_url(base_url)
    deadline = time.monotonic() + timeout_s
    while True:
        if give_up is not None and give_up():
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:      # noqa: S310 - the run's own http endpoint
                if resp.status == 200:
                    return True
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
