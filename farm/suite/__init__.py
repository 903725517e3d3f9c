"""What a run is given: loading and validating suites, resolving `-i` into one."""
