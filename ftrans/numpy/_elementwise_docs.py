"""Docstrings of the functions `_elementwise` makes with factories, by name."""

DOCS = {
}
