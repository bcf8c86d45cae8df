"""Renderers: one function per result type, printing to the console they are given.

Results and tables go to stdout (so `envpin catalog > file` and pipes work); progress, warnings and
errors go to stderr. Modules here are imported only by the command that needs them.
"""
