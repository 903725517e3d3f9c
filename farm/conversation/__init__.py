"""One case from its first turn to its last: the runner, the session, awaiting-input detection, checkpoints, golden conversations, replay and the inputs digest."""
