"""Scoring IRS candidates: heuristic rewards, their weighted sum, and the
DW-GRPO rule that moves the weights between iterations.

Heuristic scores, each in [0, 1]:

- ``rel``   relevance: the share of the query's content words found in the answer;
- ``faith`` faithfulness: the share of the answer's content words found in the
  context (in the query when there is no context), so unsupported words lower it;
- ``conc``  conciseness: ``1 - len(answer) / len(context)`` in words, clipped to
  [0, 1]; without a context the answer is measured against the generation budget.

A reward is ``R = sum(w_k * score_k)`` over the weighted terms. Weights may be
negative, which makes a score a penalty (``R = 0.35*chain + 0.25*emergency -
0.15*risk_penalty + 0.25*teacher`` is one such combination).

The DW-GRPO update raises the weight of the terms whose average has stalled:
slopes of each term's recent history, ``exp(-slope / temperature)``, scaled to
sum to 3, then mixed into the old weights with momentum 0.8.
"""

import math
import re

# Words too common to say anything about relevance or grounding.
STOPWORDS = frozenset("""
a an the and or but if then else of to in on at by for with from as is are was were be been being
it its this that these those there here i you he she we they me him her us them my your his our their
do does did doing have has had having not no so than too very can could will would shall should may
might must what which who whom whose when where why how all any each some such only own same just
about into over under again further once also
""".split())

# CJK characters are words on their own; other scripts split on non-word characters.
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+", re.UNICODE)

WEIGHT_BUDGET = 3.0  # new weights sum to 3.0, as in the DW-GRPO design
MOMENTUM = 0.8  # share of the old weights kept
FRESH = 0.2  # share of the new ones mixed in


def words(text):
    """Lower-cased word tokens of a text."""
    return _WORD.findall(text.lower())


def content_words(text):
    """The set of words of a text that are not stopwords."""
    return {w for w in words(text) if w not in STOPWORDS}


def relevance(query, answer):
    q = content_words(query)
    if not q:
        return 0.0
    return len(q & content_words(answer)) / len(q)


def faithfulness(answer, reference):
    a = content_words(answer)
    if not a:
        return 0.0
    return len(a & content_words(reference)) / len(a)


def conciseness(answer, reference_words):
    """1 - len(answer)/reference_words, clipped to [0, 1]."""
    n = len(words(answer))
    if reference_words <= 0:
        return 1.0 if n == 0 else 0.0
    return min(1.0, max(0.0, 1.0 - n / reference_words))


def heuristic_scores(query, answer, context="", budget_words=256):
    """rel, faith and conc for one answer. Without a context, faithfulness is
    checked against the query and conciseness against `budget_words`."""
    has_context = bool(context.strip())
    reference = context if has_context else query
    length = len(words(context)) if has_context else budget_words
    return {
        "rel": relevance(query, answer),
        "faith": faithfulness(answer, reference),
        "conc": conciseness(answer, length),
    }


def combine(scores, weights):
    """R = sum(w_k * score_k) over every weighted term; a weighted term with
    no score is an error rather than a silent zero."""
    total = 0.0
    for key, weight in weights.items():
        if key not in scores:
            raise ValueError(f"no score for weighted term {key!r}")
        total += weight * scores[key]
    return total


def slope(values):
    """Least-squares slope of values against 0, 1, 2, ... (numpy.polyfit
    degree 1, first coefficient)."""
    n = len(values)
    if n < 2:
        raise ValueError("a slope needs at least two values")
    mean_x = (n - 1) / 2
    mean_y = sum(values) / n
    num = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values))
    den = sum((x - mean_x) ** 2 for x in range(n))
    return num / den


def next_weights(weights, history, window, temperature):
    """One DW-GRPO update. `history` maps each term to its per-iteration
    averages, oldest first; every term needs at least two."""
    slopes = {k: slope(history[k][-window:]) for k in weights}
    # exp(-s/T) normalised over the terms; subtracting the largest exponent
    # first leaves the ratios unchanged and keeps exp from overflowing.
    exponents = {k: -s / temperature for k, s in slopes.items()}
    top = max(exponents.values())
    exps = {k: math.exp(e - top) for k, e in exponents.items()}
    total = sum(exps.values())
    fresh = {k: WEIGHT_BUDGET * (v / total) for k, v in exps.items()}
    return {k: MOMENTUM * weights[k] + FRESH * fresh[k] for k in weights}


class DynamicWeights:
    """The weights of the reward terms and the history that moves them."""

    def __init__(self, initial, window=5, temperature=2.0, dynamic=True):
        self.weights = dict(initial)
        self.window = window
        self.temperature = temperature
        self.dynamic = dynamic
        self.history = {k: [] for k in self.weights}

    def record(self, breakdown):
        """Add one iteration's average score per term and update the weights
        (once every term has two points). Returns the new weights."""
        for k in self.weights:
            self.history[k].append(float(breakdown[k]))
        if self.dynamic and all(len(v) >= 2 for v in self.history.values()):
            self.weights = next_weights(self.weights, self.history, self.window, self.temperature)
        return dict(self.weights)


def best_candidate(candidates, rewards):
    """Index of the highest-reward candidate with any text (the first on a
    tie), or None when every candidate is empty or unscored."""
    best = None
    for i, (text, reward) in enumerate(zip(candidates, rewards)):
        if not text.strip() or reward is None or math.isnan(reward):
            continue
        if best is None or reward > rewards[best]:
            best = i
    return best


def mean_scores(score_dicts, keys):
    """Average of each term over a list of score dicts (0 for an empty list)."""
    if not score_dicts:
        return {k: 0.0 for k in keys}
    return {k: sum(s[k] for s in score_dicts) / len(score_dicts) for k in keys}
