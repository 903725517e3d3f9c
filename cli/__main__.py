"""``python -m cli`` is ``farm``."""

from cli.app import main

main()
