"""Every `python -m tools.<name>` command: flags, one library call, output. The top
floor with the three scripts: nothing imports it."""
