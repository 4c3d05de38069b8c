"""The README's Python snippets are what a new user pastes first: each name a line starts with must
be imported or assigned in one of them (or be a builtin), so a snippet run as written does not stop
at a NameError."""

import builtins
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_every_name_a_readme_snippet_starts_a_line_with_is_imported_or_assigned():
    blocks = python_blocks((REPO / "README.md").read_text())
    assert blocks, "the README has no ```python blocks"
    code = "\n".join(blocks)
    defined = set(dir(builtins))
    for names in re.findall(r"^\s*from\s+\S+\s+import\s+(.+)$", code, flags=re.M):
        defined |= {name.strip() for name in names.split("#")[0].split(",")}
    defined |= set(re.findall(r"^\s*([A-Za-z_]\w*)\s*=[^=]", code, flags=re.M))
    undefined = []
    for line in code.splitlines():
        statement = line.split("#")[0].strip()
        if not statement or statement.startswith(("from ", "import ")):
            continue
        first = re.match(r"[A-Za-z_]\w*", statement)
        if first and first.group(0) not in defined:
            undefined.append(line.strip())
    # names a reader supplies (their own newer table, their runs so far) are the snippets' placeholders
    undefined = [line for line in undefined if not re.match(r"(runs_with_new_evals|runs_so_far)\b", line)]
    assert not undefined, f"README snippets use names no snippet imports: {undefined}"
