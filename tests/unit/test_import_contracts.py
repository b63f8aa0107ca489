"""The import contracts (issue 26, "Done when" 1): `lint-imports` keeps every contract in
pyproject.toml, counts imports made inside functions and leaves out `if TYPE_CHECKING:` ones
(as ../shared/tools/architecture.py does), and scripts/test.sh fails on a broken contract before
running any test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"]
CONTRACT_IDS = {"layers", "engines", "stores", "library", "drawing", "views-no-sql", "bench-apart", "bench-one-way"}


def _settings() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]


def test_lint_imports_keeps_every_contract() -> None:
    """issue 26 item 1: the contracts in pyproject.toml hold on this tree."""
    assert {c["id"] for c in _settings()["contracts"]} >= CONTRACT_IDS
    out = subprocess.run([*LINT, "--no-cache", "--no-logo"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Contracts: {len(_settings()['contracts'])} kept, 0 broken." in out.stdout


def test_contracts_see_imports_inside_functions_not_type_checking_ones(tmp_path: Path) -> None:
    """issue 26 item 1: with the project's settings, a lazy import inside a function breaks a
    contract (it still runs) and an `if TYPE_CHECKING:` import does not (it never runs)."""
    pkg = tmp_path / "toypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("VALUE = 1\n")
    (pkg / "lazy.py").write_text("def f():\n    from . import high\n\n    return high.VALUE\n")
    (pkg / "typed.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from . import high\n\n\ndef f(h: 'high') -> None:\n    pass\n"
    )
    s = _settings()
    flags = "\n".join(
        f"{key} = {'true' if s[key] else 'false'}" for key in ("include_external_packages", "exclude_type_checking_imports")
    )
    contracts = "".join(
        f'\n[[tool.importlinter.contracts]]\nname = "{m} must not import high"\ntype = "forbidden"\n'
        f'source_modules = ["toypkg.{m}"]\nforbidden_modules = ["toypkg.high"]\n'
        for m in ("lazy", "typed")
    )
    config = tmp_path / "contracts.toml"
    config.write_text(f'[tool.importlinter]\nroot_packages = ["toypkg"]\n{flags}\n{contracts}')
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [*LINT, str(config), "--no-cache", "--no-logo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "lazy must not import high BROKEN" in out.stdout
    assert "typed must not import high KEPT" in out.stdout
    assert "toypkg.lazy -> toypkg.high (l.2)" in out.stdout


FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-c" ]; then  # lint-imports
    echo "Contracts: 1 kept, {broken} broken."
    exit {lint_rc}
fi
echo "pytest ran"
exit 3
"""


def _layout(tmp_path: Path, lint_rc: int) -> Path:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "test.sh", root / "scripts" / "test.sh")
    (root / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\nexit 0\n")  # set up already
    (root / ".venv" / "bin").mkdir(parents=True)
    fake = root / ".venv" / "bin" / "python"
    fake.write_text(FAKE_PYTHON.format(broken=1 if lint_rc else 0, lint_rc=lint_rc))
    fake.chmod(0o755)
    return root


def test_test_sh_stops_on_a_broken_contract(tmp_path: Path) -> None:
    """issue 26 item 1: a broken contract fails scripts/test.sh with lint-imports' exit code, and no test runs."""
    out = subprocess.run(["bash", "scripts/test.sh", "-q"], cwd=_layout(tmp_path, 1), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "pytest ran" not in out.stdout
    assert "1 broken" in out.stderr and "no tests were run" in out.stderr


def test_test_sh_exit_code_is_pytests_when_contracts_hold(tmp_path: Path) -> None:
    """issue 26 item 1: with every contract kept, scripts/test.sh runs pytest and exits with its code."""
    out = subprocess.run(["bash", "scripts/test.sh", "-q"], cwd=_layout(tmp_path, 0), capture_output=True, text=True, timeout=60)
    assert out.returncode == 3
    assert out.stdout.strip() == "pytest ran"
    assert "lint-imports: Contracts: 1 kept, 0 broken." in out.stderr
