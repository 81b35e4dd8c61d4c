"""A stand-in for curate_trainer.runtime made of torch alone, so that the
grpo and ppo methods' loop (policy.py) runs through the real command line
code on a CPU where transformers and peft are not installed.

It offers what policy.py asks of runtime: a word-level tokenizer over a
fixed vocabulary (the plain chat layout, as a tokenizer without a chat
template gets), a bigram language model whose trainable per-token offset
is the adapter (switched off by disable_adapter, as PEFT's is) with a
sampling generate(), and save_model writing the adapter's tensors. The
real runtime, with transformers and peft, is exercised by
test_torch_methods.py and make gpu-check.
"""

import contextlib
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch

WORDS = ("user: assistant: system: tell me about cats dogs birds fish please now good great fine "
         "bad awful poor").split()
PAD, EOS = 0, 1
VOCAB = ["<pad>", "<eos>"] + WORDS
GOOD = {"good", "great", "fine"}


@dataclass
class Run:
    cfg: object
    emitter: object
    stop: object
    device: str
    dtype: object

    @property
    def hp(self):
        return self.cfg.hyperparameters

    def artifact_path(self, path):
        path = Path(path)
        try:
            return str(path.relative_to(self.cfg.run_dir))
        except ValueError:
            return str(path)


class Tokenizer:
    pad_token_id, eos_token_id, bos_token_id = PAD, EOS, None
    pad_token, eos_token = "<pad>", "<eos>"
    chat_template = None

    def __call__(self, text, add_special_tokens=False):
        ids = []
        for w in re.findall(r"<eos>|<pad>|[^\s<]+", text):
            if w not in VOCAB:
                raise ValueError(f"the toy tokenizer has no word {w!r}")
            ids.append(VOCAB.index(w))
        return {"input_ids": ids}

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(VOCAB[i] for i in ids if not (skip_special_tokens and i in (PAD, EOS)))


class Out:
    def __init__(self, logits, hidden):
        self.logits = logits
        self.hidden_states = (hidden,)


class ToyLM(torch.nn.Module):
    def __init__(self, dim=8, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.embed = torch.nn.Parameter(torch.randn(len(VOCAB), dim, generator=g), requires_grad=False)
        self.out = torch.nn.Parameter(torch.randn(dim, len(VOCAB), generator=g), requires_grad=False)
        self.adapter = torch.nn.Parameter(torch.zeros(len(VOCAB), dim))
        self.enabled = True
        self.config = SimpleNamespace(hidden_size=dim)
        self.generation_config = SimpleNamespace(eos_token_id=EOS)
        self.rng = torch.Generator().manual_seed(seed + 1)

    def forward(self, input_ids, attention_mask=None, output_hidden_states=False):
        h = self.embed[input_ids]
        if self.enabled:
            h = h + self.adapter[input_ids]
        return Out(h @ self.out, h)

    @contextlib.contextmanager
    def disable_adapter(self):
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = True

    def generate(self, input_ids, attention_mask, max_new_tokens, num_return_sequences=1, do_sample=True,
                 temperature=1.0, top_p=1.0, pad_token_id=PAD, use_cache=True, eos_token_id=None):
        seqs = input_ids.repeat_interleave(num_return_sequences, dim=0)
        done = torch.zeros(seqs.shape[0], dtype=torch.bool)
        for _ in range(max_new_tokens):
            logits = self(seqs).logits[:, -1, :] / temperature
            if do_sample:
                nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=self.rng).squeeze(-1)
            else:
                nxt = logits.argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, pad_token_id), nxt)
            seqs = torch.cat([seqs, nxt.unsqueeze(-1)], dim=1)
            done |= nxt == EOS
            if done.all():
                break
        return seqs


def choose_device(requested, require_gpu):
    return "cpu"


def cuda_count():
    return 0


def join_processes(device):
    return device


def is_main():
    return True


def choose_dtype(name, device):
    return torch.float32


def seed_everything(seed):
    random.seed(seed)
    torch.manual_seed(seed)


def route_library_logs():
    pass


def load_tokenizer(path):
    return Tokenizer()


def load_causal_lm(run, path):
    return ToyLM(seed=json.loads((Path(path) / "config.json").read_text())["seed"])


def add_lora(run, model, task_type):
    return model


def disable_dropout(model):
    pass


def trainable_summary(model):
    return "the toy adapter"


def save_model(run, model, tokenizer, relative, kind):
    run.emitter.progress("saving")
    path = Path(run.cfg.output_dir) / relative
    path.mkdir(parents=True, exist_ok=True)
    torch.save({n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}, path / "adapter.pt")
    run.emitter.artifact(run.artifact_path(path), kind)
    return path
