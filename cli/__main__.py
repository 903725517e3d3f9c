"""``python -m farm.cli`` is ``farm``."""

from farm.cli.app import main

main()
