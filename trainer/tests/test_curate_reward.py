"""Curate's reward API client (curate_trainer.curate_reward), policy.rlaif in
config.json, and the policy scorer taking its reward from Curate, against a
stand-in for POST /api/train/:id/rewards on the loopback interface that
answers as Curate's handler does (internal/rlaif Scored, problem+json on a
refusal). Standard library only."""

import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from curate_trainer import config
from curate_trainer.curate_reward import CurateReward
from curate_trainer.data import Message, PromptExample
from curate_trainer.errors import ConfigError, TrainerError

RUN_DIR = Path("/tmp/run")
VALID = {"method": "grpo", "base_model": "/models/tiny"}


class Handler(BaseHTTPRequestHandler):
    # The test sets the answers, one per request, each (status, body, headers);
    # the last repeats.
    answers = []
    seen = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.seen.append((self.path, self.headers.get("Authorization"), body))
        status, out, headers = Handler.answers[min(len(Handler.seen), len(Handler.answers)) - 1]
        if callable(out):
            out = out(body)
        out = out if isinstance(out, bytes) else json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if status < 400 else "application/problem+json")
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def formula(body):
    """Curate's answer with R = 0.5·chain + 0.5·judge, the rules' chain
    being 1 when the completion says "911" and the teacher always 0.2;
    a conflict where they differ by more than 0.5; an empty completion has
    no reward."""
    data = []
    for s in body["samples"]:
        if not s["completion"]:
            data.append({"reward": None, "invalid": "judge: The answer had no text.",
                         "components": {"chain": {"value": 0, "explanation": ""},
                                        "judge": {"value": 0, "explanation": "", "invalid": "The answer had no text."}},
                         "conflict": False, "teacher_cost_micros": 0})
            continue
        chain = 1.0 if "911" in s["completion"] else 0.0
        data.append({"reward": 0.5 * chain + 0.5 * 0.2, "explanation": "",
                     "components": {"chain": {"value": chain, "explanation": "steps"},
                                    "judge": {"value": 0.2, "explanation": "graded"}},
                     "teacher": 0.2, "rules": chain, "conflict": abs(chain - 0.2) > 0.5, "teacher_cost_micros": 245})
    return {"data": data}


class CurateRewardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        cls.url = f"http://127.0.0.1:{cls.server.server_port}/api/train/j1/rewards"
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        Handler.seen = []
        self.slept = []

    def client(self, retries=3):
        return CurateReward(self.url, token="ck_run", retries=retries, sleep=self.slept.append)

    def test_scores_in_order_with_components(self):
        Handler.answers = [(200, formula, {})]
        got = self.client().score(3, [("I have chest pain", "Chest pain can be serious.", "Call 911 now."),
                                      ("My sugar is low", "", "Rest.")])
        self.assertEqual([g.reward for g in got], [0.6, 0.1])
        self.assertEqual(got[0].components, {"chain": 1.0, "judge": 0.2})
        self.assertEqual([g.conflict for g in got], [True, False])
        [(path, auth, body)] = Handler.seen
        self.assertEqual((path, auth), ("/api/train/j1/rewards", "Bearer ck_run"))
        self.assertEqual(body, {"step": 3, "samples": [
            {"prompt": "I have chest pain", "context": ["Chest pain can be serious."], "completion": "Call 911 now."},
            {"prompt": "My sugar is low", "completion": "Rest."}]})

    def test_unscored_sample(self):
        Handler.answers = [(200, formula, {})]
        [got] = self.client().score(1, [("q", "", "")])
        self.assertIsNone(got.reward)
        self.assertEqual(got.invalid, "judge: The answer had no text.")
        self.assertEqual(got.components, {"chain": 0.0})  # the invalid teacher is left out

    def test_retries_server_errors_then_succeeds(self):
        Handler.answers = [(503, {"status": 503, "detail": "Try again shortly"}, {"Retry-After": "5"}),
                           (500, b"oops", {}), (200, formula, {})]
        got = self.client().score(1, [("q", "", "Call 911.")])
        self.assertEqual(got[0].reward, 0.6)
        self.assertEqual(len(Handler.seen), 3)
        # Retry-After first, then the doubling backoff (1 s, 2 s, ...).
        self.assertEqual(self.slept, [5.0, 2.0])

    def test_gives_up_after_the_retries(self):
        Handler.answers = [(429, {"status": 429, "detail": "this API key is over its request rate; slow down"}, {})]
        with self.assertRaises(TrainerError) as e:
            self.client(retries=2).score(1, [("q", "", "a")])
        self.assertEqual(len(Handler.seen), 3)
        self.assertIn("after 3 tries: HTTP 429: this API key is over its request rate", str(e.exception))

    def test_refusal_names_the_fields_and_is_not_retried(self):
        Handler.answers = [(422, {"status": 422, "title": "Invalid input", "detail": "Some fields need correcting.",
                                  "errors": [{"field": "samples[0].prompt", "message": "is required"},
                                             {"field": "job", "message": "has ended (succeeded): it scores nothing more"}]}, {})]
        with self.assertRaises(TrainerError) as e:
            self.client().score(1, [("", "", "a")])
        self.assertEqual(len(Handler.seen), 1)
        self.assertEqual(str(e.exception), "policy.rlaif: Curate refused the step's samples (HTTP 422): "
                                           "samples[0].prompt: is required; job: has ended (succeeded): it scores nothing more")

    def test_unreachable(self):
        c = CurateReward("http://127.0.0.1:9/api/train/x/rewards", token="k", retries=1, timeout=2,
                         sleep=self.slept.append)
        with self.assertRaises(TrainerError) as e:
            c.score(1, [("q", "", "a")])
        self.assertIn("no reward from Curate at http://127.0.0.1:9/api/train/x/rewards after 2 tries", str(e.exception))

    def test_bad_answers(self):
        for answer, message in [
            ({"scores": [1]}, 'is not {"data": [...]}'),
            ({"data": []}, "gave 0 rewards for 1 samples"),
            ({"data": [{"reward": "high"}]}, 'reward 0 is not a finite number: "high"'),
        ]:
            Handler.answers = [(200, answer, {})]
            with self.subTest(answer=answer), self.assertRaises(TrainerError) as e:
                self.client().score(1, [("q", "", "a")])
            self.assertIn(message, str(e.exception))

    def test_batches_of_at_most_256(self):
        Handler.answers = [(200, formula, {})]
        got = self.client().score(2, [("q", "", "911")] * 300)
        self.assertEqual(len(got), 300)
        self.assertEqual([len(b["samples"]) for _, _, b in Handler.seen], [256, 44])

    def test_token_from_the_environment(self):
        import os
        from unittest import mock
        with mock.patch.dict(os.environ, {"CURATE_REWARD_TOKEN": ""}):
            with self.assertRaises(TrainerError) as e:
                CurateReward(self.url)
            self.assertIn("CURATE_REWARD_TOKEN is not set", str(e.exception))
        with mock.patch.dict(os.environ, {"CURATE_REWARD_TOKEN": "ck_env"}):
            self.assertEqual(CurateReward(self.url).token, "ck_env")

    def test_policy_scorer_takes_the_reward_from_curate(self):
        # The GRPO/PPO scorer with policy.rlaif: the reward is Curate's, the
        # step's breakdown holds each of its components' means, and the
        # samples go out with the step they are for.
        import os
        from unittest import mock
        try:
            from curate_trainer.policy import Scorer
        except ImportError as e:  # policy.py needs torch
            if os.environ.get("CI") == "true":
                raise RuntimeError(f"policy.py cannot be imported: {e}; CI runs this under the trainer's environment") from e
            self.skipTest(f"policy.py cannot be imported: {e}")
        Handler.answers = [(200, formula, {})]
        cfg = config.validate({**VALID, "policy": {"rlaif": {"url": self.url, "retries": 0}}}, RUN_DIR)

        class Run:
            class stop:
                @staticmethod
                def check():
                    pass
        prompt = PromptExample(prompt=(Message("user", "I have chest pain"),), context="")
        with mock.patch.dict(os.environ, {"CURATE_REWARD_TOKEN": "ck_env"}):
            scorer = Scorer(Run(), cfg.policy)
        rewards, breakdown = scorer.rewards([(prompt, ["Call 911.", "Rest at home.", ""])], cfg.policy.weights, step=4)
        self.assertEqual(rewards, [[0.6, 0.1, 0.0]])
        self.assertEqual(breakdown, {"curate": (0.6 + 0.1) / 3, "chain": 1 / 3, "judge": 0.2})
        self.assertEqual(Handler.seen[0][2]["step"], 4)
        Handler.answers = [(200, lambda body: {"data": [{"reward": None, "invalid": "The judge's budget is spent.",
                                                         "components": {}} for _ in body["samples"]]}, {})]
        with self.assertRaises(TrainerError) as e:
            scorer.rewards([(prompt, ["a", "b"])], cfg.policy.weights, step=5)
        self.assertIn("Curate scored none of step 5's 2 samples: The judge's budget is spent.", str(e.exception))


class RLAIFConfigTest(unittest.TestCase):
    def test_defaults(self):
        cfg = config.validate({**VALID, "policy": {"rlaif": {"url": "http://curate:8080/api/train/j/rewards"}}}, RUN_DIR)
        pc = cfg.policy
        self.assertEqual((pc.rlaif.url, pc.rlaif.timeout, pc.rlaif.retries),
                         ("http://curate:8080/api/train/j/rewards", 120.0, 4))
        # The reward is Curate's; the held-out check keeps to the design's formula.
        self.assertEqual(pc.weights, {"curate": 1.0})
        self.assertEqual(pc.holdout_weights, {"rel": 1.0, "faith": 1.0, "conc": 0.5})
        self.assertIsNone(config.validate(VALID, RUN_DIR).policy.rlaif)

    def test_refusals(self):
        for policy, message in [
            ({"weights": {"curate": 1}}, "policy.weights.curate: needs policy.rlaif (what gives this score)"),
            ({"rlaif": {}}, "policy.rlaif.url: is required"),
            ({"rlaif": {"url": "ftp://x"}}, 'policy.rlaif.url: must be an http:// or https:// URL, got "ftp://x"'),
            ({"rlaif": {"url": "http://x", "retries": 99}}, "policy.rlaif.retries: must be between 0 and 20, got 99"),
            ({"rlaif": {"url": "http://x", "token": "secret"}}, "policy.rlaif.token: unknown field"),
            ({"rlaif": "http://x"}, "policy.rlaif: must be a JSON object, got a string"),
        ]:
            with self.subTest(policy=policy), self.assertRaises(ConfigError) as e:
                config.validate({**VALID, "policy": policy}, RUN_DIR)
            self.assertTrue(any(p.startswith(message) for p in e.exception.problems), e.exception.problems)


if __name__ == "__main__":
    unittest.main()
