"""The trainer's tensor math (curate_trainer.losses) on tiny tensors whose
expected values are worked out by hand in the comments, and a tiny
pure-PyTorch language model that learns a preference through the trainer's
DPO loss and training loop.

These need torch alone; `make trainer-test` runs them under the trainer's
environment. Under a Python without torch the module is skipped, naming the
interpreter, except under CI=true, where that fails.
"""

import copy
import io
import json
import math
import os
import sys
import unittest
from types import SimpleNamespace

try:
    import torch
except ImportError as e:
    # Under CI=true the trainer's environment is there, and a missing torch is a failure.
    if e.name != "torch" or os.environ.get("CI") == "true":
        raise
    raise unittest.SkipTest(
        f"torch is not installed for {sys.executable}; `make trainer-test` runs these "
        "under the trainer's environment (make trainer-env)") from None

from curate_trainer import losses
from curate_trainer.chat import IGNORE
from curate_trainer.protocol import Emitter
from curate_trainer.stop import StopFlag
from curate_trainer.training import Loop, LoopSettings

# Values used below, each worked out once:
#   log-softmax of [2, 1, 0]:      logsumexp = ln(e² + e + 1) = ln 11.107338 = 2.407606,
#                                  so log p = [-0.407606, -1.407606, -2.407606]
#   log-softmax of [0, 0, 0]:      log p = -ln 3 = -1.098612 each
#   log-softmax of [0, ln 3, 0]:   p = [1/5, 3/5, 1/5], log p = [-1.609438, -0.510826, -1.609438]
LN_11_107 = 2.4076059644
LN_3 = 1.0986122887
LN_06 = -0.5108256238
LN_02 = -1.6094379124


class Out:
    def __init__(self, logits):
        self.logits = logits


class Table(torch.nn.Module):
    """A bigram model with given logits: the logits at each position are the
    row of `table` for the token there (the attention mask is irrelevant to
    it), called like a transformers model."""

    def __init__(self, table):
        super().__init__()
        self.table = torch.tensor(table, dtype=torch.float32)

    def forward(self, input_ids, attention_mask):
        return Out(self.table[input_ids])


class TinyLM(torch.nn.Module):
    """An embedding and a linear layer over a small vocabulary: each position
    predicts the next token from the current one."""

    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.out = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask):
        return Out(self.out(self.embed(input_ids)))


# Row i holds the logits after token i; see the log-softmax values above.
TABLE = [[2.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, math.log(3), 0.0]]


class CollateTest(unittest.TestCase):
    def test_padding_is_masked_and_labelled_ignore(self):
        ids, mask, labels = losses.collate([([5, 6, 7], [IGNORE, 6, 7]), ([5, 8], [IGNORE, 8])], 0, "cpu")
        self.assertEqual(ids.tolist(), [[5, 6, 7], [5, 8, 0]])
        self.assertEqual(mask.tolist(), [[1, 1, 1], [1, 1, 0]])
        self.assertEqual(labels.tolist(), [[IGNORE, 6, 7], [IGNORE, 8, IGNORE]])
        self.assertEqual(ids.dtype, torch.long)

    def test_left_padding(self):
        self.assertEqual(losses.pad([[1, 2, 3], [4]], 9, side="left").tolist(), [[1, 2, 3], [9, 9, 4]])


class LogprobTest(unittest.TestCase):
    def batch(self):
        # A: prompt [1, 0], reply [2, 1]. B: prompt [2], reply [2], padded with id 0.
        return losses.collate([([1, 0, 2, 1], [IGNORE, IGNORE, 2, 1]), ([2, 2], [IGNORE, 2])], 0, "cpu")

    def test_sequence_logprobs_sum_over_reply_tokens_only(self):
        ids, mask, labels = self.batch()
        got = losses.sequence_logprobs(Table(TABLE), ids, mask, labels)
        # A: log p(2 | 0) + log p(1 | 2) = -2.407606 + ln 0.6 = -2.407606 - 0.510826 = -2.918432.
        #    Not counted: the prompt token 0 after 1 (-1.098612) and the prediction after
        #    the last token.
        # B: log p(2 | 2) = ln 0.2 = -1.609438. Had the padding counted, log p(0 | 2) and
        #    log p(0 | 0) would add -1.609438 - 0.407606.
        self.assertEqual(got.shape, (2,))
        self.assertAlmostEqual(got[0].item(), -LN_11_107 + LN_06, places=5)
        self.assertAlmostEqual(got[0].item(), -2.918432, places=5)
        self.assertAlmostEqual(got[1].item(), LN_02, places=5)

    def test_labelled_logprobs_on_given_logits(self):
        # Logits as token_logits returns them: position t predicts token t + 1.
        logits = torch.tensor([[[100.0, -100.0, 7.0], [2.0, 1.0, 0.0], [0.0, 0.0, 0.0]],
                               [[0.0, math.log(3), 0.0], [50.0, -50.0, 0.0], [9.0, 9.0, -9.0]]])
        labels = torch.tensor([[IGNORE, IGNORE, 2, 0],        # reply: tokens 2 and 0
                               [IGNORE, 1, IGNORE, IGNORE]])  # reply: token 1, then padding
        got = losses.labelled_logprobs(logits, labels)
        # Row 0: log-softmax([2, 1, 0])[2] + log-softmax([0, 0, 0])[0] = -2.407606 - 1.098612
        #        = -3.506218; the first position (predicting a prompt token) is ignored.
        # Row 1: log-softmax([0, ln 3, 0])[1] = ln 0.6 = -0.510826.
        self.assertAlmostEqual(got[0].item(), -LN_11_107 - LN_3, places=5)
        self.assertAlmostEqual(got[0].item(), -3.506218, places=5)
        self.assertAlmostEqual(got[1].item(), LN_06, places=5)

    def test_a_sequence_with_no_labelled_token_scores_zero(self):
        logits = torch.tensor([[[2.0, 1.0, 0.0], [0.0, 0.0, 0.0]]])
        got = losses.labelled_logprobs(logits, torch.tensor([[IGNORE, IGNORE, IGNORE]]))
        self.assertEqual(got.tolist(), [0.0])

    def test_token_loss_averages_over_labelled_tokens(self):
        ids, mask, labels = self.batch()
        logits = losses.token_logits(Table(TABLE), ids, mask)
        self.assertEqual(logits.shape, (2, 3, 3))  # the last position is dropped
        # The three labelled tokens above: -ln p = 2.407606, 0.510826 and 1.609438;
        # sum 4.527870, mean 4.527870 / 3 = 1.509290.
        mean, count = losses.token_loss(logits, labels)
        self.assertEqual(count, 3)
        self.assertAlmostEqual(mean.item(), 1.509290, places=5)
        total, _ = losses.token_loss(logits, labels, reduction="sum")
        self.assertAlmostEqual(total.item(), LN_11_107 - LN_06 - LN_02, places=5)


class PreferenceLossTest(unittest.TestCase):
    def test_dpo_loss_rewards_and_summary(self):
        beta = 0.1
        # Three pairs of summed reply log-probabilities (policy, reference):
        #   1: chosen -10 vs -12, rejected -15 vs -14: rewards 0.1·2 = 0.2 and 0.1·(-1) = -0.1,
        #      margin 0.3, loss -ln σ(0.3) = ln(1 + e^-0.3) = ln 1.740818 = 0.554355
        #   2: chosen -20 vs -19, rejected -18 vs -20: rewards -0.1 and 0.2, margin -0.3,
        #      loss ln(1 + e^0.3) = ln 2.349859 = 0.854355
        #   3: chosen -5 vs -6, rejected -7 vs -8: rewards 0.1 and 0.1, margin 0, loss ln 2 = 0.693147
        # mean loss (0.554355 + 0.854355 + 0.693147) / 3 = 0.700619
        policy_chosen = torch.tensor([-10.0, -20.0, -5.0], requires_grad=True)
        policy_rejected = torch.tensor([-15.0, -18.0, -7.0], requires_grad=True)
        loss, chosen, rejected = losses.dpo_loss(
            policy_chosen, policy_rejected, torch.tensor([-12.0, -19.0, -6.0]), torch.tensor([-14.0, -20.0, -8.0]),
            beta)
        self.assertAlmostEqual(loss.item(), 0.700619, places=5)
        for got, want in zip(chosen.tolist(), [0.2, -0.1, 0.1]):
            self.assertAlmostEqual(got, want, places=5)
        for got, want in zip(rejected.tolist(), [-0.1, 0.2, 0.1]):
            self.assertAlmostEqual(got, want, places=5)
        self.assertFalse(chosen.requires_grad or rejected.requires_grad)

        # d loss / d log pi(chosen_i) = -beta · σ(-margin_i) / 3; for pair 1
        # σ(-0.3) = 1 / (1 + e^0.3) = 0.425557, so -0.1 · 0.425557 / 3 = -0.014185:
        # the loss pushes the chosen reply up and the rejected one down.
        loss.backward()
        self.assertAlmostEqual(policy_chosen.grad[0].item(), -0.014185, places=5)
        self.assertAlmostEqual(policy_rejected.grad[0].item(), 0.014185, places=5)
        self.assertTrue((policy_chosen.grad < 0).all() and (policy_rejected.grad > 0).all())

        # The tie (pair 3) is not a win: accuracy 1/3. Margins 0.3, -0.3, 0 average 0;
        # chosen rewards average (0.2 - 0.1 + 0.1) / 3 = 0.066667, rejected the same.
        got = losses.preference_summary(chosen, rejected, prefix="eval_")
        self.assertEqual(set(got), {"eval_reward_margin", "eval_preference_accuracy",
                                    "eval_chosen_reward", "eval_rejected_reward"})
        self.assertAlmostEqual(got["eval_preference_accuracy"], 1 / 3, places=6)
        self.assertAlmostEqual(got["eval_reward_margin"], 0.0, places=6)
        self.assertAlmostEqual(got["eval_chosen_reward"], 0.066667, places=5)
        self.assertAlmostEqual(got["eval_rejected_reward"], 0.066667, places=5)

    def test_dpo_loss_is_log_2_while_the_policy_is_the_reference(self):
        logprobs = torch.tensor([-3.0, -40.0])
        loss, chosen, rejected = losses.dpo_loss(logprobs, logprobs - 1, logprobs, logprobs - 1, 0.5)
        self.assertAlmostEqual(loss.item(), math.log(2), places=6)
        self.assertEqual(chosen.tolist(), [0.0, 0.0])

    def test_bradley_terry_loss(self):
        # r_c - r_r = 1 and -1: ln(1 + e^-1) = 0.313262 and ln(1 + e) = 1.313262, mean 0.813262.
        got = losses.bradley_terry_loss(torch.tensor([2.0, 0.5]), torch.tensor([1.0, 1.5]))
        self.assertAlmostEqual(got.item(), 0.813262, places=5)
        # Only the difference counts.
        shifted = losses.bradley_terry_loss(torch.tensor([102.0, 100.5]), torch.tensor([101.0, 101.5]))
        self.assertAlmostEqual(shifted.item(), 0.813262, places=5)

    def test_rating_mse_covers_rated_replies_only(self):
        # σ(0) = 0.5 against 1.0 (rating 5): 0.25; σ(ln 3) = 0.75 against 0.75 (rating 4): 0;
        # the third reply has no rating. Mean (0.25 + 0) / 2 = 0.125.
        got = losses.rating_mse(torch.tensor([0.0, math.log(3), 5.0]), [1.0, 0.75, None])
        self.assertAlmostEqual(got.item(), 0.125, places=6)
        self.assertIsNone(losses.rating_mse(torch.tensor([1.0, 2.0]), [None, None]))


# The tiny model's vocabulary: 0 padding, 1 end of reply, 2-6 prompt words,
# 7-9 the words of chosen replies, 10-12 the words of rejected ones.
PROMPT_WORDS, GOOD, BAD, END = range(2, 7), (7, 8, 9), (10, 11, 12), 1


def preference_pairs(prompts, seed):
    """((chosen ids, labels), (rejected ids, labels)) per prompt. The two
    replies of a pair have the same length, one to three words from their own
    set, so a batch still mixes lengths (and padding) while a reply's
    likelihood is not confounded with its length."""
    g = torch.Generator().manual_seed(seed)

    def reply(words, n):
        return [words[int(i)] for i in torch.randint(0, len(words), (n,), generator=g)] + [END]

    pairs = []
    for prompt in prompts:
        n = int(torch.randint(1, 4, (1,), generator=g))
        chosen, rejected = reply(GOOD, n), reply(BAD, n)
        pairs.append(((prompt + chosen, [IGNORE] * len(prompt) + chosen),
                      (prompt + rejected, [IGNORE] * len(prompt) + rejected)))
    return pairs


class TinyDPOTest(unittest.TestCase):
    """A few DPO steps of the trainer's loop on a model small enough to reason
    about: the policy comes to prefer the chosen replies, on pairs it was
    trained on and on pairs with prompts it never saw."""

    def stats(self, policy, reference, batch, beta):
        # What dpo.preference_stats does, with a frozen copy as the reference
        # where the trainer switches its LoRA adapter off.
        ids, mask, labels = losses.collate([c for c, _ in batch] + [r for _, r in batch], 0, "cpu")
        n = len(batch)
        with torch.no_grad():
            ref = losses.sequence_logprobs(reference, ids, mask, labels)
        pol = losses.sequence_logprobs(policy, ids, mask, labels)
        return losses.dpo_loss(pol[:n], pol[n:], ref[:n], ref[n:], beta), pol.detach()

    def measure(self, policy, reference, pairs, beta):
        """(DPO reward accuracy as the trainer reports it, the share of pairs
        whose chosen reply the policy finds likelier than the rejected one, and
        the mean of log pi(chosen) - log pi(rejected))."""
        with torch.no_grad():
            (_, chosen, rejected), pol = self.stats(policy, reference, pairs, beta)
        n = len(pairs)
        margin = pol[:n] - pol[n:]
        return (losses.preference_summary(chosen, rejected)["preference_accuracy"],
                (margin > 0).float().mean().item(), margin.mean().item())

    def test_dpo_raises_preference_accuracy(self):
        torch.manual_seed(0)
        prompts = [[a, b] for a in PROMPT_WORDS for b in PROMPT_WORDS if a != b]  # 20 prompts
        train = preference_pairs(prompts[:14], seed=1)
        held_out = preference_pairs(prompts[14:], seed=2)
        policy = TinyLM(13, 8)
        reference = copy.deepcopy(policy).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
        beta = 0.5

        before_train = self.measure(policy, reference, train, beta)
        before_held_out = self.measure(policy, reference, held_out, beta)
        # The policy starts as the reference: every reward is 0, so no pair is won.
        self.assertEqual(before_train[0], 0.0)
        self.assertEqual(before_held_out[0], 0.0)

        out = io.StringIO()
        run = SimpleNamespace(emitter=Emitter(out), stop=StopFlag(), device="cpu")

        def compute(batch):
            (loss, chosen, rejected), _ = self.stats(policy, reference, batch, beta)
            return loss, losses.preference_summary(chosen, rejected)

        settings = LoopSettings(learning_rate=0.05, epochs=4, batch_size=4, scheduler="constant")
        self.assertEqual(Loop(run, policy, train, compute, settings, seed=3).run_epochs(), 16)

        metrics = [e for e in map(json.loads, out.getvalue().splitlines()) if e["event"] == "metric"]
        self.assertEqual([m["step"] for m in metrics], list(range(1, 17)))
        # First step: the policy is still the reference, so the loss is ln 2.
        self.assertAlmostEqual(metrics[0]["loss"], math.log(2), places=6)
        self.assertLess(sum(m["loss"] for m in metrics[-4:]) / 4, 0.5)

        after_train = self.measure(policy, reference, train, beta)
        after_held_out = self.measure(policy, reference, held_out, beta)
        for before, after in ((before_train, after_train), (before_held_out, after_held_out)):
            self.assertLess(before[0], after[0])
            self.assertGreaterEqual(after[0], 0.9)
            self.assertGreaterEqual(after[1], 0.9)
            self.assertLess(before[2], after[2])

class EarlyStoppingLoopTest(unittest.TestCase):
    """The loop's early stopping on eval_loss: evaluation losses 1.0, 0.8,
    0.9, 0.95 by epoch with patience 2 stop the run after epoch 4 and put
    back the weights of epoch 2, the best."""

    def test_stops_and_keeps_the_best_epoch(self):
        torch.manual_seed(0)
        model = TinyLM(13, 4)
        pairs = preference_pairs([[2, 3], [4, 5], [3, 6], [5, 2]], seed=1)
        reference = copy.deepcopy(model).eval()
        out = io.StringIO()
        run = SimpleNamespace(emitter=Emitter(out), stop=StopFlag(), device="cpu")
        scripted = iter([1.0, 0.8, 0.9, 0.95, 0.5, 0.4])
        weights_by_epoch = []

        def compute(batch):
            ids, mask, labels = losses.collate([c for c, _ in batch] + [r for _, r in batch], 0, "cpu")
            n = len(batch)
            with torch.no_grad():
                ref = losses.sequence_logprobs(reference, ids, mask, labels)
            pol = losses.sequence_logprobs(model, ids, mask, labels)
            loss, _, _ = losses.dpo_loss(pol[:n], pol[n:], ref[:n], ref[n:], 0.5)
            return loss, {}

        def evaluate():
            weights_by_epoch.append(copy.deepcopy(model.state_dict()))
            return {"eval_loss": next(scripted)}

        settings = LoopSettings(learning_rate=0.05, epochs=6, batch_size=2, scheduler="constant",
                                early_stopping_patience=2)
        loop = Loop(run, model, pairs, compute, settings, seed=3, evaluate=evaluate)
        self.assertEqual(loop.run_epochs(), 8)  # 4 epochs of 2 steps, not 6
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        [stop] = [e for e in events if e["event"] == "stop"]
        self.assertEqual((stop["step"], stop["epoch"]), (8, 4))
        self.assertEqual(stop["reason"], "validation loss has not improved for 2 evaluations (best 0.8 after epoch "
                                         "2, now 0.95); the model from epoch 2 is kept")
        best = [e for e in events if e.get("best_epoch")]
        self.assertEqual(best, [{"event": "metric", "step": 8, "best_epoch": 2, "best_step": 4, "best_eval_loss": 0.8}])
        for name, value in model.state_dict().items():
            self.assertTrue(torch.equal(value, weights_by_epoch[1][name]), name)
        self.assertFalse(torch.equal(model.out.weight, weights_by_epoch[3]["out.weight"]))

    def test_reward_warmup_is_500_steps_or_a_tenth(self):
        hp = SimpleNamespace(learning_rate=2e-5, epochs=5, batch_size=16, gradient_accumulation_steps=1,
                             max_steps=None, warmup_steps=None, weight_decay=0.01, max_grad_norm=1.0,
                             lr_scheduler="cosine", logging_steps=1, save_steps=0, early_stopping_patience=2,
                             early_stopping_threshold=0.0)
        reward = LoopSettings.from_hyperparameters(hp, "reward")
        # 100 pairs in batches of 16 are 7 steps an epoch, 35 in 5 epochs: 10% is 3.5, rounded up 4.
        self.assertEqual(reward.total_steps(100), 35)
        self.assertEqual(reward.warmup(35), 4)
        # 100,000 pairs: 6,250 steps an epoch, 31,250 in all; 10% is 3,125, so 500.
        self.assertEqual(reward.warmup(reward.total_steps(100_000)), 500)
        self.assertEqual(LoopSettings.from_hyperparameters(hp, "sft").warmup(35), 0)
        given = LoopSettings.from_hyperparameters(SimpleNamespace(**{**vars(hp), "warmup_steps": 7}), "reward")
        self.assertEqual(given.warmup(35), 7)


if __name__ == "__main__":
    unittest.main()
