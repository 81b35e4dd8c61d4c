"""The reward of a GRPO or PPO run scored by Curate (policy.rlaif): the
organisation's reward formula over its rule scorers, the judge as the
teacher and any reward model, through Curate's own scorers, which cache the
teacher's answers, reserve its budget before each call, log its cost and
queue a sample whose teacher and rules disagree for the experts. Standard
library only.

One request per step (in batches of at most MAX_BATCH samples):

    POST <policy.rlaif.url>                  (Curate's /api/train/<job id>/rewards)
    Authorization: Bearer <$CURATE_REWARD_TOKEN>
    {"step": N, "samples": [{"prompt": "the user's question", "context": ["..."],
                             "completion": "the sampled reply"}, ...]}

Answer: 200 with ``{"data": [{"reward": x|null, "invalid": "...",
"components": {"chain": {"value": 1.0, ...}, ...}, "conflict": bool}, ...]}``,
one per sample in order. The local worker writes the URL into config.json
and puts a key that only this run holds in the trainer's environment.

A 408, 425, 429 or 5xx answer and a network failure are tried again,
``policy.rlaif.retries`` more times, waiting 1, 2, 4, ... seconds (at most
30; a Retry-After is honoured); any other answer fails the run with what
Curate said, field by field.
"""

import json
import math
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from .errors import TrainerError

TOKEN_ENV = "CURATE_REWARD_TOKEN"
MAX_BATCH = 256  # Curate's limit per call (internal/rlaif.MaxBatch)
MAX_ANSWER_BYTES = 16 << 20
RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})
MAX_WAIT = 30.0


@dataclass
class Scored:
    """One sample's reward from Curate: None when a component could not
    score (invalid says why), each valid component's value by name, and
    whether the teacher and the rules disagreed."""
    reward: float = None
    components: dict = field(default_factory=dict)
    conflict: bool = False
    invalid: str = ""


class CurateReward:
    def __init__(self, url, token=None, timeout=120.0, retries=4, backoff=1.0, sleep=time.sleep):
        self.url = url
        self.token = token if token is not None else os.environ.get(TOKEN_ENV, "")
        if not self.token:
            raise TrainerError(f"policy.rlaif: {TOKEN_ENV} is not set; the local worker gives each RLAIF run "
                               "a key for Curate's reward API in the trainer's environment")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep

    def score(self, step, items):
        """Scored results for (query, context, completion) triples, in order."""
        out = []
        for i in range(0, len(items), MAX_BATCH):
            out += self._post(step, items[i:i + MAX_BATCH])
        return out

    def _post(self, step, items):
        samples = []
        for query, context, completion in items:
            s = {"prompt": query, "completion": completion}
            if context:
                s["context"] = [context]
            samples.append(s)
        body = json.dumps({"step": step, "samples": samples}, ensure_ascii=False).encode("utf-8")
        raw = self._send(body)
        try:
            data = json.loads(raw.decode("utf-8"))["data"]
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise TrainerError('policy.rlaif: Curate\'s answer is not {"data": [...]}') from None
        if not isinstance(data, list) or len(data) != len(items):
            got = len(data) if isinstance(data, list) else "no list of"
            raise TrainerError(f"policy.rlaif: Curate gave {got} rewards for {len(items)} samples")
        return [_scored(i, d) for i, d in enumerate(data)]

    def _send(self, body):
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(self._wait)
            req = urllib.request.Request(self.url, data=body, method="POST", headers={
                "Content-Type": "application/json", "Accept": "application/json",
                "Authorization": "Bearer " + self.token})
            self._wait = min(MAX_WAIT, self.backoff * 2 ** attempt)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as res:
                    raw = res.read(MAX_ANSWER_BYTES + 1)
                if len(raw) > MAX_ANSWER_BYTES:
                    raise TrainerError(f"policy.rlaif: Curate's answer is over {MAX_ANSWER_BYTES} bytes")
                return raw
            except urllib.error.HTTPError as e:
                detail = _problem(e)
                if e.code not in RETRYABLE:
                    raise TrainerError(f"policy.rlaif: Curate refused the step's samples (HTTP {e.code}){detail}") from None
                last = f"HTTP {e.code}{detail}"
                after = _retry_after(e)
                if after is not None:
                    self._wait = min(MAX_WAIT, after)
            except (urllib.error.URLError, OSError) as e:
                last = str(getattr(e, "reason", e))
        raise TrainerError(f"policy.rlaif: no reward from Curate at {self.url} after {self.retries + 1} tries: {last}")


def _problem(e):
    """': field: message; ...' from a problem+json answer, or its detail."""
    try:
        p = json.loads(e.read(1 << 20).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, OSError):
        return ""
    if not isinstance(p, dict):
        return ""
    fields = [f"{x.get('field')}: {x.get('message')}" for x in p.get("errors") or [] if isinstance(x, dict)]
    if fields:
        return ": " + "; ".join(fields)
    return f": {p['detail']}" if isinstance(p.get("detail"), str) and p["detail"] else ""


def _retry_after(e):
    try:
        v = float(e.headers.get("Retry-After", ""))
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v >= 0 else None


def _number(v):
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def _scored(i, d):
    if not isinstance(d, dict):
        raise TrainerError(f"policy.rlaif: reward {i} is not an object")
    r = d.get("reward")
    if r is not None and not _number(r):
        raise TrainerError(f"policy.rlaif: reward {i} is not a finite number: {json.dumps(r)[:40]}")
    comps = {}
    for name, c in (d.get("components") or {}).items():
        if isinstance(c, dict) and not c.get("invalid") and _number(c.get("value")):
            comps[name] = float(c["value"])
    return Scored(reward=None if r is None else float(r), components=comps, conflict=bool(d.get("conflict")),
                  invalid=str(d.get("invalid") or ""))
