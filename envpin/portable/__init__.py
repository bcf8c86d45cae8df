"""The standard-library core (Python 3.6+) that the probe, the runtime helper and the host share: versions
and NGC specs, image references, NGC tag selection, the device class and all-or-nothing file replacement.

Everything here travels into images inside envpin.pyz, so it imports nothing but the standard library and
nothing from the rest of envpin (tests/unit/test_layers.py holds it to that)."""
