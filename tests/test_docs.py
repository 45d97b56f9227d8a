"""The user-facing pages: generated where they quote figures, runnable where they show code.

The pages' code itself runs as doctests (pyproject's --doctest-glob=*.rst over docs/).
"""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GENERATED = {"sg_execution_times.rst"}  # written by sphinx-gallery at build time, not committed
pytestmark = pytest.mark.skipif(not DOCS.is_dir(), reason="not in a source checkout")


def _doc_pages():
    return sorted(p for p in DOCS.glob("*.rst") if p.name not in GENERATED)


def _user_pages():
    pages = _doc_pages() + sorted((ROOT / "examples").glob("*.py"))
    return pages + [ROOT / "examples" / "README.rst", ROOT / "README.md"]


def _report():
    spec = importlib.util.spec_from_file_location("report", ROOT / "benchmarks" / "report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    return report


def test_benchmarks_page_is_what_report_writes():
    report = _report()
    committed = (DOCS / "benchmarks.rst").read_text()
    assert committed == report.page(), "run: python benchmarks/report.py --out docs/benchmarks.rst"


def test_report_tables_escape_lone_bullet_characters():
    # Regression: a cell of a lone "-" (a missing log-loss) rendered as an empty bullet list, "•"
    table = _report().rst_table(["a", "b"], [["x", "-"], ["*", "+"]])
    assert table.splitlines()[3:5] == ["x   \\-", "\\*  \\+"]
    docutils = pytest.importorskip("docutils.core")  # with the docs extra: the table as Sphinx reads it
    from docutils.nodes import bullet_list, entry

    tree = docutils.publish_doctree(table)
    assert not list(tree.findall(bullet_list))
    assert [e.astext() for e in tree.findall(entry)] == ["a", "b", "x", "-", "*", "+"]


def test_report_sections_name_a_machine_other_than_the_pages():
    # Regression: the page's intro named one processor while some sections' figures came from another
    report = _report()
    other = dict(report.load(report.PAGE_MACHINE)["machine"], cpu="Another CPU")
    report._read_machines[:] = [other]
    assert "These figures come from another machine of the same size: Another CPU" in report.section("T", "text.")
    report._read_machines[:] = [report.load(report.PAGE_MACHINE)["machine"], other]
    assert "Some of these figures come from another machine" in report.section("T", "text.")
    report.load(report.PAGE_MACHINE)
    assert "another machine" not in report.section("T", "text.")


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: p.name)
def test_user_pages_carry_no_development_history(page):
    text = page.read_text()
    # commit hashes: hex words of 7 to 40 characters with a digit and a letter
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"\d", w) and re.search("[a-f]", w)]
    assert not hashes, hashes
    assert not re.search(r"\bissues? ?#?\d|\bissue's\b|\bcommit\b", text, flags=re.I)


@pytest.mark.parametrize("page", _doc_pages(), ids=lambda p: p.name)
def test_python_in_docs_is_doctest(page):
    """Code shown as a plain literal block would never run: Python must be written as >>> lines."""
    text = page.read_text()
    assert not re.search(r"\.\. code(-block)?:: *(python|pycon)", text)
    for block in re.findall(r"::\n\n((?:    .*\n|\n)+)", text):
        assert not re.search(r"^\s+(from \w+ import|import \w+)", block, flags=re.M), block


def test_no_page_is_left_out_of_the_docs():
    index = (DOCS / "index.rst").read_text()
    for page in _doc_pages():
        if page.stem != "index":
            assert f"\n   {page.stem}\n" in index, page.name
