"""Every `python -m tools.<name>` command: flags, one library call, output. The floor
with the three scripts, below bench/ and experiments/: no library package imports it."""
