"""The probe: ``python -m xaibench.plugins.probe FD DISTRIBUTION ENTRY_POINT...``.

Run by :mod:`xaibench.plugins.catalogue` in a fresh process, one per distribution. It enters the
worker sandbox (:mod:`xaibench.sandbox`: writes only a scratch folder, no TCP, no signal outside
itself) before it imports anything of the plugin, then imports the named entry points of that one
distribution, registers them in a registry of its own (no built-ins, no other plugin) and writes
their description, as JSON, to the descriptor ``FD``. Whatever the plugin does at import (exit,
raise, loop, patch xaibench) happens here, not in the runner.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from xaibench.sandbox import SandboxError, enter_sandbox, sandbox_enabled, silence_inherited_files, worker_writable


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _write(fd: int, description: dict[str, Any]) -> None:
    data = json.dumps(description).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


def main(argv: list[str]) -> int:
    fd, distribution, names = int(argv[0]), argv[1], argv[2:]
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the runner's to handle
    # the catalogue makes the scratch folder and removes it when the probe is done
    scratch = os.environ.get("XAIBENCH_PROBE_SCRATCH") or tempfile.mkdtemp(prefix="xaibench-probe-")
    os.environ["TMPDIR"] = tempfile.tempdir = scratch
    path = os.environ.get("XAIBENCH_PROBE_PATH")
    if path:
        sys.path[:] = json.loads(path)
    sandbox = "off"
    if sandbox_enabled():
        try:
            silence_inherited_files(keep=[fd])
            enter_sandbox(worker_writable(Path(scratch)), tcp_ports=())
            sandbox = "on"
        except SandboxError as exc:
            sandbox = f"unavailable: {exc}"
    from xaibench.plugins import catalogue, manager

    lines: list[str] = []
    manager.on_plugin_error = lines.append
    registry = manager.Registry(load_entry_points=False, builtins=False)
    from importlib import metadata

    wanted = set(names)
    plugins: list[dict[str, Any]] = []
    components: list[dict[str, Any]] = []
    for ep in sorted(metadata.entry_points(group=manager.ENTRY_POINT_GROUP), key=lambda e: e.name):
        if ep.name not in wanted or ep.name in registry.plugins:
            continue
        if ep.dist is not None and ep.dist.name != distribution:
            continue
        before = len(lines)
        status = registry.load_entry_point(ep)
        plugins.append(
            {
                "name": status.name,
                "source": status.source,
                "ok": status.ok,
                "error": status.error,
                "lines": lines[before:],
            }
        )
    for kind in manager.KIND_BASES:
        for entry in registry.entries(kind):
            info = entry.info
            item: dict[str, Any] = {"kind": kind, "name": info.name, "plugin": info.plugin}
            if kind in catalogue.STAND_IN_KINDS:
                try:
                    item["data"] = catalogue.component_data(kind, entry.cls)
                except BaseException as exc:  # noqa: BLE001 - the plugin's class attributes and suite code
                    item["error"] = manager.describe_failure(exc)
            components.append(item)
    _write(
        fd,
        {"format": catalogue.FORMAT, "sandbox": sandbox, "plugins": plugins, "components": components},
    )
    return 0


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
