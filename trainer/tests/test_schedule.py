"""Learning-rate schedules, checked against values worked out by hand."""

import unittest

from curate_trainer.schedule import lr_factor


class ScheduleTest(unittest.TestCase):
    def test_warmup_then_linear_decay(self):
        # 2 warmup steps then 8 decay steps: 1/2, 2/2, then 1 - k/8.
        got = [lr_factor(s, 2, 10, "linear") for s in range(10)]
        self.assertEqual(got, [0.5, 1.0, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125])

    def test_cosine(self):
        self.assertAlmostEqual(lr_factor(0, 0, 10, "cosine"), 1.0)
        self.assertAlmostEqual(lr_factor(5, 0, 10, "cosine"), 0.5)  # (1 + cos(pi/2)) / 2
        self.assertAlmostEqual(lr_factor(8, 0, 10, "cosine"), (1 + (-0.8090169943749475)) / 2)  # cos(0.8 pi)

    def test_constant(self):
        self.assertEqual([lr_factor(s, 3, 10, "constant") for s in (0, 2, 3, 9)], [1 / 3, 1.0, 1.0, 1.0])

    def test_unknown(self):
        with self.assertRaises(ValueError):
            lr_factor(0, 0, 1, "step")


if __name__ == "__main__":
    unittest.main()
