"""Greedy text generation for the sentiment and extractive-QA experiments (seed 001 §4.2–4.3, App. B:
temperature 0, top-p 1, at most 30 new tokens).

Generator specs mirror the scorers: ``hf:NAME_OR_PATH`` (transformers ``generate`` with greedy decoding; the
tokenizer's chat template is applied when it has one) and ``openai:MODEL`` (an OpenAI-compatible
``/v1/chat/completions`` endpoint with ``temperature=0``). Replies are cached per (generator identity, prompt)
in the ``llm_generations`` table, so reruns cost nothing.

>>> # doctest: +SKIP
>>> get_generator("openai:qwen2.5-72b").generate(["Classify the sentiment ..."])
['1']
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Callable

from ..db import now, transaction
from ..errors import CulturaError
from .llm import OpenAIEndpoint
from .llm import base_url as resolve_base_url
from .registry import Registry
from .scorers import load_hf_causal_lm, weights_checksum

if TYPE_CHECKING:
    from ..project import Project

MAX_TOKENS = 30


class TextGenerator:
    """``generate(prompts) -> replies`` with greedy decoding; subclasses implement ``_generate_batch``."""

    family = ""

    def __init__(self, *, batch_size: int = 8, max_tokens: int = MAX_TOKENS):
        self.batch_size = int(batch_size)
        self.max_tokens = int(max_tokens)
        self.stats = {"calls": 0, "generated": 0}

    @property
    def identity(self) -> str:
        raise NotImplementedError

    def _generate_batch(self, prompts: list[str]) -> list[str]:
        raise NotImplementedError

    def generate(self, prompts) -> list[str]:
        prompts = list(prompts)
        out: list[str] = []
        for i in range(0, len(prompts), self.batch_size):
            batch = prompts[i:i + self.batch_size]
            res = self._generate_batch(batch)
            self.stats["calls"] += 1
            self.stats["generated"] += len(batch)
            out += [r or "" for r in res]
        return out


class HFGenerator(TextGenerator):
    """Greedy decoding with a local transformers causal LM (shares the loaded model with the scorer)."""

    family = "hf"

    def __init__(self, name: str, *, device: str | None = None, **kw):
        super().__init__(**kw)
        self.name = name
        self.device_arg = device

    @property
    def identity(self) -> str:

        return f"hf:{self.name}@{weights_checksum(load_hf_causal_lm(self.name, self.device_arg)[3])}"

    def _generate_batch(self, prompts):
        import torch  # deferred: heavy optional dependency, loaded on first use


        tok, model, dev, _ = load_hf_causal_lm(self.name, self.device_arg)
        if getattr(tok, "chat_template", None):
            prompts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                               add_generation_prompt=True) for p in prompts]
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            tok.padding_side = side
        limit = getattr(model.config, "n_positions", None) or getattr(model.config, "max_position_embeddings", 0)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        if limit and ids.shape[1] + self.max_tokens > limit:
            keep = max(1, limit - self.max_tokens)
            ids, mask = ids[:, -keep:], mask[:, -keep:]
        with torch.no_grad():
            gen = model.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev), do_sample=False,
                                 max_new_tokens=self.max_tokens, pad_token_id=pad)
        return [tok.decode(g[ids.shape[1]:], skip_special_tokens=True).strip() for g in gen]


class OpenAIChatGenerator(OpenAIEndpoint, TextGenerator):
    """Greedy replies from an OpenAI-compatible chat endpoint (``temperature=0, top_p=1``)."""

    family = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, client=None, timeout: float = 120.0, **kw):
        super().__init__(**kw)
        self.model = model
        self.base_url = resolve_base_url(base_url)
        self.timeout = timeout
        self._client = client

    @property
    def identity(self) -> str:
        return f"openai:{self.model}@{self.host}"


    def _generate_batch(self, prompts):
        import openai  # deferred: heavy optional dependency, loaded on first use

        out = []
        for p in prompts:
            try:
                resp = self.client.chat.completions.create(
                    model=self.model, messages=[{"role": "user", "content": p}], temperature=0, top_p=1,
                    max_tokens=self.max_tokens)
            except openai.APIConnectionError:
                raise CulturaError(f"Cannot reach the chat endpoint at {self.host}. "
                                   "Check OPENAI_BASE_URL.") from None
            out.append((resp.choices[0].message.content or "") if resp.choices else "")
        return out


#: The text generator families (a :class:`cultura.models.registry.Registry`; plugins: entry points
#: ``cultura.generators``).
GENERATORS: Registry[TextGenerator] = Registry(
    "LLM generator", TextGenerator, entry_point_group="cultura.generators",
    examples="'hf:cultura-tiny-gpt2' or 'openai:MODEL'",
    builtins={"hf": lambda rest, **kw: HFGenerator(rest, **kw),
              "openai": lambda rest, **kw: OpenAIChatGenerator(rest, **kw)})


def register_generator(family: str, factory: Callable[..., TextGenerator]) -> None:
    """Register ``factory(rest, **options) -> TextGenerator`` for specs ``family:rest``."""
    GENERATORS.register(family, factory)


def get_generator(spec: "str | TextGenerator", **options: Any) -> TextGenerator:
    """Build the generator named by ``spec`` (``hf:NAME_OR_PATH``, ``openai:MODEL``)."""
    return GENERATORS.build(spec, **options)


def generate_cached(project: Project, generator: TextGenerator, prompts) -> list[str]:
    """Replies for ``prompts`` (input order), read from / written to ``llm_generations``."""

    db = project.db
    prompts = list(prompts)
    model = generator.identity
    keys = [hashlib.sha256(p.encode("utf-8")).hexdigest() for p in prompts]
    found = {}
    for k in dict.fromkeys(keys):
        row = db.execute("SELECT reply FROM llm_generations WHERE model = ? AND prompt_key = ?",
                         [model, k]).fetchone()
        if row is not None:
            found[k] = row[0]
    todo = [(k, p) for k, p in dict(zip(keys, prompts)).items() if k not in found]
    step = max(generator.batch_size * 4, 16)
    for i in range(0, len(todo), step):
        part = todo[i:i + step]
        replies = generator.generate([p for _, p in part])
        ts = now()
        with transaction(db):
            db["llm_generations"].upsert_all([{"model": model, "prompt_key": k, "reply": r, "created_at": ts}
                                             for (k, _), r in zip(part, replies)], pk=("model", "prompt_key"))
        found.update({k: r for (k, _), r in zip(part, replies)})
    return [found[k] for k in keys]
