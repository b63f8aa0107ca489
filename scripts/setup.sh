#!/usr/bin/env bash
# Idempotent setup: Graphviz `dot` (when root and missing), the .venv, and the package with dev extras.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v dot >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing graphviz (dot)" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq graphviz >/dev/null
    else
        echo "setup: warning: Graphviz 'dot' is not installed (run as root, or install graphviz yourself); graph drawing needs it" >&2
    fi
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv" >&2
    python3 -m venv .venv
fi

.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
