"""`make dist` builds wheels for xaibench and every first-party plugin; they install offline into a
fresh virtual environment, and that environment's own `xaibench` runs a small suite.

The wheels are installed with ``--no-index --no-deps`` (nothing is downloaded). Their heavy
dependencies (torch, timm, scikit-image, ...) are not installed again: the fresh environment sees
them through a ``.pth`` file naming a folder of symbolic links to the test environment's
site-packages entries, without xaibench and its plugins. A plain ``.pth`` line pointing at that
site-packages would also expose its (editable) xaibench and plugins, and ``--system-site-packages``
would expose the base interpreter's packages rather than this environment's. So what the fresh
environment runs is the wheels' code and metadata only, found through their entry points.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PLUGIN_DIRS = sorted(p.parent for p in (REPO / "plugins").glob("*/pyproject.toml"))
# what `make dist` must not see: outputs, caches, environments, and other builds
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", ".tox", "__pycache__", "*.egg-info", "build", "dist", ".xaibench", "leaderboard",
    "submissions", "test-artifacts", ".pytest_cache", ".ruff_cache",
)  # fmt: skip
OWN = re.compile(r"^(xaibench|__editable__|_?_?editable___xaibench)", re.IGNORECASE)


def _dist_name(project: Path) -> str:
    return tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]


def _wheel_name(dist: str) -> str:
    """``xaibench-captum`` -> ``xaibench_captum`` (a wheel file's normalised name)."""
    return re.sub(r"[-_.]+", "_", dist).lower()


def _run(cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def _dependency_links(target: Path) -> Path:
    """A folder of links to this environment's site-packages entries, except xaibench and its plugins."""
    target.mkdir()
    purelib = Path(sysconfig.get_paths()["purelib"])
    for entry in purelib.iterdir():
        if OWN.match(entry.name) or entry.suffix == ".pth" or entry.name == "__pycache__":
            continue
        (target / entry.name).symlink_to(entry)
    return target


def _offline_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "XAIBENCH_"))}
    env.pop("VIRTUAL_ENV", None)
    cache = os.environ.get("XAIBENCH_CACHE")  # keep the trained shapes weights where the user keeps them
    if cache:
        env["XAIBENCH_CACHE"] = cache
    env.update(HF_HUB_OFFLINE="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


def _copy_checkout(tmp: Path) -> Path:
    """A copy of the checkout's sources: setuptools builds in place, and the checkout stays as it is."""
    source = tmp / "source"
    shutil.copytree(REPO, source, ignore=COPY_IGNORE, symlinks=True)
    return source


def test_metadata_builds_without_a_warning(tmp_path: Path) -> None:
    """What a user installing from a fresh clone sees: pip's full build output, without --quiet."""
    source = _copy_checkout(tmp_path)
    projects = [source, *(source / "plugins" / p.name for p in PLUGIN_DIRS)]
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir",
         str(tmp_path / "wheels"), *map(str, projects)],
        env=_offline_env(), cwd=tmp_path,
    )  # fmt: skip
    output = built.stdout + built.stderr
    assert built.returncode == 0, output[-3000:]
    warnings = [line.strip() for line in output.splitlines() if re.search(r"warn|deprecat", line, re.IGNORECASE)]
    assert not warnings, "\n".join(warnings)
    assert len(list((tmp_path / "wheels").glob("*.whl"))) == len(projects)


def test_editable_installs_print_no_warning(tmp_path: Path) -> None:
    """What `make install` does, the editable install of xaibench and every plugin, into a fresh
    environment: pip's full output has no warning (setuptools warns at every editable install of a
    flat layout unless the project sets ``package-dir`` so that a plain ``.pth`` serves)."""
    source = _copy_checkout(tmp_path)
    fresh = tmp_path / "fresh"
    _run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], env=_offline_env(), cwd=tmp_path)
    (site,) = fresh.glob("lib/python*/site-packages")
    # setuptools (the build backend, no build isolation offline) and the rest, as in the wheel test
    (site / "_xaibench_test_dependencies.pth").write_text(f"{_dependency_links(tmp_path / 'deps')}\n")
    projects = [source, *(source / "plugins" / p.name for p in PLUGIN_DIRS)]
    editable = [arg for project in projects for arg in ("-e", str(project))]
    python = str(fresh / "bin" / "python")
    installed = _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-build-isolation", *editable],
        env=_offline_env(), cwd=tmp_path,
    )  # fmt: skip
    output = installed.stdout + installed.stderr
    assert installed.returncode == 0, output[-3000:]
    warnings = [line.strip() for line in output.splitlines() if re.search(r"warn|deprecat", line, re.IGNORECASE)]
    assert not warnings, "\n".join(warnings)
    pth = sorted(p.name for p in site.glob("__editable__*.pth"))
    assert len(pth) == len(projects), pth


def test_runtime_dependencies_leave_out_imgaug() -> None:
    """imgaug (no import under NumPy 2; pulls opencv, matplotlib, Shapely) only ships the quokka's files."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [re.split(r"[ <>=!~;\[]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]]
    assert "imgaug" not in names and "torch" in names, names
    assert project["license"] == "Apache-2.0"
    for plugin in PLUGIN_DIRS:
        assert tomllib.loads((plugin / "pyproject.toml").read_text(encoding="utf-8"))["project"]["license"] == (
            "Apache-2.0"
        ), plugin.name


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """``make dist`` on a copy of the checkout, with this environment's Python as ``$(VENV)/bin/python``."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed (the README's set-up needs it too)")
    venv = Path(sys.prefix)
    if not (venv / "bin" / "python").is_file():
        pytest.skip(f"{venv} has no bin/python (make dist runs $(VENV)/bin/python)")
    source = _copy_checkout(tmp_path_factory.mktemp("dist"))
    built = _run(["make", "--no-print-directory", "dist", f"VENV={venv}"], env=_offline_env(), cwd=source)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return sorted((source / "dist").glob("*.whl"))


@pytest.mark.slow
def test_make_dist_builds_a_wheel_per_distribution(wheels: list[Path]) -> None:
    expected = {_wheel_name(_dist_name(p)) for p in [REPO, *PLUGIN_DIRS]}
    assert len(PLUGIN_DIRS) >= 3, PLUGIN_DIRS
    assert {w.name.split("-")[0] for w in wheels} == expected, [w.name for w in wheels]
    assert len(wheels) == len(expected)


def _fresh_venv(wheels: list[Path], tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path, Path]:
    """A fresh environment in ``tmp_path/venv`` with the wheels installed offline and the dependencies
    linked; returns (venv, its python, its site-packages)."""
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     env=env, cwd=tmp_path).stdout.strip())  # fmt: skip
    assert site.is_dir() and site.is_relative_to(venv), site
    (site / "_xaibench_test_dependencies.pth").write_text(f"{_dependency_links(tmp_path / 'deps')}\n")

    # the test environment's pip installs into the fresh one: no index, no dependencies
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps", "--quiet",
         *map(str, wheels)],
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv, python, site


@pytest.mark.slow
def test_wheels_install_offline_into_a_fresh_venv_and_run_a_suite(wheels: list[Path], tmp_path: Path) -> None:
    env = _offline_env()
    venv, python, site = _fresh_venv(wheels, tmp_path, env)

    probe = "import xaibench, xaibench_rise; print(xaibench.__file__, xaibench_rise.__file__)"
    where = _run([str(python), "-c", probe], env=env, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert all(Path(f).is_relative_to(site) for f in where.stdout.split()), where.stdout

    xaibench = venv / "bin" / "xaibench"
    assert xaibench.is_file(), "the wheel's console script was not installed"
    listed = _run([str(xaibench), "list", "plugins", "--json"], env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr[-3000:]
    plugins = {p["distribution"]: p for p in json.loads(listed.stdout)}
    for project in PLUGIN_DIRS:
        status = plugins.get(_dist_name(project))
        assert status is not None and status["ok"], (project.name, status)

    work = tmp_path / "work"
    run = _run(
        [str(xaibench), "run", "--suite", "default", "-e", "sobel", "-e", "gradcam", "--track", "shapes",
         "--limit", "8", "--workdir", str(work), "--submissions", str(tmp_path / "submissions"),
         "--leaderboard-dir", str(tmp_path / "leaderboard"), "--quiet"],
        env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = [json.loads(line) for line in (work / "results" / "shapes.jsonl").read_text().splitlines()]
    by_explainer = {r["explainer"]["name"]: r["explainer"]["distribution"] for r in records}
    assert by_explainer == {"sobel": "xaibench", "gradcam": "xaibench-gradcam"}, by_explainer
    assert all(r["value"] is not None or r["na_reason"] for r in records)
    summary = json.loads((work / "summary.json").read_text(encoding="utf-8"))
    for name in ("sobel", "gradcam"):
        explained = summary["tracks"]["shapes"]["explainers"][name]["explained"]
        assert explained["computed"] + explained["cached"] == 8 and explained["failed"] == 0, (name, explained)
    assert (tmp_path / "leaderboard" / "leaderboard.csv").is_file()
    assert not (tmp_path / ".xaibench").exists(), "the run wrote outside --workdir"


@pytest.mark.slow
def test_scaffolded_plugin_in_a_fresh_venv_is_ranked_against_the_record(wheels: list[Path], tmp_path: Path) -> None:
    """Issue 41: a plugin made by ``xaibench new-plugin``, installed into a fresh environment, is
    ranked against the record by ``xaibench run -e NAME --suite record-v1 --track shapes`` run from a
    folder outside the repository, and only that explainer is explained (the record's explainers come
    from the bundle shipped in the wheel)."""
    name, suite = "wheel-probe", "record-v1"
    env = _offline_env(XAIBENCH_CACHE=str(tmp_path / "cache"), COLUMNS="250")
    venv, python, site = _fresh_venv(wheels, tmp_path, env)
    xaibench = venv / "bin" / "xaibench"

    # xaibench and its record bundle come from the wheel, never from the checkout
    probe = f"from xaibench.publish.record_bundle import bundle_file; print(bundle_file({suite!r}))"
    where = _run([str(python), "-c", probe], env=env, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    bundle = Path(where.stdout.strip())
    assert bundle.is_file() and bundle.is_relative_to(site), bundle

    made = _run([str(xaibench), "new-plugin", name, "--dest", str(tmp_path / "plugin")], env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    project = tmp_path / "plugin" / f"xaibench-{name}"
    # setuptools, the build backend, is reachable through the dependency links (no build isolation offline)
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps",
         "--no-build-isolation", "--quiet", str(project)],
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    module = _run([str(python), "-c", f"import xaibench_{name.replace('-', '_')} as m; print(m.__file__)"],
                  env=env, cwd=tmp_path)  # fmt: skip
    assert module.returncode == 0 and Path(module.stdout.strip()).is_relative_to(site), module.stdout + module.stderr

    work = tmp_path / "elsewhere"
    work.mkdir()
    assert not work.resolve().is_relative_to(REPO), work
    run = _run(
        [str(xaibench), "run", "-e", name, "--suite", suite, "--track", "shapes", "--quiet"],
        env=env, cwd=work, timeout=1200,
    )  # fmt: skip
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    joined = re.search(rf"ranked against the record of {suite}: (\d+) of its submissions in submissions/", output)
    assert joined is not None, output[-3000:]
    record_files = sorted(p.name for p in (work / "submissions").glob("*.json") if p.name != f"{name}.json")
    assert int(joined[1]) == len(record_files) >= 2, (joined[0], record_files)
    assert (work / "submissions" / f"{name}.json").is_file()

    records = [json.loads(x) for x in (work / ".xaibench" / "results" / "shapes.jsonl").read_text().splitlines()]
    assert records and {r["explainer"]["name"] for r in records} == {name}  # only the new explainer was explained
    assert {r["explainer"]["distribution"] for r in records} == {f"xaibench-{name}"}

    rows = json.loads((work / "leaderboard" / "leaderboard.json").read_text(encoding="utf-8"))["rows"]
    for metric in ("iou", "deletion"):
        ranks = {r["explainer"]: r["rank"] for r in rows if r["track"] == "shapes" and r["metric"] == metric}
        ranked = {e for e, rank in ranks.items() if rank is not None}
        assert {name, "center", "deeplift"} <= ranked, (metric, ranks)
