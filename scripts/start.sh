#!/usr/bin/env bash
# Set up, then open JupyterLab on the repository root with the quickstart notebook focused.
# The root is the repository, so /lab/tree/notebooks/... links work and docs/ can be browsed;
# each notebook's kernel still runs in the notebook's own directory (its store: notebooks/.graphlab/).
# `--notebook` (first argument) opens Jupyter Notebook 7 instead of JupyterLab, on the same notebook.
# Other arguments go to `jupyter lab` / `jupyter notebook` (e.g. --no-browser, --port 8890).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
app=lab
url=/lab/tree/notebooks/quickstart.ipynb
setting=--LabApp.default_url
if [ "${1:-}" = "--notebook" ]; then
    shift
    app=notebook
    url=/notebooks/notebooks/quickstart.ipynb
    setting=--JupyterNotebookApp.default_url
fi
bash scripts/setup.sh
extra=()
if [ "$(id -u)" -eq 0 ]; then
    extra+=(--allow-root)  # containers often run as root; Jupyter refuses to without this flag
fi
exec .venv/bin/jupyter "$app" --ServerApp.root_dir="$PWD" "$setting=$url" "${extra[@]}" "$@"
