"""``python -m xaibench.cli``: the command line, as ``xaibench``."""

from xaibench.cli import main

main()
