#!/usr/bin/env bash
# Set up, then open JupyterLab on the repository root with the quickstart notebook focused.
# The root is the repository, so /lab/tree/notebooks/... links work and docs/ can be browsed;
# each notebook's kernel still runs in the notebook's own directory (its store: notebooks/.graphlab/).
# Arguments go to `jupyter lab` (e.g. --no-browser, --port 8890).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
extra=()
if [ "$(id -u)" -eq 0 ]; then
    extra+=(--allow-root)  # containers often run as root; JupyterLab refuses to without this flag
fi
exec .venv/bin/jupyter lab --ServerApp.root_dir="$PWD" \
    --LabApp.default_url=/lab/tree/notebooks/quickstart.ipynb "${extra[@]}" "$@"
