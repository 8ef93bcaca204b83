"""The actor of ``--executor ray`` (:class:`RayWorker`): a relay to one sandboxed child process.

A Ray actor's process runs Ray's own threads before any code of ours, and Landlock confines only
the thread that enters it, so plugin code never runs in the actor: each actor starts one child
(:mod:`xaibench.runner.isolation.ray_child`, which enters the worker sandbox before it imports anything
heavy or any plugin) and relays every request to it as bytes, every answer back unread. The actor
itself imports neither torch nor any plugin: requests come pickled by the driver, answers are
bytes of :mod:`xaibench.runner.isolation.wire` that only the driver decodes.

- The child is started with only its socket to the actor open (``close_fds``), in a session and
  process group of its own, in a fresh scratch folder (``xaibench-ray-<actor pid>-...`` in the
  actor's temporary folder) that is its working folder and ``TMPDIR``. Its stdout and stderr go
  through :class:`~xaibench.runner.isolation.processes.OutputForwarder` (one ``[worker]`` line at a time,
  control characters escaped) to the actor's stderr, which Ray keeps in its session's logs.
- It dies with the actor (``PR_SET_PDEATHSIG``: when the driver kills an actor that overran, the
  child goes too); an idle actor ends its child before it is killed (:meth:`RayWorker.close`),
  which removes the scratch folder; an actor removes the folders that actors killed while busy
  left behind when it starts.
- A child that ends (``sys.exit``, a crash, a signal) makes the actor answer
  :class:`ChildEnded` with the local executor's reason (``"worker exited with status 3"``,
  ``"worker killed by signal SIGSEGV"``), which the driver treats as the actor's death.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from xaibench.runner.isolation import processes
from xaibench.runner.isolation.processes import OutputForwarder, new_scratch, remove_scratch
from xaibench.runner.isolation.processes import exit_reason as code_reason
from xaibench.runner.isolation.wire import MAX_REPLY_BYTES, Refused, encode

# The script an actor runs as its child, where plugin code runs (see xaibench/runner/isolation/ray_child.py).
CHILD_SCRIPT = Path(__file__).resolve().with_name("ray_child.py")
# An actor's child's scratch folder: f"{SCRATCH_PREFIX}{actor pid}-..." in the actor's temporary folder.
SCRATCH_KIND = "ray"
SCRATCH_PREFIX = f"{processes.SCRATCH_PREFIX}{SCRATCH_KIND}-"
PLUGINS_FILE = "plugins.json"  # in the child's scratch folder: the driver's plugin descriptions
# How long to wait for the exit status of a child that closed its socket or was killed.
EXIT_WAIT_SECONDS = 10.0
# What a child sends when it has started, and when a task's explainer call starts.
READY = encode(("ready",))


@dataclass(frozen=True)
class ChildEnded:
    """What an actor answers when its child ended: the n/a reason (``"worker exited with status
    3"``). The driver treats it as the actor's death (the actor is killed and replaced)."""

    reason: str


class Child:
    """An actor's sandboxed child process (:mod:`xaibench.runner.isolation.ray_child`), the actor's end of
    its socket, and the thread that forwards its output (escaped) to the actor's log."""

    def __init__(self, threads: int, sandboxed: bool, plugins: dict[str, Any] | None = None) -> None:
        self.scratch: str | None = new_scratch(SCRATCH_KIND)  # the folders of actors killed before are removed
        # the driver's plugin descriptions: the child registers them without probing every plugin again
        with open(os.path.join(self.scratch, PLUGINS_FILE), "w") as out:
            json.dump(plugins or {}, out)
        here, there = socket.socketpair()
        output, into = os.pipe()
        # The child imports what this actor can import (Ray may have added to this process's path).
        env = dict(os.environ, TMPDIR=self.scratch, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        args = [str(there.fileno()), self.scratch, str(threads), str(os.getpid()), "1" if sandboxed else "0"]
        try:
            self.process = subprocess.Popen(
                [sys.executable, str(CHILD_SCRIPT), *args],
                stdin=subprocess.DEVNULL,
                stdout=into,
                stderr=into,
                close_fds=True,
                pass_fds=(there.fileno(),),
                cwd=self.scratch,
                env=env,
                start_new_session=True,  # its own process group (killed as one), no terminal signals
            )
        finally:
            there.close()
            os.close(into)
        self.output = OutputForwarder(output)
        self.conn = Connection(here.detach())
        self.ended: ChildEnded | None = None
        self.started = False  # it said it is ready (else its end's reason has its last line)

    def send(self, request: bytes) -> ChildEnded | None:
        """Send a request (pickled by the driver: this direction is trusted); the child's end if
        it has ended."""
        if self.ended is None:
            try:
                self.conn.send_bytes(request)
            except OSError:
                return self.end()
        return self.ended

    def receive(self) -> bytes | Refused | ChildEnded:
        """The child's next answer, unread (at most ``MAX_REPLY_BYTES``), or its end."""
        if self.ended is not None:
            return self.ended
        try:
            answer = self.conn.recv_bytes(MAX_REPLY_BYTES)
        except OSError as exc:
            if str(exc) == "bad message length":  # longer than MAX_REPLY_BYTES: refused unread
                return Refused(f"a reply may not exceed {MAX_REPLY_BYTES} bytes")
            return self.end()
        except EOFError:
            return self.end()
        self.started = self.started or answer == READY
        return answer

    def end(self) -> ChildEnded:
        """Kill the child (and its process group), reap it, remove its scratch folder; its end."""
        if self.ended is None:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(self.process.pid, signal.SIGKILL)
            try:
                code: int | None = self.process.wait(EXIT_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                code = None
            reason = code_reason(code)
            self.output.join(1.0)
            if not self.started and self.output.last:  # why it could not start (a sandbox it cannot enter)
                reason = f"{reason}: {self.output.last}"[:300]
            with contextlib.suppress(OSError):
                self.conn.close()
            remove_scratch(self.scratch)
            self.ended = ChildEnded(reason)
        return self.ended


class RayWorker:
    """The actor: starts one sandboxed child (:class:`Child`) and relays every request to it,
    its answers unread. It never imports or runs plugin code itself."""

    def __init__(
        self, threads: int, env: dict[str, str], sandboxed: bool, plugins: dict[str, Any] | None = None
    ) -> None:
        os.environ.update(env)  # the child's plugin allow and block lists, the sandbox's extra folders
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver handles Ctrl-C and kills actors
        self.child = Child(threads, sandboxed, plugins or {})
        self.busy = False  # a task was sent and its answer is owed

    def ready(self) -> int | ChildEnded:
        """The child's pid once it built its registry, or its end (it could not start)."""
        answer = self.child.receive()
        if isinstance(answer, bytes) and answer == READY:
            return self.child.process.pid
        return answer if isinstance(answer, ChildEnded) else self.child.end()

    def prepare(self, task: bytes) -> bytes | Refused | ChildEnded | None:
        """Send ``task`` (a pickled ``("task", ExplainTask)``); ``None`` once the child built its
        explainer and model and starts the call (the answer comes from :meth:`run`), else its
        early answer (a constructor error)."""
        self.busy = True
        ended = self.child.send(task)
        if ended is not None:
            return ended
        answer = self.child.receive()
        if isinstance(answer, bytes) and answer == READY:
            return None
        self.busy = False
        return answer

    def run(self, task: bytes) -> bytes | Refused | ChildEnded:
        """The child's answer to ``task`` (sent now unless :meth:`prepare` did)."""
        if not self.busy:
            ended = self.child.send(task)
            if ended is not None:
                return ended
        self.busy = False
        answer = self.child.receive()
        if isinstance(answer, bytes) and answer == READY:
            answer = self.child.receive()
        return answer

    def describe(self, spec: bytes) -> bytes | Refused | ChildEnded:
        """The child's answer to ``spec`` (a pickled ``("describe", ExplainerSpec)``)."""
        return self.child.send(spec) or self.child.receive()

    def close(self) -> None:
        """End the child and remove its scratch folder (before the actor is killed)."""
        self.child.end()
