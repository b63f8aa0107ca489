#!/usr/bin/env bash
# Set up, then open the quickstart notebook in JupyterLab; arguments go to `jupyter lab`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/jupyter lab notebooks/quickstart.ipynb "$@"
