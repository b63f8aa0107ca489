"""The browser fixtures of tests/browser (JupyterLab, the shared Chromium, a page of its own), declared once for
this package: package-scoped, they end with it, before the evaluation tests that run event loops."""

from tests.browser.conftest import browser, chromium, fresh_page, jupyter_server  # noqa: F401 - fixtures
