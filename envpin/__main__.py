"""`python -m envpin` runs the CLI."""

from envpin.cli import main

main()
