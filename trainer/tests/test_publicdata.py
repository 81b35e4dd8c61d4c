"""The public-data helper: where it looks, and skip or fail when the folder
is missing."""

import os
import tempfile
import unittest
from pathlib import Path
from unittest import mock

import publicdata


class PublicDataTest(unittest.TestCase):
    def test_dir_is_beside_the_checkout(self):
        checkout = Path(__file__).resolve().parents[2]
        self.assertEqual(publicdata.DIR, checkout.parent / "shared" / "data")

    def test_missing_folder_skips_or_fails_in_ci(self):
        with tempfile.TemporaryDirectory() as tmp:
            missing = Path(tmp) / "shared" / "data"
            with mock.patch.object(publicdata, "DIR", missing):
                with mock.patch.dict(os.environ, {"CI": ""}):
                    with self.assertRaises(unittest.SkipTest) as ctx:
                        publicdata.path("hh-rlhf", "x.jsonl.gz")
                    self.assertIn(str(missing), str(ctx.exception))
                with mock.patch.dict(os.environ, {"CI": "true"}):
                    with self.assertRaises(AssertionError) as ctx:
                        publicdata.path("hh-rlhf", "x.jsonl.gz")
                    self.assertIn(str(missing), str(ctx.exception))

    def test_present_folder_gives_the_file_or_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "oasst").mkdir()
            (folder / "oasst" / "trees.jsonl").write_text("{}\n", encoding="utf-8")
            with mock.patch.object(publicdata, "DIR", folder):
                self.assertEqual(publicdata.path("oasst", "trees.jsonl"), folder / "oasst" / "trees.jsonl")
                with self.assertRaisesRegex(AssertionError, "does not exist"):
                    publicdata.path("oasst", "nothing.jsonl")


if __name__ == "__main__":
    unittest.main()
