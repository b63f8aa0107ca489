"""The browser fixtures of tests/browser (JupyterLab, the shared Chromium, a page), declared once for
this package: package-scoped, they end with it, before the evaluation tests that run event loops."""

from tests.browser.conftest import browser, chromium, jupyter_server, page  # noqa: F401 - fixtures
