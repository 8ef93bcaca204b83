"""The run lifecycle's public face: the names code outside :mod:`xaibench.runner` may use.

Inside, the runner has three parts: the life cycle of a run (this folder's modules: configuration,
track loading, explaining, scoring, records, the summary), process isolation
(:mod:`xaibench.runner.isolation`: the workers that run plugin code, their sandbox, the zygote,
the wire, the Ray relay) and storage (:mod:`xaibench.runner.storage`: the record store, part
files, the explanation cache). Every other package module imports the runner through the names
below and nothing else (``tests/test_layers.py`` fails otherwise); tests and benches may reach in.

The names are resolved on first use (PEP 562), so importing a worker module (which imports this
package first) loads nothing it does not need: a sandboxed child stays light until it is confined.

- **A run**: :class:`Runner`, :class:`RunConfig`, :func:`make_run_config` (the one way to build a
  configuration), :class:`RunOptions` (the machine options every run takes; defaults
  :data:`RUN_DEFAULTS`), :class:`RunResult`, :func:`resolve_explainers`, :func:`resolve_tracks`,
  :func:`environment`, and the run options' tables (:data:`API`, :data:`CLI`, :class:`Spelling`,
  :data:`EXECUTORS`, :data:`DEFAULT_EXECUTOR`, :data:`DEFAULT_DEVICE`, ...).
- **Tracks**: :func:`load_track`, :func:`build_track`, :func:`open_dataset`.
- **Explaining and scoring**: :func:`explain_track`, :func:`explainer_handles`, :func:`score_track`,
  :func:`check_maps`, :func:`score_folder`.
- **The cache scope**: :func:`explanation_cache` (a workdir's explanation cache, keyed by this
  machine's runtime), :func:`runtime_key`, :func:`digest`.
- **Records and their store**: :class:`RecordStore`, :func:`journals`, :func:`track_journal`,
  :func:`record_files`, :func:`convert`, :func:`export`, the record schema and key version, and the
  columnar table's reading helpers.
- **Reading a run**: :func:`health_lines`, :func:`chance_warning`, :class:`ExampleSet`,
  :func:`distribution_summary`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

PUBLIC: dict[str, str] = {
    # a run
    "Runner": "xaibench.runner.run",
    "RunResult": "xaibench.runner.run",
    "resolve_explainers": "xaibench.runner.run",
    "resolve_tracks": "xaibench.runner.run",
    "environment": "xaibench.runner.run",
    "explanation_cache": "xaibench.runner.run",
    "RunConfig": "xaibench.runner.config",
    "RunOptions": "xaibench.runner.config",
    "RUN_DEFAULTS": "xaibench.runner.config",
    "make_run_config": "xaibench.runner.config",
    "ADHOC_SUITE": "xaibench.runner.config",
    "API": "xaibench.runner.config",
    "CLI": "xaibench.runner.config",
    "Spelling": "xaibench.runner.config",
    "parameter_mapping": "xaibench.runner.config",
    "run_outputs": "xaibench.runner.config",
    "suite_tracks": "xaibench.runner.config",
    "data_dir": "xaibench.runner.config",
    "check_device": "xaibench.runner.config",
    "DEFAULT_DEVICE": "xaibench.runner.config",
    "DEVICE_CHOICES": "xaibench.runner.config",
    "EXECUTORS": "xaibench.runner.config",
    "DEFAULT_EXECUTOR": "xaibench.runner.config",
    "CLI_EXECUTORS": "xaibench.runner.config",
    "IN_PROCESS_EXECUTORS": "xaibench.runner.config",
    # tracks
    "load_track": "xaibench.runner.track",
    "build_track": "xaibench.runner.track",
    "open_dataset": "xaibench.runner.isolation.dataset_worker",
    # explaining and scoring
    "explain_track": "xaibench.runner.explain",
    "explainer_handles": "xaibench.runner.executors",
    "score_track": "xaibench.runner.evaluate",
    "check_maps": "xaibench.runner.score",
    "score_folder": "xaibench.runner.score",
    # the cache scope and keys
    "runtime_key": "xaibench.runner.records",
    "KEY_VERSION": "xaibench.runner.records",
    "RECORD_SCHEMA": "xaibench.runner.records",
    "digest": "xaibench.runner.storage.cache",
    "ExplanationCache": "xaibench.runner.storage.cache",
    # records and their store
    "RecordStore": "xaibench.runner.storage.store",
    "journals": "xaibench.runner.storage.store",
    "track_journal": "xaibench.runner.storage.store",
    "record_files": "xaibench.runner.storage.store",
    "convert": "xaibench.runner.storage.records_tools",
    "export": "xaibench.runner.storage.records_tools",
    "RECORDS_TABLE": "xaibench.runner.storage.columnar",
    "decode_records": "xaibench.runner.storage.columnar",
    "hex_key_bytes": "xaibench.runner.storage.columnar",
    "key_array": "xaibench.runner.storage.columnar",
    # reading a run
    "health_lines": "xaibench.runner.health",
    "chance_warning": "xaibench.runner.chance",
    "ExampleSet": "xaibench.runner.examples",
    "distribution_summary": "xaibench.runner.distributions",
}
"""Public name -> the runner module that defines it (its one definition)."""

ALIASES: dict[str, str] = {"RECORDS_TABLE": "SCHEMA", "decode_records": "decode"}
"""Public names spelled otherwise in their module (a bare ``SCHEMA`` or ``decode`` says too little
outside the columnar module)."""

__all__ = [
    "ADHOC_SUITE",
    "API",
    "CLI",
    "CLI_EXECUTORS",
    "DEFAULT_DEVICE",
    "DEFAULT_EXECUTOR",
    "DEVICE_CHOICES",
    "EXECUTORS",
    "IN_PROCESS_EXECUTORS",
    "KEY_VERSION",
    "RECORDS_TABLE",
    "RECORD_SCHEMA",
    "RUN_DEFAULTS",
    "ExampleSet",
    "ExplanationCache",
    "RecordStore",
    "RunConfig",
    "RunOptions",
    "RunResult",
    "Runner",
    "Spelling",
    "build_track",
    "chance_warning",
    "check_device",
    "check_maps",
    "convert",
    "data_dir",
    "decode_records",
    "digest",
    "distribution_summary",
    "environment",
    "explain_track",
    "explainer_handles",
    "explanation_cache",
    "export",
    "health_lines",
    "hex_key_bytes",
    "journals",
    "key_array",
    "load_track",
    "make_run_config",
    "open_dataset",
    "parameter_mapping",
    "record_files",
    "resolve_explainers",
    "resolve_tracks",
    "run_outputs",
    "runtime_key",
    "score_folder",
    "score_track",
    "suite_tracks",
    "track_journal",
]
"""The public names, one per entry of :data:`PUBLIC` (a literal, so linters and editors read it)."""


def __getattr__(name: str) -> Any:
    module = PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'xaibench.runner' has no public name {name!r}")
    # read from its module at each use, never copied here: a name replaced in its module (a test's
    # monkeypatch) is the one every caller sees
    return getattr(importlib.import_module(module), ALIASES.get(name, name))


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # the same names for type checkers and editors
    from xaibench.runner.chance import chance_warning
    from xaibench.runner.config import (
        ADHOC_SUITE,
        API,
        CLI,
        CLI_EXECUTORS,
        DEFAULT_DEVICE,
        DEFAULT_EXECUTOR,
        DEVICE_CHOICES,
        EXECUTORS,
        IN_PROCESS_EXECUTORS,
        RUN_DEFAULTS,
        RunConfig,
        RunOptions,
        Spelling,
        check_device,
        data_dir,
        make_run_config,
        parameter_mapping,
        run_outputs,
        suite_tracks,
    )
    from xaibench.runner.distributions import distribution_summary
    from xaibench.runner.evaluate import score_track
    from xaibench.runner.examples import ExampleSet
    from xaibench.runner.executors import explainer_handles
    from xaibench.runner.explain import explain_track
    from xaibench.runner.health import health_lines
    from xaibench.runner.isolation.dataset_worker import open_dataset
    from xaibench.runner.records import KEY_VERSION, RECORD_SCHEMA, runtime_key
    from xaibench.runner.run import (
        Runner,
        RunResult,
        environment,
        explanation_cache,
        resolve_explainers,
        resolve_tracks,
    )
    from xaibench.runner.score import check_maps, score_folder
    from xaibench.runner.storage.cache import ExplanationCache, digest
    from xaibench.runner.storage.columnar import SCHEMA as RECORDS_TABLE
    from xaibench.runner.storage.columnar import decode as decode_records
    from xaibench.runner.storage.columnar import hex_key_bytes, key_array
    from xaibench.runner.storage.records_tools import convert, export
    from xaibench.runner.storage.store import RecordStore, journals, record_files, track_journal
