#!/usr/bin/env bash
# Idempotent setup: Graphviz `dot` and Chromium (when root and missing), the .venv, and the package with dev extras.
# Safe to run again: the pip step is skipped while pyproject.toml is unchanged since the last install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# System packages: Graphviz `dot` draws graphs; Debian's Chromium runs the real-browser tests
# (Playwright drives /usr/bin/chromium; no browser is ever downloaded); Debian's PostgreSQL gives
# the store tests a throwaway server (initdb/pg_ctl under /usr/lib/postgresql/*/bin).
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing ${missing[*]} with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq -o Dpkg::Use-Pty=0 "${missing[@]}" >/dev/null
    else
        echo "setup: warning: ${missing[*]} missing and this is not root; install them (graphs need dot, browser tests need chromium, store tests need postgresql)" >&2
    fi
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv" >&2
    python3 -m venv .venv
fi

stamp=.venv/.graph-lab-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $PWD"  # editable installs point at this checkout
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] \
    || ! .venv/bin/python -c "import importlib.metadata as m; m.version('graph-lab'); m.version('pytest')" 2>/dev/null; then
    echo "setup: installing graph-lab and its dev extras into .venv" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
    echo "$want" > "$stamp"
fi

# The evaluation tests (tests/evals, notebooks/evaluate.ipynb) need the `evals` extra. pydantic-evals
# pins pydantic-ai-slim to its own version (2.62 today), below the newest the lab runs on in .venv,
# so it lives in a second venv with the whole dev set at that version (docs/evaluate.md "Versions").
# JupyterLab (from .venv) offers it as the kernel "Graph Lab (evals)", which evaluate.ipynb names.
if [ ! -x .venv-evals/bin/python ]; then
    echo "setup: creating .venv-evals (the evals extra: pydantic-evals and the pydantic-ai it pins)" >&2
    python3 -m venv .venv-evals
fi
if [ "$(cat .venv-evals/.graph-lab-installed 2>/dev/null)" != "$want" ] \
    || ! .venv-evals/bin/python -c "import importlib.metadata as m; m.version('graph-lab'); m.version('pydantic-evals')" 2>/dev/null; then
    echo "setup: installing graph-lab with its dev and evals extras into .venv-evals" >&2
    .venv-evals/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,evals]'
    echo "$want" > .venv-evals/.graph-lab-installed
fi
# rfc3987-syntax comes in through jupyter-events' `jsonschema[format-nongpl]`; jsonschema imports it
# eagerly, and it builds ~38 Earley parsers at import: ~1.2 s of CPU in every process that imports
# jsonschema (through `import ray`: every Ray worker, actor and agent; nbformat; JupyterLab), which made
# a Ray start ~3x slower here (docs/benchmarks.md "suite27d"). Without it jsonschema checks every format
# but `iri`/`iri-reference`, which no schema the lab, Jupyter or Ray uses asks for (jsonschema#1428).
for venv in .venv .venv-evals; do
    if "$venv/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('rfc3987_syntax') is None)" 2>/dev/null; then
        "$venv/bin/python" -m pip uninstall -q -y --disable-pip-version-check rfc3987-syntax
    fi
done
spec=.venv/share/jupyter/kernels/graphlab-evals
if [ ! -f "$spec/kernel.json" ] || ! grep -q "$PWD/.venv-evals/bin/python" "$spec/kernel.json"; then
    mkdir -p "$spec"
    printf '{"argv": ["%s", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "Graph Lab (evals)", "language": "python"}\n' \
        "$PWD/.venv-evals/bin/python" > "$spec/kernel.json"
fi
