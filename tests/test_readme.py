"""README's commands are the ones CI runs, and its code runs."""

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _bash_blocks():
    return re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.skipif(not (ROOT / ".ci" / "run").exists(), reason="not in a source checkout")
def test_ci_runs_the_readme_commands():
    commands = [ln for block in _bash_blocks() for ln in block.splitlines() if ln.strip()]
    assert len(commands) == 3  # install and demo, tests, docs
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in commands:
        assert command in ci_lines


@pytest.mark.skipif(not README.exists(), reason="not in a source checkout")
def test_readme_python_snippets_run_and_print_what_they_claim():
    for block in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, str(README), "exec"), {})
        # "print(...)  # text" in the README claims that text is printed
        for claim in re.findall(r"^print\(.*#\s*(.+)$", block, flags=re.M):
            assert claim.strip() in out.getvalue()
