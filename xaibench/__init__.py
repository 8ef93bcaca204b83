"""xaibench: an open benchmark harness for explainable-AI methods on image classifiers.

The facade for plugin authors: ``from xaibench import hookimpl``. Internal modules import from
the module that defines a name, never from this facade (see docs/architecture.md).
"""

from xaibench.plugins.hookspecs import hookimpl
from xaibench.version import __version__

__all__ = ["__version__", "hookimpl"]
