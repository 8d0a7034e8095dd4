"""Small pieces every room uses. The bottom floor: imports nothing of the project."""
