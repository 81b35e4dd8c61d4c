"""The early-stop rules (curate_trainer.guards) and the reward model's
evaluation figures (curate_trainer.evaluation), on numbers worked by hand.
Standard library only."""

import math
import unittest

from curate_trainer import evaluation
from curate_trainer.guards import EarlyStopping, KLBound, RewardHacking


class EarlyStoppingTest(unittest.TestCase):
    def test_stops_after_patience_evaluations_without_improvement(self):
        early = EarlyStopping(patience=2, threshold=0.01)
        self.assertEqual(early.record(1, 1.0), (True, None))
        # 0.995 is lower, but not by more than the threshold: no improvement.
        self.assertEqual(early.record(2, 0.995), (False, None))
        self.assertEqual(early.record(3, 0.98), (True, None))  # 0.98 < 1.0 - 0.01; the count starts again
        self.assertEqual(early.record(4, 0.99), (False, None))
        improved, reason = early.record(5, 1.2)
        self.assertFalse(improved)
        self.assertEqual(reason, "validation loss has not improved for 2 evaluations (best 0.98 after epoch 3, "
                                 "now 1.2); the model from epoch 3 is kept")
        self.assertEqual((early.best, early.best_epoch), (0.98, 3))

    def test_no_patience_never_stops(self):
        early = EarlyStopping(patience=0)
        early.record(1, 1.0)
        for epoch in range(2, 10):
            self.assertEqual(early.record(epoch, 2.0), (False, None))
        self.assertEqual(early.best_epoch, 1)

    def test_missing_or_nan_loss_is_ignored(self):
        early = EarlyStopping(patience=1)
        self.assertEqual(early.record(1, None), (False, None))
        self.assertEqual(early.record(2, math.nan), (False, None))
        self.assertEqual(early.record(3, 0.5), (True, None))


class KLBoundTest(unittest.TestCase):
    def test_bound(self):
        kl = KLBound(0.5)
        self.assertIsNone(kl.check(3, 0.4))
        self.assertIsNone(kl.check(3, 0.5))  # at the bound is within it
        self.assertEqual(kl.check(3, 0.625), "KL divergence from the reference reached 0.625 after step 3, above "
                                             "the bound 0.5; the adapter from step 2, the last within it, is kept")
        self.assertIn("the starting adapter", kl.check(1, 0.7))


class RewardHackingTest(unittest.TestCase):
    def test_reward_up_heldout_down_stops(self):
        guard = RewardHacking(patience=2, tolerance=0.05)
        self.assertEqual(guard.record(0, None, 0.5), (True, None))  # before training
        guard.start_reward(0.3)  # the first step's samples come from the same adapter
        # Held-out 0.48 is below the best 0.5, but by less than the tolerance.
        self.assertEqual(guard.record(10, 0.4, 0.48), (False, None))
        self.assertEqual(guard.record(20, 0.5, 0.40), (False, None))  # one bad check
        improved, reason = guard.record(30, 0.6, 0.41)  # two in a row
        self.assertFalse(improved)
        self.assertEqual(reason, "reward hacking: the training reward rose from 0.3 to 0.6 while the held-out score "
                                 "fell from 0.5 to 0.41 (2 checks in a row); the adapter from step 0, the best "
                                 "held-out score, is kept")

    def test_falling_reward_is_not_hacking(self):
        guard = RewardHacking(patience=1, tolerance=0.0)
        guard.record(0, None, 0.5)
        guard.start_reward(0.3)
        # Both fell: a worse policy, not one gaming its reward.
        self.assertEqual(guard.record(10, 0.2, 0.1), (False, None))

    def test_a_good_check_resets_the_count(self):
        guard = RewardHacking(patience=2, tolerance=0.0)
        guard.record(5, 0.2, 0.5)
        self.assertEqual(guard.record(10, 0.3, 0.4), (False, None))
        self.assertEqual(guard.record(15, 0.3, 0.6), (True, None))  # a new best
        self.assertEqual(guard.record(20, 0.4, 0.5), (False, None))
        self.assertIsNotNone(guard.record(25, 0.5, 0.5)[1])
        self.assertIn("rose from 0.3 to 0.5", guard.record(30, 0.5, 0.5)[1])


class EvaluationTest(unittest.TestCase):
    def test_pearson(self):
        # x 1..4, y 2, 4, 5, 9: deviations (-1.5, -0.5, 0.5, 1.5) and (-3, -1, 0, 4);
        # Sxy = 4.5 + 0.5 + 0 + 6 = 11, Sxx = 5, Syy = 26, r = 11 / sqrt(130) = 0.964764.
        self.assertAlmostEqual(evaluation.pearson([1, 2, 3, 4], [2, 4, 5, 9]), 0.964764, places=6)
        self.assertIsNone(evaluation.pearson([1, 1, 1], [1, 2, 3]))
        self.assertIsNone(evaluation.pearson([1], [2]))

    def test_calibration_bins(self):
        # Margins 0, ln 3 and -ln 3 give p = 0.5, 0.75 and 0.25 for the chosen reply
        # (outcome 1) and 0.5, 0.25 and 0.75 read the other way (outcome 0):
        #   bin [0.2, 0.3): 0.25 (1), 0.25 (0): predicted 0.25, observed 0.5
        #   bin [0.5, 0.6): 0.5 (1), 0.5 (0):   predicted 0.5,  observed 0.5
        #   bin [0.7, 0.8): 0.75 (1), 0.75 (0): predicted 0.75, observed 0.5
        # Expected calibration error: 2/6 * 0.25 + 2/6 * 0 + 2/6 * 0.25 = 0.166667.
        bins, error = evaluation.calibration([0.0, math.log(3), -math.log(3)])
        self.assertEqual(len(bins), 10)
        self.assertEqual([b["count"] for b in bins], [0, 0, 2, 0, 0, 2, 0, 2, 0, 0])
        self.assertEqual((bins[2]["lower"], bins[2]["upper"]), (0.2, 0.3))
        for i, predicted in ((2, 0.25), (5, 0.5), (7, 0.75)):
            self.assertAlmostEqual(bins[i]["predicted"], predicted, places=9)
            self.assertAlmostEqual(bins[i]["observed"], 0.5, places=9)
        self.assertIsNone(bins[0]["predicted"])
        self.assertIsNone(bins[0]["observed"])
        self.assertAlmostEqual(error, 1 / 6, places=9)

    def test_a_sure_model_fills_the_end_bins(self):
        # sigmoid(40) rounds to 1.0 in floating point: it belongs to the last bin.
        bins, error = evaluation.calibration([40.0, 40.0])
        self.assertEqual((bins[9]["count"], bins[9]["observed"]), (2, 1.0))
        self.assertEqual((bins[0]["count"], bins[0]["observed"]), (2, 0.0))
        self.assertAlmostEqual(error, 0.0, places=9)
        bins, error = evaluation.calibration([])
        self.assertIsNone(error)
        self.assertEqual(sum(b["count"] for b in bins), 0)


if __name__ == "__main__":
    unittest.main()
