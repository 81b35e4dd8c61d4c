"""A scoring endpoint over HTTP (policy.judge_url): a judge, a golden-set
checker or any service that grades replies. Standard library only.

Request, one per batch of replies to score:

    POST <judge_url>
    Content-Type: application/json
    {"items": [{"messages": [{"role": "user", "content": "..."}, ...],
                "context": "retrieved text or empty",
                "response": "the reply to score"}, ...]}

Answer: 200 with ``{"scores": [x, ...]}``, one finite number per item in
order (any scale; GRPO normalises within each group). Anything else fails
the run with a message naming the endpoint's answer.
"""

import json
import math
import urllib.error
import urllib.request

from .errors import TrainerError

MAX_ANSWER_BYTES = 16 << 20


class Judge:
    def __init__(self, url, timeout=120.0):
        self.url = url
        self.timeout = timeout

    def score(self, items):
        """Scores for a list of (messages, context, response) triples, where
        messages are data.Message objects."""
        if not items:
            return []
        body = json.dumps({"items": [
            {"messages": [m.as_dict() for m in messages], "context": context, "response": response}
            for messages, context, response in items]}, ensure_ascii=False).encode("utf-8")
        req = urllib.request.Request(self.url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                raw = res.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as e:
            raise TrainerError(f"policy.judge_url: the judge answered HTTP {e.code}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise TrainerError(f"policy.judge_url: could not reach the judge: {reason}") from None
        if len(raw) > MAX_ANSWER_BYTES:
            raise TrainerError(f"policy.judge_url: the judge's answer is over {MAX_ANSWER_BYTES} bytes")
        try:
            scores = json.loads(raw.decode("utf-8"))["scores"]
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise TrainerError('policy.judge_url: the judge\'s answer is not {"scores": [...]}') from None
        if not isinstance(scores, list) or len(scores) != len(items):
            got = len(scores) if isinstance(scores, list) else "no list of"
            raise TrainerError(f"policy.judge_url: the judge gave {got} scores for {len(items)} replies")
        out = []
        for i, s in enumerate(scores):
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
                raise TrainerError(f"policy.judge_url: score {i} is not a finite number: {json.dumps(s)[:40]}")
            out.append(float(s))
        return out
