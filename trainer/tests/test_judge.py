"""The HTTP scoring endpoint client (curate_trainer.judge) against a real
HTTP server on the loopback interface. Standard library only."""

import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from curate_trainer.data import Message
from curate_trainer.errors import TrainerError
from curate_trainer.judge import Judge


class Handler(BaseHTTPRequestHandler):
    # The test sets what the server answers: (status, body bytes).
    answer = (200, b"{}")
    seen = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Handler.seen.append((self.path, self.headers["Content-Type"], json.loads(body)))
        status, out = Handler.answer
        if callable(out):
            out = out(json.loads(body))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


class JudgeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        cls.url = f"http://127.0.0.1:{cls.server.server_port}/score"
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        Handler.seen = []

    def items(self):
        prompt = (Message("system", "Be brief."), Message("user", "Where is Paris?"))
        return [(prompt, "Paris is in France.", "France."), (prompt, "", "Nowhere, Ünïcode")]

    def test_scores_in_order(self):
        # The stand-in judge scores a reply by its length in characters.
        Handler.answer = (200, lambda body: json.dumps(
            {"scores": [len(item["response"]) for item in body["items"]]}).encode())
        self.assertEqual(Judge(self.url).score(self.items()), [7.0, 16.0])
        [(path, content_type, body)] = Handler.seen
        self.assertEqual((path, content_type), ("/score", "application/json"))
        self.assertEqual(body["items"][0], {"messages": [{"role": "system", "content": "Be brief."},
                                                         {"role": "user", "content": "Where is Paris?"}],
                                            "context": "Paris is in France.", "response": "France."})
        self.assertEqual(body["items"][1]["response"], "Nowhere, Ünïcode")
        self.assertEqual(Judge(self.url).score([]), [])
        self.assertEqual(len(Handler.seen), 1)  # nothing to score: no request

    def test_bad_answers_fail_the_run_clearly(self):
        for answer, message in [
            ((500, b"oops"), "the judge answered HTTP 500"),
            ((200, b"not json"), 'the judge\'s answer is not {"scores": [...]}'),
            ((200, b'{"score": 1}'), 'the judge\'s answer is not {"scores": [...]}'),
            ((200, b'{"scores": [1]}'), "the judge gave 1 scores for 2 replies"),
            ((200, b'{"scores": [1, "high"]}'), 'score 1 is not a finite number: "high"'),
            ((200, b'{"scores": [1, NaN]}'), "score 1 is not a finite number"),
        ]:
            with self.subTest(answer=answer):
                Handler.answer = answer
                with self.assertRaises(TrainerError) as ctx:
                    Judge(self.url).score(self.items())
                self.assertIn(message, str(ctx.exception))
                self.assertTrue(str(ctx.exception).startswith("policy.judge_url: "))

    def test_unreachable(self):
        with self.assertRaises(TrainerError) as ctx:
            Judge("http://127.0.0.1:9/score", timeout=5).score(self.items())
        self.assertIn("could not reach the judge", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
