#!/usr/bin/env bash
# Set up, then run the test suite; arguments go to pytest. Exit code is pytest's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
