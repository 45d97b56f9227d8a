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
    "sphinx_gallery.gen_gallery",
]
# The gallery runs every example when the docs build (matplotlib's Agg backend).
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": "/plot_",
    "within_subsection_order": "FileNameSortKey",
    "remove_config_comments": True,
    "show_memory": False,
    "abort_on_example_error": True,
}
autosummary_generate = True
numpydoc_show_class_members = False
exclude_patterns = ["_build", "_bench_*.rst"]  # included by benchmarks.rst
html_theme = "pydata_sphinx_theme"
# Inherited scikit-learn docstrings (score, ...) point at scikit-learn's labels.
suppress_warnings = ["ref.ref"]
