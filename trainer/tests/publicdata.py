"""The real public data sets that tests use as acceptance data.

They live in shared/data beside the checkout (CI keeps them there); a clone on
its own has no such folder, so a test that needs them skips with one line
naming the folder, unless CI=true, where a missing folder is a failure. The
Go tests follow the same rule (internal/publicdata).
"""

import os
import unittest
from pathlib import Path

# This file is <checkout>/trainer/tests/publicdata.py.
DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def path(*parts):
    """The path of a file inside the public data folder.

    When the folder is missing this raises unittest.SkipTest, or
    AssertionError with CI=true, so it serves in a test method and in
    setUpClass alike."""
    if not DIR.is_dir():
        if os.environ.get("CI") == "true":
            raise AssertionError(f"public test data missing: {DIR} (CI keeps shared/ beside the checkout)")
        raise unittest.SkipTest(f"public test data not found at {DIR} (it sits beside the checkout in CI)")
    file = DIR.joinpath(*parts)
    if not file.exists():
        raise AssertionError(f"public test data: {file} does not exist")
    return file
