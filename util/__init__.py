"""Small pieces every phase uses: hyperparameter objects, progress lines, atomic files."""
