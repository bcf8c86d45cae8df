"""Font-transfer model and its input pipeline."""
