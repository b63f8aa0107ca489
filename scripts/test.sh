#!/usr/bin/env bash
# Set up, then run the test suite; arguments go to pytest. Exit code is pytest's.
# Quiet (-q) unless the arguments choose a verbosity themselves: `test.sh -q` stays -q (with its
# summary line), never -qq.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
quiet=(-q)
for arg in "$@"; do
    case "$arg" in
        -q | -qq | --quiet | -v | -vv | -vvv | --verbose | --verbosity=*) quiet=() ;;
    esac
done
exec .venv/bin/python -m pytest "${quiet[@]}" "$@"
