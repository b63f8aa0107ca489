"""Without Chromium the browser tests skip locally (saying how to install it) and fail under CI=true."""

from __future__ import annotations

import pytest

from . import conftest


def test_missing_chromium_skips_locally_and_fails_in_ci(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(
        pytest.skip.Exception, match=r"Chromium .* not installed; `apt-get install -y chromium graphviz`"
    ):
        conftest._require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"browser tests must run in CI: Chromium"):
        conftest._require_chromium()
