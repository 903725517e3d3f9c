"""A run from its options to its outputs: resolving options, set-up, execution, the console view, rescoring, the run's result. (Private, and not named run: farm.run is the public function.)"""
