#!/usr/bin/env bash
# Set up, check the import contracts, then run the test suite; arguments go to pytest.
# The suite runs in .venv, then tests/evals in .venv-evals (see below).
# Exit code: lint-imports' when a contract is broken (pyproject.toml [tool.importlinter]: an
# import the wrong way between the lab's layers fails the run before any test), else pytest's.
# Quiet (-q) unless the arguments choose a verbosity themselves: `test.sh -q` stays -q (with its
# summary line), never -qq.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Bytecode is cached for the suite even where PYTHONDONTWRITEBYTECODE is set (as on this project's
# machines): without it, every process the suite starts (kernels, killed-and-restarted children, Ray
# workers, the two pytest workers) compiled the lab from source (~40% of `import lab`), and pytest
# rewrote every test module's asserts again (half of a worker's collection). The caches go to the
# __pycache__ folders .gitignore names (docs/benchmarks.md "suite27d").
unset PYTHONDONTWRITEBYTECODE
bash scripts/setup.sh
lint_rc=0  # lint-imports, run by the venv's python (the console script is the same call)
lint_out=$(.venv/bin/python -c 'import sys; from importlinter.cli import lint_imports_command as c; sys.argv[0] = "lint-imports"; sys.exit(c())' \
    --no-cache --no-logo 2>&1) || lint_rc=$?
if [ "$lint_rc" -ne 0 ]; then
    printf '%s\n' "$lint_out" >&2
    echo "test.sh: lint-imports failed (exit $lint_rc), no tests were run: an import contract is broken (an import the wrong way between layers) or names a module that is gone; see above" >&2
    exit "$lint_rc"
fi
grep -E '^Contracts: ' <<<"$lint_out" | sed 's/^/lint-imports: /' >&2 || true
quiet=(-q)
for arg in "$@"; do
    case "$arg" in
        -q | -qq | --quiet | -v | -vv | -vvv | --verbose | --verbosity=*) quiet=() ;;
    esac
done
# The whole suite runs on two pytest-xdist workers (`-n 2 --dist loadgroup`: most of its time is
# real processes started and waited for, so two workers overlap the waiting; tests/xdist_groups.py
# keeps the browser tests on one worker and the Ray tests on one). A run of chosen paths, or one
# that says `-n` / `-p no:xdist` itself, is not split.
workers=(-n 2 --dist loadgroup)
for arg in "$@"; do
    case "$arg" in
        -n | -n* | --numprocesses* | --dist* | no:xdist) workers=() ;;
    esac
done
# tests/evals run in .venv-evals (the evals extra pins pydantic-ai-slim/pydantic-graph to
# pydantic-evals' version; docs/evaluate.md "Versions"), everything else in .venv on the newest.
# Paths under tests/evals: only .venv-evals runs. Other paths: only .venv. No path: both, in turn.
evals=0
paths=0
for arg in "$@"; do
    case "$arg" in
        tests/evals*) evals=1 ;;
        tests* | *.py | *::*) paths=1 ;;
    esac
done
if [ "$evals" -eq 1 ]; then
    exec .venv-evals/bin/python -m pytest "${quiet[@]}" "$@"
fi
if [ "$paths" -eq 1 ]; then
    exec .venv/bin/python -m pytest "${quiet[@]}" --ignore=tests/evals "$@"
fi
rc=0
.venv/bin/python -m pytest "${quiet[@]}" "${workers[@]}" --ignore=tests/evals "$@" || rc=$?
echo "test.sh: the evaluation tests (tests/evals) in .venv-evals" >&2
evals_rc=0
.venv-evals/bin/python -m pytest "${quiet[@]}" "${workers[@]}" -p no:cacheprovider "$@" tests/evals || evals_rc=$?
if [ "$rc" -ne 0 ]; then
    exit "$rc"
fi
exit "$evals_rc"
