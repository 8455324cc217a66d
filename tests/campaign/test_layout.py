"""The campaign layer stays in small parts (issue: one BO step, a thin façade)."""

import ast
import pathlib

import ppbo.campaign

CAMPAIGN = pathlib.Path(ppbo.campaign.__file__).parent
LOOP = CAMPAIGN.parent / "loop.py"


def _functions(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node.end_lineno - node.lineno + 1


def test_no_campaign_function_is_longer_than_about_80_lines():
    long = [
        f"{path.name}:{name} ({lines} lines)"
        for path in sorted(CAMPAIGN.glob("*.py"))
        for name, lines in _functions(path)
        if lines > 85
    ]
    assert not long, long


def test_optimizer_methods_delegate_and_loop_is_a_re_export():
    # the façade's methods hold no campaign logic: at most 30 lines of code
    # each, argument lists included
    tree = ast.parse((CAMPAIGN / "optimizer.py").read_text())
    (optimizer,) = [
        n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Optimizer"
    ]
    for method in optimizer.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        body = method.body
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        code = body[-1].end_lineno - body[0].lineno + 1 if body else 0
        assert code <= 30, f"Optimizer.{method.name} has {code} lines of code"
    assert len(LOOP.read_text().splitlines()) <= 50
