#!/usr/bin/env bash
# Set up, then open the quickstart notebook in JupyterLab; arguments go to `jupyter lab`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
extra=()
if [ "$(id -u)" -eq 0 ]; then
    extra+=(--allow-root)  # containers often run as root; JupyterLab refuses to without this flag
fi
exec .venv/bin/jupyter lab notebooks/quickstart.ipynb "${extra[@]}" "$@"
