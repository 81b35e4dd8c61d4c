"""Heuristic rewards, the weighted combination, the DW-GRPO weight update and
the choice of the best candidate. Expected values are worked out by hand in
the comments."""

import math
import unittest

from curate_trainer import scoring


class WordsTest(unittest.TestCase):
    def test_words_lowercase_and_split_cjk(self):
        self.assertEqual(scoring.words("Hello, WORLD! it's 42"), ["hello", "world", "it", "s", "42"])
        # Each CJK character is a word of its own; Latin runs stay whole.
        self.assertEqual(scoring.words("我爱Paris"), ["我", "爱", "paris"])

    def test_content_words_drop_stopwords(self):
        self.assertEqual(scoring.content_words("What is the capital of France?"), {"capital", "france"})


class HeuristicTest(unittest.TestCase):
    def test_relevance(self):
        # query content words {capital, france}; both appear in the answer.
        self.assertEqual(scoring.relevance("What is the capital of France?", "Paris is the capital of France."), 1.0)
        # {reset, router, password}; only "router" is in the answer: 1/3.
        self.assertAlmostEqual(scoring.relevance("How do I reset my router password?", "Unplug the router."), 1 / 3)
        self.assertEqual(scoring.relevance("the of and", "anything"), 0.0)

    def test_faithfulness(self):
        # answer content words {unplug, router, wait}; context has unplug and router: 2/3.
        self.assertAlmostEqual(
            scoring.faithfulness("Unplug the router and wait.", "Unplug the router for ten seconds."), 2 / 3)
        self.assertEqual(scoring.faithfulness("", "context"), 0.0)

    def test_conciseness(self):
        self.assertAlmostEqual(scoring.conciseness("unplug the router first", 10), 0.6)  # 1 - 4/10
        self.assertEqual(scoring.conciseness("one two three four five six", 4), 0.0)  # clipped
        self.assertEqual(scoring.conciseness("", 0), 1.0)
        self.assertEqual(scoring.conciseness("word", 0), 0.0)

    def test_scores_with_context(self):
        s = scoring.heuristic_scores(
            query="How do I reset my router password?",
            answer="Unplug the router and wait.",
            context="Unplug the router for ten seconds, then hold the reset.",
            budget_words=100)
        self.assertAlmostEqual(s["rel"], 1 / 3)  # router of {reset, router, password}
        self.assertAlmostEqual(s["faith"], 2 / 3)  # unplug, router of {unplug, router, wait}
        self.assertAlmostEqual(s["conc"], 1 - 5 / 10)  # 5 answer words, 10 context words

    def test_scores_without_context_use_query_and_budget(self):
        s = scoring.heuristic_scores(query="Is Paris in France?", answer="Paris is in France",
                                     context="  ", budget_words=8)
        self.assertEqual(s["rel"], 1.0)  # {paris, france}
        self.assertEqual(s["faith"], 1.0)  # answer words all in the query
        self.assertAlmostEqual(s["conc"], 1 - 4 / 8)


class CombineTest(unittest.TestCase):
    def test_signed_weights(self):
        # R = 0.35*chain + 0.25*emergency - 0.15*risk_penalty + 0.25*teacher
        #   = 0.28 + 0.15 - 0.075 + 0.225 = 0.58
        scores = {"chain": 0.8, "emergency": 0.6, "risk_penalty": 0.5, "teacher": 0.9}
        weights = {"chain": 0.35, "emergency": 0.25, "risk_penalty": -0.15, "teacher": 0.25}
        self.assertAlmostEqual(scoring.combine(scores, weights), 0.58)

    def test_unweighted_scores_are_ignored(self):
        self.assertAlmostEqual(scoring.combine({"rel": 0.5, "extra": 9.0}, {"rel": 2.0}), 1.0)

    def test_missing_score_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "'rm'"):
            scoring.combine({"rel": 1.0}, {"rel": 1.0, "rm": 1.0})


class SlopeTest(unittest.TestCase):
    def test_least_squares_slope(self):
        self.assertAlmostEqual(scoring.slope([1, 3, 5]), 2.0)
        self.assertAlmostEqual(scoring.slope([0.2, 0.4, 0.6]), 0.2)
        # x mean 1, y mean 2: sum (x-1)(y-2) = -1*1 + 0 + 1*0 = -1; sum (x-1)^2 = 2 -> -0.5
        self.assertAlmostEqual(scoring.slope([3, 1, 2]), -0.5)
        self.assertEqual(scoring.slope([4, 4]), 0.0)

    def test_needs_two_points(self):
        with self.assertRaises(ValueError):
            scoring.slope([1.0])


# Slopes rel 0.2, faith 0, conc -0.3 at temperature 2 give exponents -0.1, 0, 0.15:
# exp: 0.904837418036, 1, 1.161834242728; sum 3.066671660764
# new = 3 * exp / sum: 0.885165597882, 0.978259276460, 1.136575125658
# weights = 0.8 * old + 0.2 * new with old rel 1, faith 1, conc 0.5:
EXPECTED = {"rel": 0.977033119576381, "faith": 0.995651855292025, "conc": 0.627315025131594}


class DynamicWeightsTest(unittest.TestCase):
    def test_update_by_hand(self):
        history = {"rel": [0.2, 0.4, 0.6], "faith": [0.5, 0.5, 0.5], "conc": [0.9, 0.6, 0.3]}
        got = scoring.next_weights({"rel": 1.0, "faith": 1.0, "conc": 0.5}, history, window=5, temperature=2.0)
        for key, value in EXPECTED.items():
            self.assertAlmostEqual(got[key], value, places=12, msg=key)

    def test_window_uses_latest_values(self):
        history = {"rel": [9.0, 0.2, 0.4, 0.6], "faith": [-3.0, 0.5, 0.5, 0.5], "conc": [7.0, 0.9, 0.6, 0.3]}
        got = scoring.next_weights({"rel": 1.0, "faith": 1.0, "conc": 0.5}, history, window=3, temperature=2.0)
        for key, value in EXPECTED.items():
            self.assertAlmostEqual(got[key], value, places=12, msg=key)

    def test_stagnant_term_gains_weight(self):
        # Equal weights, one improving term and one flat: the flat one must end up heavier.
        got = scoring.next_weights({"a": 1.0, "b": 1.0}, {"a": [0.1, 0.9], "b": [0.5, 0.5]}, 5, 1.0)
        self.assertGreater(got["b"], got["a"])
        # The fresh weights sum to 3, so the total moves to 0.8*2 + 0.2*3 = 2.2.
        self.assertAlmostEqual(got["a"] + got["b"], 2.2)

    def test_tiny_temperature_does_not_overflow(self):
        got = scoring.next_weights({"a": 1.0, "b": 1.0}, {"a": [0.0, 1.0], "b": [1.0, 0.0]}, 5, 1e-6)
        # All of the fresh weight goes to the falling term: b = 0.8 + 0.2*3, a = 0.8.
        self.assertAlmostEqual(got["a"], 0.8)
        self.assertAlmostEqual(got["b"], 1.4)

    def test_record_waits_for_two_points(self):
        dw = scoring.DynamicWeights({"rel": 1.0, "faith": 1.0, "conc": 0.5}, window=5, temperature=2.0)
        self.assertEqual(dw.record({"rel": 0.2, "faith": 0.5, "conc": 0.9}), {"rel": 1.0, "faith": 1.0, "conc": 0.5})
        # Two points already have the slopes 0.2, 0 and -0.3 of the worked example.
        second = dw.record({"rel": 0.4, "faith": 0.5, "conc": 0.6})
        for key, value in EXPECTED.items():
            self.assertAlmostEqual(second[key], value, places=12, msg=key)
        # A third point on the same lines keeps the slopes, so the same fresh
        # weights are mixed into the moved ones: 0.8 * EXPECTED + 0.2 * fresh.
        third = dw.record({"rel": 0.6, "faith": 0.5, "conc": 0.3})
        for key, value in {"rel": 0.958659615237486, "faith": 0.992173339525645, "conc": 0.729167045236869}.items():
            self.assertAlmostEqual(third[key], value, places=12, msg=key)
        self.assertEqual(dw.history["conc"], [0.9, 0.6, 0.3])

    def test_fixed_weights_never_move(self):
        dw = scoring.DynamicWeights({"rel": 0.35, "faith": -0.15}, dynamic=False)
        for values in ({"rel": 0.1, "faith": 0.9}, {"rel": 0.9, "faith": 0.1}, {"rel": 0.5, "faith": 0.5}):
            self.assertEqual(dw.record(values), {"rel": 0.35, "faith": -0.15})


class BestCandidateTest(unittest.TestCase):
    def test_highest_reward_first_on_tie_and_empty_skipped(self):
        self.assertEqual(scoring.best_candidate(["  ", "a", "b", "c"], [5.0, 1.0, 3.0, 3.0]), 2)

    def test_nothing_usable(self):
        self.assertIsNone(scoring.best_candidate(["", " \n"], [1.0, 2.0]))
        self.assertIsNone(scoring.best_candidate([], []))

    def test_nan_is_skipped(self):
        self.assertEqual(scoring.best_candidate(["a", "b"], [math.nan, -1.0]), 1)

    def test_mean_scores(self):
        got = scoring.mean_scores([{"rel": 1.0, "conc": 0.0}, {"rel": 0.5, "conc": 1.0}], ["rel", "conc"])
        self.assertEqual(got, {"rel": 0.75, "conc": 0.5})
        self.assertEqual(scoring.mean_scores([], ["rel"]), {"rel": 0.0})


if __name__ == "__main__":
    unittest.main()
