"""Reading and checking suites: the loader, the checks of a case on its own, and of a suite against the config."""
