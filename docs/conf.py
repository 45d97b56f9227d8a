"""Sphinx configuration for kernelgd."""

import kernelgd

project = "kernelgd"
author = "the kernelgd developers"
release = version = kernelgd.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]
autosummary_generate = True
numpydoc_show_class_members = False
exclude_patterns = ["_build", "_bench_*.rst"]  # included by benchmarks.rst
html_theme = "pydata_sphinx_theme"
# Inherited scikit-learn docstrings (score, ...) point at scikit-learn's labels.
suppress_warnings = ["ref.ref"]
