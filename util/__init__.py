"""Small pieces every room uses: typed hyperparameter objects, one-line command errors,
progress lines, atomic files, run locks. The bottom floor: imports nothing of the
project."""
