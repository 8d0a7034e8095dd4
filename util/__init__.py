"""Small pieces every phase uses: typed hyperparameter objects, progress lines, atomic
files, run locks."""
