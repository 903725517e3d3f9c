"""The ``farm`` command line (typer): parses options and calls the same functions a notebook would."""
