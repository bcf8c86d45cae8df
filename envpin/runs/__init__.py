"""A user's own training command, run several times under envpin's hook: where two runs first differ
(`bisect`), how much of the run-to-run spread nondeterminism causes (`study`), what determinism costs (`cost`)."""
