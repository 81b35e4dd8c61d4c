"""The policy-optimisation math of GRPO and PPO (curate_trainer.losses and
curate_trainer.rl) on tiny tensors whose expected values are worked out by
hand in the comments, and a tiny pure-PyTorch model with a switchable
adapter that learns, through rl.PolicyOptimizer, to write the replies its
reward prefers.

These need torch alone: `make trainer-math` runs them under the trainer's
environment, beside test_losses.py.
"""

import contextlib
import math
import os
import sys
import unittest

try:
    import torch
except ImportError as e:
    # Under CI=true the trainer's environment is there, and a missing torch is a failure.
    if e.name != "torch" or os.environ.get("CI") == "true":
        raise
    raise unittest.SkipTest(
        f"torch is not installed for {sys.executable}; `make trainer-test` runs these "
        "under the trainer's environment (make trainer-env)") from None

from curate_trainer import losses, rl
from curate_trainer.chat import IGNORE

LN_11_107 = 2.4076059644  # ln(e² + e + 1): log-softmax of [2, 1, 0] is [-0.407606, -1.407606, -2.407606]
LN_3 = 1.0986122887


def t(rows):
    return torch.tensor(rows, dtype=torch.float32)


class TokenLogprobTest(unittest.TestCase):
    def test_per_token_values_and_mask(self):
        # The logits of test_losses.py's test_labelled_logprobs_on_given_logits: position t
        # predicts token t + 1.
        logits = t([[[100.0, -100.0, 7.0], [2.0, 1.0, 0.0], [0.0, 0.0, 0.0]],
                    [[0.0, math.log(3), 0.0], [50.0, -50.0, 0.0], [9.0, 9.0, -9.0]]])
        labels = torch.tensor([[IGNORE, IGNORE, 2, 0], [IGNORE, 1, IGNORE, IGNORE]])
        lp, mask = losses.token_logprobs(logits, labels)
        # Row 0: position 0 predicts a prompt token (not counted); position 1 gives token 2
        # log-softmax([2, 1, 0])[2] = -2.407606; position 2 gives token 0: -ln 3 = -1.098612.
        # Row 1: position 0 gives token 1: log-softmax([0, ln 3, 0])[1] = ln 0.6 = -0.510826.
        self.assertEqual(mask.tolist(), [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
        want = [[0.0, -LN_11_107, -LN_3], [math.log(0.6), 0.0, 0.0]]
        for got_row, want_row in zip(lp.tolist(), want):
            for got, w in zip(got_row, want_row):
                self.assertAlmostEqual(got, w, places=5)
        # Summed, they are labelled_logprobs.
        self.assertTrue(torch.allclose(lp.sum(-1), losses.labelled_logprobs(logits, labels)))

    def test_masked_mean(self):
        values, mask = t([[1.0, 3.0, 100.0], [6.0, 100.0, 100.0]]), t([[1, 1, 0], [1, 0, 0]])
        # Over all three masked values: (1 + 3 + 6) / 3 = 3.333333; per sequence first:
        # (2 + 6) / 2 = 4.
        self.assertAlmostEqual(losses.masked_mean(values, mask).item(), 10 / 3, places=6)
        self.assertAlmostEqual(losses.masked_mean(values, mask, per_sequence=True).item(), 4.0, places=6)


class GroupAdvantageTest(unittest.TestCase):
    def test_normalised_within_each_group(self):
        # Group 1 is 1, 2, 3, 6: mean 3, deviations -2, -1, 0, 3; the sample variance is
        # (4 + 1 + 0 + 9) / 3 = 4.666667, std 2.160247, plus eps 1e-4 = 2.160347. So the
        # advantages are -2 / 2.160347 = -0.925777, -0.462889, 0 and 3 / 2.160347 = 1.388666.
        # Group 2 is 5, 5, 5, 5: every reply as good as the others, advantages 0.
        got = losses.group_advantages(t([1, 2, 3, 6, 5, 5, 5, 5]), 4).tolist()
        for g, w in zip(got, [-0.925777, -0.462889, 0.0, 1.388666, 0, 0, 0, 0]):
            self.assertAlmostEqual(g, w, places=5)

    def test_groups_must_divide(self):
        with self.assertRaises(ValueError):
            losses.group_advantages(t([1, 2, 3]), 2)


class KLTest(unittest.TestCase):
    def test_k3_estimator(self):
        # d = log ref - log pi. pi -1, ref -1.5: d = -0.5, e^-0.5 + 0.5 - 1 = 0.106531.
        # pi -2, ref -1: d = 1, e - 1 - 1 = 0.718282. Equal: 0.
        got = losses.kl_estimate(t([-1.0, -2.0, -3.0]), t([-1.5, -1.0, -3.0])).tolist()
        for g, w in zip(got, [0.106531, 0.718282, 0.0]):
            self.assertAlmostEqual(g, w, places=5)


class ClippedObjectiveTest(unittest.TestCase):
    def setUp(self):
        # Two sequences of two tokens, epsilon 0.2; sequence B's second token is padding.
        # A (advantage +1): ratios 1.5 and 0.9; B (advantage -2): ratio 0.5, then padding.
        self.old = t([[-1.0, -1.0], [-1.0, -1.0]])
        self.logprobs = (self.old + t([[math.log(1.5), math.log(0.9)], [math.log(0.5), math.log(3.0)]])
                         ).requires_grad_(True)
        self.adv = t([1.0, -2.0])
        self.mask = t([[1, 1], [1, 0]])

    def test_per_sequence_loss_and_clip_fraction(self):
        loss, fraction = losses.clipped_policy_loss(self.logprobs, self.old, self.adv, self.mask, 0.2)
        # A, token 1: min(1.5 * 1, clip(1.5) = 1.2 * 1) = 1.2, loss -1.2 (clipped: ratio > 1.2, A > 0)
        # A, token 2: min(0.9, 0.9) = 0.9, loss -0.9;             sequence A: -1.05
        # B, token 1: min(0.5 * -2 = -1.0, 0.8 * -2 = -1.6) = -1.6, loss 1.6 (clipped: ratio < 0.8, A < 0)
        #                                                           sequence B: 1.6
        # Mean of the sequences: (-1.05 + 1.6) / 2 = 0.275; clipped tokens: 2 of 3.
        self.assertAlmostEqual(loss.item(), 0.275, places=6)
        self.assertAlmostEqual(fraction.item(), 2 / 3, places=6)
        # Only A's second token has a gradient: the clip removes the others'. d/d log pi of
        # -ratio * A is -ratio * A = -0.9, averaged over A's 2 tokens and the 2 sequences: -0.225.
        loss.backward()
        got = self.logprobs.grad.tolist()
        for g, w in zip(got[0] + got[1], [0.0, -0.225, 0.0, 0.0]):
            self.assertAlmostEqual(g, w, places=6)

    def test_token_mean_and_kl_penalty(self):
        loss, _ = losses.clipped_policy_loss(self.logprobs, self.old, self.adv, self.mask, 0.2, per_sequence=False)
        # Over the three tokens: (-1.2 - 0.9 + 1.6) / 3 = -0.166667.
        self.assertAlmostEqual(loss.item(), -1 / 6, places=6)
        kl = t([[0.1, 0.3], [0.2, 9.0]])
        loss, _ = losses.clipped_policy_loss(self.logprobs, self.old, self.adv, self.mask, 0.2, kl=kl, kl_coef=0.5)
        # 0.5 * KL adds (0.05 + 0.15) / 2 = 0.1 to A and 0.1 to B: (-0.95 + 1.7) / 2 = 0.375.
        self.assertAlmostEqual(loss.item(), 0.375, places=6)

    def test_ratio_one_is_the_plain_policy_gradient(self):
        # With the old policy equal to the new one nothing is clipped and the loss is -mean(A).
        loss, fraction = losses.clipped_policy_loss(self.old, self.old, t([1.0, 3.0]), self.mask, 0.2)
        self.assertAlmostEqual(loss.item(), -2.0, places=6)
        self.assertEqual(fraction.item(), 0.0)


class PPOTest(unittest.TestCase):
    def test_token_rewards(self):
        # kl_coef 0.1. Row 0 (mask 1 1 1): log pi - log ref = 0.5, -0.2, 0.1, so -0.05, 0.02,
        # -0.01, and the score 1.0 on the last token: 0.99. Row 1 (mask 0 1 0): only token 1,
        # -0.1 * 0.4 + 2.0 = 1.96.
        logprobs, ref = t([[0.5, -0.2, 0.1], [9.0, 0.4, 9.0]]), torch.zeros(2, 3)
        got = losses.ppo_token_rewards(t([1.0, 2.0]), logprobs, ref, t([[1, 1, 1], [0, 1, 0]]), 0.1).tolist()
        for g, w in zip(got[0] + got[1], [-0.05, 0.02, 0.99, 0.0, 1.96, 0.0]):
            self.assertAlmostEqual(g, w, places=6)

    def test_gae(self):
        # gamma 1, lambda 0.95. Row 0: rewards 0, 0, 1, values 0.5, 0.6, 0.7 (padding after):
        #   t2: delta = 1 - 0.7 = 0.3 (nothing follows),   A2 = 0.3
        #   t1: delta = 0 + 0.7 - 0.6 = 0.1,               A1 = 0.1 + 0.95 * 0.3 = 0.385
        #   t0: delta = 0 + 0.6 - 0.5 = 0.1,               A0 = 0.1 + 0.95 * 0.385 = 0.46575
        #   returns A + V: 0.96575, 0.985, 1.0
        # Row 1: a prompt token first (mask 0), rewards 0, 2 on tokens 1 and 2, values 1.0, 0.5:
        #   t2: delta = 2 - 0.5 = 1.5, A2 = 1.5; t1: delta = 0 + 0.5 - 1.0 = -0.5,
        #   A1 = -0.5 + 0.95 * 1.5 = 0.925; returns 1.925, 2.0.
        rewards = t([[0, 0, 1, 0], [0, 0, 2, 0]])
        values = t([[0.5, 0.6, 0.7, 9.0], [9.0, 1.0, 0.5, 9.0]])
        mask = t([[1, 1, 1, 0], [0, 1, 1, 0]])
        adv, returns = losses.gae(rewards, values, mask, gamma=1.0, lam=0.95)
        for g, w in zip(adv.flatten().tolist(), [0.46575, 0.385, 0.3, 0, 0, 0.925, 1.5, 0]):
            self.assertAlmostEqual(g, w, places=6)
        for g, w in zip(returns.flatten().tolist(), [0.96575, 0.985, 1.0, 0, 0, 1.925, 2.0, 0]):
            self.assertAlmostEqual(g, w, places=6)

    def test_whiten(self):
        # 1, 2, 3 (and a masked 100): mean 2, sample variance (1 + 0 + 1) / 2 = 1, so
        # -1, 0, 1.
        got = losses.whiten(t([[1.0, 2.0, 3.0, 100.0]]), t([[1, 1, 1, 0]])).flatten().tolist()
        for g, w in zip(got, [-1.0, 0.0, 1.0, 0.0]):
            self.assertAlmostEqual(g, w, places=5)
        # One masked position: its deviation is 0 whatever the variance.
        self.assertEqual(losses.whiten(t([[5.0, 1.0]]), t([[1, 0]])).flatten().tolist(), [0.0, 0.0])

    def test_clipped_value_loss(self):
        # clip 0.2, old values 0.5 each:
        #   V 1.0, R 0.8: (0.2)^2 = 0.04; clipped V 0.7: (0.1)^2 = 0.01; max 0.04
        #   V 0.0, R 0.9: 0.81; clipped V 0.3: 0.36; max 0.81
        #   V 0.0, R 0.1: 0.01; clipped V 0.3: 0.04; max 0.04 (the clipped term wins)
        # 0.5 * (0.04 + 0.81 + 0.04) / 3 = 0.148333; the clipped term won on 1 of 3 tokens.
        loss, fraction = losses.value_loss(t([[1.0, 0.0, 0.0]]), t([[0.5, 0.5, 0.5]]), t([[0.8, 0.9, 0.1]]),
                                           t([[1, 1, 1]]), 0.2)
        self.assertAlmostEqual(loss.item(), 0.148333, places=6)
        self.assertAlmostEqual(fraction.item(), 1 / 3, places=6)


class CutCompletionTest(unittest.TestCase):
    def test_cut_at_the_first_stop_token(self):
        self.assertEqual(rl.cut_completion([5, 6, 1, 0, 0], {1}), [5, 6, 1])
        self.assertEqual(rl.cut_completion([1, 0], {1}), [1])
        self.assertEqual(rl.cut_completion([5, 6, 7], {1}), [5, 6, 7])  # the length ran out
        self.assertEqual(rl.cut_completion([5, 2, 6], {1, 2}), [5, 2])


class Out:
    def __init__(self, logits, hidden):
        self.logits = logits
        self.hidden_states = (hidden,)


class AdapterLM(torch.nn.Module):
    """A bigram model (each position predicts the next token from the
    current one) whose frozen embedding and output layer are the base model
    and whose trainable per-token offset is the adapter, switched off inside
    disable_adapter() as PEFT's is."""

    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.out = torch.nn.Linear(dim, vocab)
        for p in list(self.embed.parameters()) + list(self.out.parameters()):
            p.requires_grad_(False)
        self.adapter = torch.nn.Embedding(vocab, dim)
        torch.nn.init.zeros_(self.adapter.weight)
        self.enabled = True

    def forward(self, input_ids, attention_mask, output_hidden_states=False):
        h = self.embed(input_ids)
        if self.enabled:
            h = h + self.adapter(input_ids)
        return Out(self.out(h), h)

    @contextlib.contextmanager
    def disable_adapter(self):
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = True


# Vocabulary: 0 padding, 1 end of reply, 2-4 prompt words, 5-7 good words, 8-11 other words.
END, PROMPTS, GOOD = 1, (2, 3, 4), {5, 6, 7}
MAX_REPLY = 4


def sample_group(model, prompt, n, gen):
    """n replies sampled from the model after `prompt` (one token), each up to
    MAX_REPLY tokens or the end token: (ids, labels) and the reward, the
    share of the reply's words that are good ones."""
    out = []
    with torch.no_grad():
        for _ in range(n):
            seq = [prompt]
            while len(seq) <= MAX_REPLY and seq[-1] != END:
                logits = model(input_ids=torch.tensor([seq]), attention_mask=None).logits[0, -1]
                seq.append(int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)))
            reply = seq[1:]
            words = [w for w in reply if w != END]
            reward = sum(w in GOOD for w in words) / len(words) if words else 0.0
            out.append(((seq, [IGNORE] + reply), reward))
    return out


class TinyPolicyTest(unittest.TestCase):
    """A few steps of each algorithm on the adapter model: the mean reward of
    fresh samples rises, the policy drifts from the reference (KL above 0),
    and the reference (the adapter switched off) stays where it was."""

    def train(self, algorithm, steps=30):
        torch.manual_seed(0)
        model = AdapterLM(12, 8)
        head = torch.nn.Linear(8, 1) if algorithm == "ppo" else None
        if head is not None:
            torch.nn.init.zeros_(head.weight)
            torch.nn.init.zeros_(head.bias)
        settings = rl.Settings(algorithm=algorithm, learning_rate=0.05, total_updates=steps * 2, group_size=4,
                               clip_epsilon=0.05, kl_coef=0.01, updates_per_batch=2, micro_batch_size=5,
                               scheduler="constant", value_coef=0.5)
        opt = rl.PolicyOptimizer(model, model.disable_adapter, settings, 0, "cpu", head)
        gen = torch.Generator().manual_seed(1)
        probe = torch.tensor([[p] for p in PROMPTS])
        with torch.no_grad():
            reference_before = model(input_ids=probe, attention_mask=None).logits.clone()

        def mean_reward():
            return sum(r for p in PROMPTS for _, r in sample_group(model, p, 20, gen)) / (20 * len(PROMPTS))

        before = mean_reward()
        history = []
        for _ in range(steps):
            samples = [s for p in PROMPTS for s in sample_group(model, p, 4, gen)]
            rollout = opt.rollout([seq for seq, _ in samples], [r for _, r in samples])
            figures = opt.update(rollout)
            history.append((rollout.kl, figures))
        after = mean_reward()
        with model.disable_adapter(), torch.no_grad():
            reference_after = model(input_ids=probe, attention_mask=None).logits
        return before, after, history, reference_before, reference_after

    def check(self, algorithm):
        before, after, history, ref_before, ref_after = self.train(algorithm)
        self.assertGreater(after, before + 0.2, (before, after))
        self.assertEqual(history[0][0], 0.0)  # the adapter starts at zero: the policy is the reference
        self.assertGreater(history[-1][0], 0.0)
        for _, figures in history:
            self.assertTrue(0.0 <= figures["clip_fraction"] <= 1.0, figures)
            self.assertTrue(math.isfinite(figures["loss"]), figures)
        self.assertTrue(any(f["clip_fraction"] > 0 for _, f in history))  # the second pass clips
        self.assertTrue(torch.equal(ref_before, ref_after))
        return history

    def test_grpo_learns_the_rewarded_replies(self):
        self.check("grpo")

    def test_ppo_learns_the_rewarded_replies(self):
        history = self.check("ppo")
        self.assertTrue(all(math.isfinite(f["value_loss"]) for _, f in history))

    def test_rollout_of_grpo_groups(self):
        model = AdapterLM(12, 8)
        settings = rl.Settings(algorithm="grpo", learning_rate=0.01, total_updates=1, group_size=2)
        opt = rl.PolicyOptimizer(model, model.disable_adapter, settings, 0, "cpu")
        seqs = [([2, 5, 1], [IGNORE, 5, 1]), ([2, 9, 9, 1], [IGNORE, 9, 9, 1]),
                ([3, 1], [IGNORE, 1]), ([3, 6, 1], [IGNORE, 6, 1])]
        r = opt.rollout(seqs, [1.0, 0.0, 0.0, 0.0])
        self.assertEqual(r.mask.tolist(), [[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]])
        # Group 1: rewards 1 and 0, mean 0.5, sample std 0.707107: +-0.5 / 0.707207 = +-0.707007.
        # Group 2: both 0, advantages 0.
        for g, w in zip(r.advantages.tolist(), [0.707007, -0.707007, 0.0, 0.0]):
            self.assertAlmostEqual(g, w, places=5)
        self.assertEqual(r.kl, 0.0)
        self.assertTrue(torch.equal(r.old_logprobs, r.ref_logprobs))
        with self.assertRaises(ValueError):
            opt.rollout(seqs, [1.0])


if __name__ == "__main__":
    unittest.main()
