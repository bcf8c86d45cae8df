"""Probe reports read on the host: validated, compared field by field, classified by what a difference
breaks."""
