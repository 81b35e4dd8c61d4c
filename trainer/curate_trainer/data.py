"""Reading the run's JSONL data files.

Three shapes are read, one JSON object per line:

- chat (SFT): ``{"messages": [{"role", "content"}, ...]}`` (OpenAI chat format);
- preference (DPO, reward): ``{"prompt": [...], "chosen": [...], "rejected": [...]}``
  (TRL's conversational preference format), with optional ``rating_chosen`` and
  ``rating_rejected`` from 1 to 5;
- prompt (IRS): ``{"prompt": [...], "context": "optional RAG text"}``.

A file with any bad line is refused whole; the message lists the bad lines.
"""

import dataclasses
import json
from dataclasses import dataclass
from typing import Optional

from .errors import DataError
from .paths import check_data_file

ROLES = ("system", "user", "assistant")
MESSAGE_KEYS = {"role", "content", "name", "weight"}
MAX_LINE_BYTES = 8 << 20
MAX_EXAMPLES = 1_000_000
MAX_REPORTED = 20


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    # OpenAI's per-message weight: an assistant message with weight 0 is
    # shown to the model but not trained on.
    weight: int = 1

    def as_dict(self):
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class ChatExample:
    messages: tuple
    line: int = 0


@dataclass(frozen=True)
class PreferenceExample:
    prompt: tuple
    chosen: tuple
    rejected: tuple
    rating_chosen: Optional[float] = None
    rating_rejected: Optional[float] = None
    line: int = 0


@dataclass(frozen=True)
class PromptExample:
    prompt: tuple
    context: str = ""
    line: int = 0

    @property
    def query(self):
        """The last user message: what the answer must be relevant to."""
        for m in reversed(self.prompt):
            if m.role == "user":
                return m.content
        return ""


class _LineError(Exception):
    pass


def _content(value, where):
    """Message content as text: a string, or OpenAI's list of text parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for i, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _LineError(f'{where}.content[{i}]: only {{"type": "text", "text": ...}} parts are supported')
            parts.append(part["text"])
        return "".join(parts)
    raise _LineError(f"{where}.content: must be a string, got {type(value).__name__}")


def _message(raw, where):
    if not isinstance(raw, dict):
        raise _LineError(f"{where}: must be an object with role and content")
    unknown = sorted(set(raw) - MESSAGE_KEYS)
    if unknown:
        raise _LineError(f"{where}: unsupported key {unknown[0]!r} (allowed: role, content, name, weight)")
    role = raw.get("role")
    if role not in ROLES:
        raise _LineError(f"{where}.role: must be one of system, user, assistant, got {role!r}")
    if "content" not in raw or raw["content"] is None:
        raise _LineError(f"{where}.content: is missing")
    weight = raw.get("weight", 1)
    if weight not in (0, 1) or isinstance(weight, bool):
        raise _LineError(f"{where}.weight: must be 0 or 1")
    if weight == 0 and role != "assistant":
        raise _LineError(f"{where}.weight: only assistant messages can have weight 0")
    return Message(role=role, content=_content(raw["content"], where), weight=weight)


def _messages(raw, where, allow_string_role=None):
    """A list of messages; a plain string is read as one message of
    `allow_string_role` (TRL's standard, non-conversational form)."""
    if isinstance(raw, str) and allow_string_role:
        return (Message(role=allow_string_role, content=raw),)
    if not isinstance(raw, list):
        raise _LineError(f"{where}: must be a list of messages")
    if not raw:
        raise _LineError(f"{where}: must not be empty")
    return tuple(_message(m, f"{where}[{i}]") for i, m in enumerate(raw))


def _completion(raw, where):
    msgs = _messages(raw, where, allow_string_role="assistant")
    for i, m in enumerate(msgs):
        if m.role != "assistant":
            raise _LineError(f"{where}[{i}].role: must be assistant, got {m.role!r}")
    if not any(m.content.strip() for m in msgs):
        raise _LineError(f"{where}: the reply is empty")
    return msgs


def _rating(obj, key):
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= 5:
        raise _LineError(f"{key}: must be a number from 1 to 5, got {value!r}")
    return float(value)


def _prompt(raw, where):
    msgs = _messages(raw, where, allow_string_role="user")
    if not any(m.role == "user" for m in msgs):
        raise _LineError(f"{where}: needs at least one user message")
    if msgs[-1].role == "assistant":
        raise _LineError(f"{where}: must not end with an assistant message")
    return msgs


def parse_preference(obj):
    for key in ("prompt", "chosen", "rejected"):
        if key not in obj:
            raise _LineError(f"{key}: is missing")
    return PreferenceExample(
        prompt=_prompt(obj["prompt"], "prompt"),
        chosen=_completion(obj["chosen"], "chosen"),
        rejected=_completion(obj["rejected"], "rejected"),
        rating_chosen=_rating(obj, "rating_chosen"),
        rating_rejected=_rating(obj, "rating_rejected"),
    )


def parse_chat(obj):
    """A chat example; a preference line trains on its prompt and chosen reply."""
    if "messages" not in obj:
        if "prompt" in obj and "chosen" in obj:
            pair = parse_preference(obj)
            return ChatExample(messages=pair.prompt + pair.chosen)
        raise _LineError('messages: is missing (expected {"messages": [...]})')
    msgs = _messages(obj["messages"], "messages")
    if not any(m.role == "assistant" and m.weight and m.content.strip() for m in msgs):
        raise _LineError("messages: needs at least one non-empty assistant message to train on")
    return ChatExample(messages=msgs)


def parse_prompt(obj):
    """An IRS prompt; preference and chat lines give their prompt part."""
    if "prompt" in obj:
        prompt = _prompt(obj["prompt"], "prompt")
    elif "messages" in obj:
        msgs = _messages(obj["messages"], "messages")
        # Keep everything up to the last user message: the reply to it is what IRS generates.
        last_user = max((i for i, m in enumerate(msgs) if m.role == "user"), default=None)
        if last_user is None:
            raise _LineError("messages: needs at least one user message")
        prompt = msgs[: last_user + 1]
    else:
        raise _LineError('prompt: is missing (expected {"prompt": [...], "context": "..."})')
    context = obj.get("context", "")
    if context is None:
        context = ""
    if isinstance(context, list) and all(isinstance(c, str) for c in context):
        context = "\n\n".join(context)
    if not isinstance(context, str):
        raise _LineError("context: must be a string or a list of strings")
    return PromptExample(prompt=prompt, context=context)


def read_examples(path, parse, field="train_file", required=True):
    """Parse every line of a JSONL file with `parse`; raise DataError listing
    bad lines (the first MAX_REPORTED of them). Blank lines are skipped."""
    path = check_data_file(path, field)
    examples, problems, more = [], [], 0
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, start=1):
            problem = None
            if len(line) > MAX_LINE_BYTES:
                problem = f"line {lineno}: longer than {MAX_LINE_BYTES} bytes"
            elif line.strip():
                try:
                    obj = json.loads(line.decode("utf-8"))
                    if not isinstance(obj, dict):
                        raise _LineError("must be a JSON object")
                    examples.append(dataclasses.replace(parse(obj), line=lineno))
                except UnicodeDecodeError:
                    problem = f"line {lineno}: not valid UTF-8"
                except json.JSONDecodeError as e:
                    problem = f"line {lineno}: not valid JSON ({e.msg} at column {e.colno})"
                except _LineError as e:
                    problem = f"line {lineno}: {e}"
            if problem:
                if len(problems) < MAX_REPORTED:
                    problems.append(problem)
                else:
                    more += 1
            if len(examples) > MAX_EXAMPLES:
                raise DataError(path, [f"more than {MAX_EXAMPLES} examples"])
    if problems:
        raise DataError(path, problems, more)
    if required and not examples:
        raise DataError(path, ["no examples"])
    return examples
