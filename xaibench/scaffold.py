"""``xaibench new-plugin``: write a ready-to-install explainer plugin distribution.

:func:`scaffold_plugin` creates ``<dest>/xaibench-<name>/`` with a ``pyproject.toml``
declaring the ``xaibench`` entry point, a module with one working explainer built on
:mod:`xaibench.kit` (gradient x input, to be replaced by your method), tests that use the
testing kit xaibench ships, :mod:`xaibench.testing` (the ``register_plugin``,
``xaibench_registry`` and ``tiny_track`` fixtures, the contract checks), and a README. The
module imports nothing from xaibench but :mod:`xaibench.kit`, its tests nothing but the kit and
:mod:`xaibench.testing`. In the environment xaibench is installed in (``.venv/bin/`` of a
checkout set up with ``make``)::

    .venv/bin/xaibench new-plugin my-method --dest .
    .venv/bin/pip install -e xaibench-my-method
    .venv/bin/pytest xaibench-my-method
    .venv/bin/xaibench list explainers          # my-method, distribution xaibench-my-method 0.1.0
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from string import Template

import click

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")

PYPROJECT = Template("""\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "The $name explainer for xaibench"
readme = "README.md"
requires-python = ">=3.11"
license = "Apache-2.0"
dependencies = ["xaibench>=0.1", "numpy", "torch"]

[project.entry-points.xaibench]
$name = "$module"

[tool.setuptools]
packages = ["$module"]
package-dir = { "" = "." }  # editable installs use a plain .pth (no setuptools warning)

[tool.pytest.ini_options]
testpaths = ["tests"]
""")

MODULE = Template('''\
"""$dist: the ``$name`` explainer for xaibench (registered via the ``xaibench`` entry point)."""

from typing import Any, ClassVar

from xaibench.kit import ExplainContext, Explainer, Model, Param, Register, as_inputs, hookimpl, input_gradients

__version__ = "0.1.0"


class $cls(Explainer):
    """Gradient x input of the target logit, summed over colour channels.

    A template: replace ``explain`` with your method. Higher = more evidence for the
    target class. ``absolute``: return the magnitude (default) or the signed value.
    """

    name = "$name"
    version = "0.1.0"  # bump whenever the maps change: it keys the explanation cache
    description = "Gradient x input, summed over channels (template from xaibench new-plugin)"
    licence = "Apache-2.0"
    needs = ("gradients",)
    default_params: ClassVar[dict[str, Any]] = {"absolute": True}
    param_specs: ClassVar[dict[str, Param]] = {"absolute": Param(bool)}  # checked when the explainer is built

    def explain(self, model: Model, inputs: Any, targets: Any, *, seed: int = 0, context: ExplainContext | None = None):
        # inputs: normalised (B, 3, S, S) tensor; targets: (B,) class indices; return (B, S, S) maps
        x = as_inputs(inputs)
        maps = (input_gradients(model, x, targets) * x).sum(dim=1)  # the model's parameters stay untouched
        return (maps.abs() if self.params["absolute"] else maps).cpu().numpy()


@hookimpl
def register_explainers(register: Register) -> None:
    register($cls)
''')

TEST = Template('''\
"""Tests for $dist with xaibench's testing kit: its fixtures (no import needed) and contract checks."""

import numpy as np
import pytest
from xaibench.testing.contract import assert_explainer_contract

import $module


def test_registers_the_explainer(register_plugin, xaibench_registry):
    status = register_plugin($module, name="$name")  # added to the test's registry, removed afterwards
    assert "explainer:$name" in status.components
    assert xaibench_registry.create("explainer", "$name").params == {"absolute": True}


def test_explains_the_tiny_track(tiny_track):
    maps = tiny_track.run($module.$cls())  # checks the maps as the runner does
    assert maps.shape == (4, 32, 32)
    assert (maps >= 0).all() and maps.max() > 0


def test_signed_maps_sum_to_gradient_x_input(tiny_track):
    signed = tiny_track.run($module.$cls(absolute=False))
    assert (signed < 0).any()
    np.testing.assert_allclose(np.abs(signed), tiny_track.run($module.$cls()), rtol=1e-6)


def test_meets_the_explainer_contract(tiny_track):
    # the model left untouched, global random generators untouched, deterministic
    assert_explainer_contract($module.$cls, tiny_track)


def test_rejects_bad_parameters():
    with pytest.raises(ValueError, match="'absolute' must be a boolean"):
        $module.$cls(absolute="maybe")
    with pytest.raises(ValueError, match="unknown parameter"):
        $module.$cls(colour=1)
''')

README = Template("""\
# $dist

The `$name` explainer for xaibench, made with `xaibench new-plugin $name`.

Use the Python environment xaibench is installed in. With xaibench's `make` set-up that is
the `.venv/` of its checkout: `source XAIBENCH_CHECKOUT/.venv/bin/activate` first, or
prefix each command with `XAIBENCH_CHECKOUT/.venv/bin/`. Then, in this folder:

    pip install -e .            # registers the `xaibench` entry point `$name`
    pytest                      # runs tests/ with the fixtures xaibench ships
    xaibench list explainers    # shows `$name` with distribution $dist 0.1.0

Edit `$module/__init__.py`: replace `$cls.explain` (it computes gradient x input) with
your method, declare its parameters in `default_params` and their rules in `param_specs`
(checked when the explainer is built), and bump `version` whenever the maps change (it keys
the cache). `xaibench.kit` has everything the plugin needs (the types, the hook marker,
inputs, targets, gradients, seeds, batched forwards) and `xaibench.testing` everything its
tests need; `docs/writing-plugins.md` in xaibench's source tree has every hook and the
explainer contract.

Licence: Apache-2.0.
""")


def plugin_names(name: str) -> dict[str, str]:
    """The names a plugin called ``name`` uses: distribution ``xaibench-<name>``, module
    ``xaibench_<name>``, entry point and explainer ``<name>``, class ``<Name>Explainer``.
    A leading ``xaibench-`` in ``name`` is dropped."""
    base = name.strip().lower()
    base = base.removeprefix("xaibench-")
    if not NAME_PATTERN.match(base):
        raise ValueError(
            f"plugin name {name!r} is not valid: use lowercase letters, digits and single hyphens, "
            "starting with a letter (e.g. 'my-method')"
        )
    cls = "".join(part.capitalize() for part in base.split("-")) + "Explainer"
    return {
        "name": base,
        "dist": f"xaibench-{base}",
        "module": "xaibench_" + base.replace("-", "_"),
        "cls": cls,
    }


def scaffold_plugin(name: str, dest: Path) -> Path:
    """Write the plugin distribution ``<dest>/xaibench-<name>/`` and return its path.

    Raises ``ValueError`` for an invalid name and ``FileExistsError`` if the folder
    exists and is not empty (nothing is overwritten).
    """
    names = plugin_names(name)
    root = Path(dest) / names["dist"]
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise FileExistsError(f"{root}: already exists and is not an empty folder; choose another --dest or name")
    files = {
        root / "pyproject.toml": PYPROJECT,
        root / "README.md": README,
        root / names["module"] / "__init__.py": MODULE,
        root / "tests" / f"test_{names['module']}.py": TEST,
    }
    for path, template in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.substitute(names), encoding="utf-8")
    return root


def next_steps(root: Path) -> str:
    """What ``xaibench new-plugin`` prints after writing ``root``: one command a line, the path
    quoted for the shell, so every command can be copied whole."""
    quoted = shlex.quote(str(root))
    return "\n".join(
        (
            f"created {root}",
            "next, in the environment xaibench is installed in:",
            f"  pip install -e {quoted}",
            f"  pytest {quoted}",
            "  xaibench list explainers",
        )
    )


def echo_next_steps(root: Path) -> None:
    """Print :func:`next_steps` as it is: plain ``click.echo``, never re-wrapped to the terminal's
    width (a wrapped command breaks when pasted)."""
    click.echo(next_steps(root))
