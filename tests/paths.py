"""Where the tests find the repository and their fixtures, wherever under tests/ a test file lives."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
