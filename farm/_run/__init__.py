"""A run from its options to its outputs: resolving options, set-up, execution, the console view, rescoring, the run's result. (Private, and not named run: farm.run is the public function.)"""

YOUNG_THRESHOLD = 100_000
"""The collector's first threshold (Python's default: 700) in a ``farm`` process and while a run's
cases run: a young pass every 700 allocations spent its time over objects that live as long as the
run (modules, models, the suite). Here, a leaf, so that the CLI sets it at start-up without
importing the run machinery."""
