"""Thin commands over the rooms (`python -m tools.<name>`): flags, a library call, output."""
