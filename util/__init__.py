"""Small pieces every room uses: typed hyperparameter objects, one-line command errors,
progress lines, atomic files, the start-up and the CPU it reads. The bottom floor:
imports nothing of the project."""
