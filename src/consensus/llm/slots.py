"""One prompt prefix for every slot of a llama.cpp server: a cold slot starts from a warm slot's KV cache.

Agents pinned to their own slots (``OpenAIChatClient.slot_for``) share most of their prompt: the system prompt and,
in the ``tools`` style, the tool definitions (~450 of ~540 tokens for paper 1's aggregation). On a fresh server
each slot would evaluate that prefix itself, so a cold first round would cost many calls' time. llama.cpp
keeps one prompt cache per slot and offers no shared prefix cache between slots, but its server can save a slot's
cache to a file and restore it into another slot (``POST /slots/<id>?action=save|restore``, enabled by
``--slot-save-path``; a save or a restore takes milliseconds). A restored slot holds the other agent's prompt;
llama.cpp keeps the longest common token prefix with the new request and evaluates only the rest (measured:
docs/benchmarks.md, 'Cold LLM round').

``SharedPrefix`` does this for a client: the first request of the run (the *primer*) goes alone; when it has
completed its slot is saved; every other slot, before its first request, is restored from that file (requests that
arrive while the primer runs wait for it, at most ``wait_s``). Nothing here changes a reply (the cache is matched
token by token; what does not match is evaluated): a failed save or restore is counted, logged once and the
sharing is switched off, the requests go on as they would without it.
"""
from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request

log = logging.getLogger(__name__)

FILE_NAME = "shared-prefix.bin"       # in the server's --slot-save-path (a file name; no directories)


class SharedPrefix:
    """Copies the primer's slot into every cold slot of one llama.cpp server (module docstring)."""

    def __init__(self, root_url: str, api_key: str = "", *, timeout_s: float = 30.0, wait_s: float = 600.0) -> None:
        self.root_url = root_url.rstrip("/")
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self.timeout_s = float(timeout_s)
        self.wait_s = float(wait_s)
        self._cond = threading.Condition()
        self._warm: set[int] = set()          # slots that hold a prompt (their own or the restored prefix)
        self._saved = False
        self._primer: int | None = None       # the slot whose first request is in flight
        self._enabled = True
        self.counts = {"saves": 0, "restores": 0, "restored_tokens": 0, "errors": 0}

    # ------------------------------------------------------------------ the client's calls
    def before(self, slot: int) -> bool:
        """Call before a request on ``slot``; True when this request is the primer (then call ``after``)."""
        with self._cond:
            if not self._enabled or slot in self._warm:
                return False
            self._warm.add(slot)
            if not self._saved and self._primer is None:
                self._primer = slot
                return True
            if not self._saved:
                self._cond.wait_for(lambda: self._saved or self._primer is None or not self._enabled,
                                    timeout=self.wait_s)
            restore = self._saved and self._enabled
        if restore:
            reply = self._action(slot, "restore")
            if reply is not None:
                with self._cond:
                    self.counts["restores"] += 1
                    self.counts["restored_tokens"] += _count(reply, "n_restored")
        return False

    def after(self, slot: int, ok: bool) -> None:
        """The primer on ``slot`` finished (``ok``: with a reply): save its slot for the others."""
        saved = ok and self._action(slot, "save") is not None
        with self._cond:
            if saved:
                self._saved = True
                self.counts["saves"] += 1
            self._primer = None
            self._cond.notify_all()

    def status(self) -> dict:
        with self._cond:
            return {**self.counts, "enabled": self._enabled, "warm_slots": len(self._warm)}

    # ------------------------------------------------------------------ the server's slot actions
    def _action(self, slot: int, action: str) -> dict | None:
        url = f"{self.root_url}/slots/{int(slot)}?action={action}"
        body = json.dumps({"filename": FILE_NAME}).encode()
        req = urllib.request.Request(url, data=body, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                reply = json.loads(resp.read(65536).decode("utf-8", "replace"))
            if not isinstance(reply, dict):
                raise ValueError("the reply is not a JSON object")
            return reply
        except (OSError, ValueError, urllib.error.URLError) as exc:
            detail = exc.code if isinstance(exc, urllib.error.HTTPError) else type(exc).__name__
            with self._cond:
                self.counts["errors"] += 1
                first = self._enabled
                self._enabled = False         # go on without sharing; the requests are unchanged
                self._cond.notify_all()
            if first:
                log.warning("llama.cpp slot %s of slot %d failed (%s): the slots' prompt prefix is no longer shared "
                            "(replies are unchanged)", action, slot, detail)
            return None


def _count(reply: dict, key: str) -> int:
    value = reply.get(key)
    return value if isinstance(value, int) and value >= 0 else 0
