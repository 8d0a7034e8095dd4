"""One-off studies, run by hand from the repository's root as
`python -m experiments.<name>`: each asks one research question once (its dated record in
docs/studies/, its numbers in bench/RESULTS.md); tests run tiny versions of some.

The floor above bench/: a study may reuse a benchmark's measuring helpers and the
commands' seams; nothing imports a study, so none of them is part of the product.
"""
