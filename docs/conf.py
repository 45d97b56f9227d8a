"""Sphinx configuration for kernelgd."""

import kernelgd

project = "kernelgd"
author = "the kernelgd developers"
release = version = kernelgd.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax served from the built docs: maths renders offline
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
exclude_patterns = ["_build"]
html_theme = "pydata_sphinx_theme"
html_title = "kernelgd"  # the navbar shows this; "kernelgd 0.1.0 documentation" was cut off
# API pages are titled by the short name (KernelGDRegressorCV, not kernelgd.KernelGDRegressorCV)
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["kernelgd.css"]
# Inherited scikit-learn docstrings (score, ...) point at scikit-learn's labels.
suppress_warnings = ["ref.ref"]
# Top-level pages have no sub-pages to list: without the empty left sidebar, wide tables get the room.
html_sidebars = {"*": []}
