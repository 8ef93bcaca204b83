"""``python -m xaibench``: the ``xaibench`` command line, for when the script is not on PATH."""

from xaibench.cli import main

if __name__ == "__main__":
    main()
