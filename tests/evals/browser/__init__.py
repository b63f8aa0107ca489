"""The evaluation's browser tests, a package of their own: the shared Chromium fixture is
package-scoped, and Playwright's sync API keeps an event loop running in the main thread while it
lives, so it must end before the other evaluation tests call `asyncio.run()`."""
