"""Turning conversations into token ids and loss labels.

The tokenizer's own chat template is used when it has one; otherwise a plain
layout, one ``role: content`` line per message with the end-of-sequence token
after each assistant reply. Labels are -100 (ignored by the loss) everywhere
except on the assistant replies being trained on.

Only the tokenizer's documented methods are used (``__call__``,
``apply_chat_template``), so this module needs no torch and is tested with a
small stand-in tokenizer.
"""

IGNORE = -100


class ChatFormat:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.uses_template = bool(getattr(tokenizer, "chat_template", None))
        self.eos = getattr(tokenizer, "eos_token", None) or ""
        bos_id = getattr(tokenizer, "bos_token_id", None)
        eos_id = getattr(tokenizer, "eos_token_id", None)
        # Templates write their own start token; the plain layout starts with
        # BOS where the model has a distinct one.
        self._lead = [bos_id] if (not self.uses_template and bos_id is not None and bos_id != eos_id) else []

    def render(self, messages, add_generation_prompt=False):
        """The conversation as text; with add_generation_prompt the text ends
        where the assistant's next reply begins."""
        if self.uses_template:
            if not messages:
                return ""
            return self.tokenizer.apply_chat_template(
                [m.as_dict() for m in messages], tokenize=False, add_generation_prompt=add_generation_prompt)
        lines = []
        for m in messages:
            lines.append(f"{m.role}: {m.content}" + (self.eos if m.role == "assistant" else ""))
        if add_generation_prompt:
            lines.append("assistant: ")
        return "\n".join(lines)

    def segments(self, messages):
        """The rendered conversation cut into (text, trainable) pieces whose
        concatenation is the whole text."""
        full = self.render(messages)
        pieces = self._segments_by_prefix(messages, full)
        if pieces is None:
            pieces = self._segments_by_search(messages, full)
        return [(text, trainable) for text, trainable in pieces if text]

    def _segments_by_prefix(self, messages, full):
        # Each reply is what rendering it adds to the text rendered up to the
        # generation prompt before it. This only holds when the template renders
        # earlier turns the same whatever follows; None when it does not.
        pieces, done = [], ""
        for i, m in enumerate(messages):
            if m.role != "assistant":
                continue
            before = self.render(messages[:i], add_generation_prompt=True)
            after = self.render(messages[: i + 1])
            if not (before.startswith(done) and after.startswith(before) and full.startswith(after)):
                return None
            pieces.append((before[len(done):], False))
            pieces.append((after[len(before):], bool(m.weight)))
            done = after
        pieces.append((full[len(done):], False))
        return pieces

    def _segments_by_search(self, messages, full):
        # Fallback for templates that rewrite earlier turns (some drop past
        # reasoning): find each reply's text in order, with the EOS token after it.
        pieces, cursor = [], 0
        for m in messages:
            content = m.content.strip()
            if m.role != "assistant" or not content:
                continue
            start = full.find(content, cursor)
            if start < 0:
                continue
            end = start + len(content)
            if self.eos and full.startswith(self.eos, end):
                end += len(self.eos)
            pieces.append((full[cursor:start], False))
            pieces.append((full[start:end], bool(m.weight)))
            cursor = end
        pieces.append((full[cursor:], False))
        return pieces

    def ids(self, text):
        if not text:
            return []
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_chat(self, messages, max_length):
        """(input_ids, labels) for SFT, cut to max_length from the right; None
        when no trained token is left after cutting."""
        input_ids, labels = list(self._lead), [IGNORE] * len(self._lead)
        for text, trainable in self.segments(messages):
            ids = self.ids(text)
            input_ids += ids
            labels += ids if trainable else [IGNORE] * len(ids)
        input_ids, labels = input_ids[:max_length], labels[:max_length]
        if all(label == IGNORE for label in labels):
            return None
        return input_ids, labels

    def completion_text(self, prompt, completion):
        """(prompt text ending at the generation prompt, reply text)."""
        before = self.render(prompt, add_generation_prompt=True)
        full = self.render(tuple(prompt) + tuple(completion))
        if full.startswith(before):
            return before, full[len(before):]
        return before, "".join(m.content for m in completion) + self.eos

    def encode_pair(self, prompt, completion, max_length):
        """(input_ids, labels) with only the completion trained. When too long
        the completion keeps at least half the window (cut from its end) and the
        prompt loses its oldest tokens, so the turn being judged stays whole."""
        before, reply = self.completion_text(prompt, completion)
        p = list(self._lead) + self.ids(before)
        c = self.ids(reply)
        if len(p) + len(c) > max_length:
            keep_c = min(len(c), max(max_length - len(p), max_length // 2))
            c = c[:keep_c]
            room = max_length - keep_c
            p = p[len(p) - room:] if room > 0 else []
        return p + c, [IGNORE] * len(p) + c

    def encode_prompt(self, prompt, max_length):
        """Token ids of a prompt ready for generation, keeping the newest max_length tokens."""
        ids = list(self._lead) + self.ids(self.render(prompt, add_generation_prompt=True))
        return ids[-max_length:]
