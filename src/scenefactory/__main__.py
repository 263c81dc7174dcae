"""``python -m scenefactory ...``: the same command line as the ``scenefactory`` script."""

from scenefactory.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
