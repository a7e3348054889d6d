"""The link model: how what one robot broadcasts reaches another (no ROS), shared by the ROS relays and the headless
loop, so that both deliver the same way.

Every robot's broadcasts are *samples*: a time and a vector of numbers (its position, and whatever travels with it:
its meeting point, its measured speed). A delivery to receiver ``i`` of sender ``j``'s sample, over the link
``(i, j)``:

* **delay** (``link_delay_s``): the sample delivered is the newest one at least ``delay_s`` old;
* **drop** (``link_drop_prob``): per link and delivery, seeded, the delivery is lost and the link keeps its previous
  one (which then ages);
* **loss**: a delivered sample older than ``max_age_s`` (the config's ``robot_timeout_s + link_delay_s``) is left
  out: a robot whose process died, or whose link failed, drops out of the receiver's set.

``deliver`` returns, for every receiver and sender, the delivered sample and its time (the time it was taken, so the
receiver knows its *age*), vectorised over the ``n × n`` links. With no delay and no drop it is the newest sample of
every sender at once: the perfect information of the papers' headless runs.
"""
from __future__ import annotations

import math

import numpy as np


class LinkModel:
    """Deliveries of the samples of ``n`` senders to ``n`` receivers (module docstring)."""

    def __init__(self, n: int, width: int, *, delay_s: float = 0.0, drop_prob: float = 0.0,
                 max_age_s: float = math.inf, seed: int = 0, rate_hz: float = 10.0) -> None:
        if not (delay_s >= 0 and math.isfinite(delay_s)):
            raise ValueError(f"link delay must be a finite number >= 0, got {delay_s}")
        if not 0.0 <= drop_prob < 1.0:
            raise ValueError(f"link drop probability must be in [0, 1), got {drop_prob}")
        self.n, self.width = int(n), int(width)
        self.delay_s, self.drop_prob, self.max_age_s = float(delay_s), float(drop_prob), float(max_age_s)
        self.rng = np.random.default_rng(seed)
        # a ring buffer of samples per sender: enough for the delay at the given sample rate, twice over
        self.keep = max(2, int(math.ceil((self.delay_s + 1.0) * max(rate_hz, 1.0) * 2)))
        self.hist_t = np.full((self.n, self.keep), -np.inf)
        self.hist_v = np.full((self.n, self.keep, self.width), np.nan)
        self.head = np.zeros(self.n, dtype=int)            # next write position per sender
        self.value = np.full((self.n, self.n, self.width), np.nan)   # value[i, j]: what i last got of j
        self.stamp = np.full((self.n, self.n), -np.inf)               # and when j took it
        self.delivered = 0
        self.dropped = 0

    def record(self, j: int, t: float, value) -> None:
        """Sender ``j``'s sample ``value`` (``width`` numbers) taken at time ``t`` (times of one sender ascend)."""
        k = self.head[j]
        self.hist_t[j, k] = t
        self.hist_v[j, k] = value
        self.head[j] = (k + 1) % self.keep

    def record_all(self, t: float, values) -> None:
        """A sample of every sender at once (``values`` (n, width); NaN rows: no sample)."""
        values = np.asarray(values, dtype=float).reshape(self.n, self.width)
        ok = np.isfinite(values).all(axis=1)
        idx = np.flatnonzero(ok)
        self.hist_t[idx, self.head[idx]] = t
        self.hist_v[idx, self.head[idx]] = values[idx]
        self.head[idx] = (self.head[idx] + 1) % self.keep

    def newest(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """The newest sample of every sender at least ``delay_s`` old: ``(values (n, width), times (n,))``, NaN and
        -inf where there is none."""
        ok = self.hist_t <= now - self.delay_s
        t = np.where(ok, self.hist_t, -np.inf)
        k = np.argmax(t, axis=1)
        rows = np.arange(self.n)
        times = t[rows, k]
        values = np.where(np.isfinite(times)[:, None], self.hist_v[rows, k], np.nan)
        return values, times

    def deliver(self, now: float, links=None, rows=None) -> tuple[np.ndarray, np.ndarray]:
        """One delivery over ``links`` ((n, n) bool, row i = whom i hears; default every pair but oneself):
        ``(values (n, n, width), times (n, n))`` of what each receiver now holds of each sender (NaN / -inf: nothing,
        lost or not a link). ``rows``: only these receivers get a delivery now (a fleet clock that steps its
        robots in groups); the result has their rows only, in that order."""
        links = ~np.eye(self.n, dtype=bool) if links is None else np.asarray(links, dtype=bool)
        if rows is not None:
            rows = np.asarray(rows, dtype=int)
            links = links[rows]
        values, times = self.newest(now)
        update = links & np.isfinite(times)[None, :]
        if self.drop_prob > 0:
            drop = self.rng.random(links.shape) < self.drop_prob
            self.dropped += int(np.count_nonzero(drop & links))
            update &= ~drop
        value, stamp = (self.value, self.stamp) if rows is None else (self.value[rows], self.stamp[rows])
        value = np.where(update[:, :, None], values[None, :, :], value)
        stamp = np.where(update, times[None, :], stamp)
        if rows is None:
            self.value, self.stamp = value, stamp
        else:
            self.value[rows], self.stamp[rows] = value, stamp
        fresh = links & ((now - stamp) <= self.max_age_s)
        self.delivered += int(np.count_nonzero(fresh))
        return np.where(fresh[:, :, None], value, np.nan), np.where(fresh, stamp, -np.inf)

    def forget(self, keep_links) -> None:
        """Drop what receivers hold over links that no longer exist (a graph switched at run time)."""
        keep = np.asarray(keep_links, dtype=bool)
        self.value = np.where(keep[:, :, None], self.value, np.nan)
        self.stamp = np.where(keep, self.stamp, -np.inf)
