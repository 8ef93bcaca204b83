"""The README `xaibench new-plugin` writes: no link to a page that may not exist, and it says which
environment its commands run in."""

from __future__ import annotations

import re
from pathlib import Path

from xaibench import scaffold
from xaibench.scaffold import scaffold_plugin


def test_scaffold_templates_link_no_web_page() -> None:
    """Links cannot be checked offline and the package index has no xaibench page: the templates name
    xaibench's own files instead."""
    for name in ("PYPROJECT", "MODULE", "TEST", "README"):
        template = getattr(scaffold, name).template
        assert not re.search(r"https?://|www\.|\]\(", template), f"{name} links a web page"


def test_scaffold_readme_says_which_environment(tmp_path: Path) -> None:
    readme = (scaffold_plugin("env-probe", tmp_path) / "README.md").read_text(encoding="utf-8")
    assert "`source XAIBENCH_CHECKOUT/.venv/bin/activate`" in readme
    assert "`XAIBENCH_CHECKOUT/.venv/bin/`" in readme
    assert "pip install -e ." in readme and "xaibench list explainers" in readme
    assert "`docs/writing-plugins.md` in xaibench's source tree" in readme
    assert (Path(__file__).resolve().parents[1] / "docs" / "writing-plugins.md").is_file()
