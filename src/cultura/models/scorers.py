"""LLM scorers: log P(entity | masked context) from a local Hugging Face causal LM or an OpenAI-compatible
completions endpoint, batched and cached by (model, mode, context, entity).

Two modes (seed 001 §4.1 eq. (1); spec §5):

- ``sentence`` (default, the seed's convention): the log-likelihood of the completed context, i.e. the whole
  sentence with the entity in place of ``[MASK]`` (the sum of the log-probabilities of all its tokens). The
  text after the mask counts, so an entity is scored by how well it fits the whole context; for one context
  every entity shares the same text, so the comparison of eq. (1) is between entities.
- ``prefix``: ``log P(entity tokens | text before [MASK])`` — the entity's token log-probabilities given the
  context up to the mask, ignoring what follows it. Trailing whitespace of the prefix moves to the entity
  (``"I ate " + "sushi"`` is scored as ``"I ate" → " sushi"``), as lm-evaluation-harness does.

Both scorers condition the first scored token on a start-of-text token, the same way: the HF scorer prepends
the tokenizer's BOS token (its EOS token, the document separator, when it has no BOS — lm-evaluation-harness's
convention); an OpenAI-compatible server conditions on the BOS its tokenizer adds, or on the ``bos`` text the
spec gives (``openai:MODEL?bos=<|endoftext|>``). Where neither has a start token (a sentence, or a context that
opens with ``[MASK]`` in prefix mode, whose first token would be unconditioned) the item fails with
:data:`NO_START_REASON` in both scorers, never silently.

Scorer specs (a registry, like embedders): ``hf:NAME_OR_PATH`` (transformers; ``hf:cultura-tiny-gpt2`` builds a
tiny random GPT-2 locally, see :mod:`.tiny`) and ``openai:MODEL`` (``/v1/completions`` with ``echo=True``,
``logprobs=1``, ``max_tokens=0`` — what vLLM and the legacy OpenAI API support for prompt log-probabilities;
when a server refuses that, vLLM's ``prompt_logprobs`` extension, then ``max_tokens=1``; the generated token
is never counted). Options follow a ``?``: ``openai:MODEL?api=prompt_logprobs`` (or ``?mode=…``) forces vLLM's
form, ``?api=echo`` the echo form, ``?bos=TEXT`` a start token (see :class:`OpenAICompletionsScorer`).

>>> # doctest: +SKIP
>>> s = get_scorer("hf:cultura-tiny-gpt2")
>>> score_cached(project, s, [("I ate [MASK] today.", "sushi")])
array([-31.7])
"""
from __future__ import annotations

import hashlib
import math
import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..db import now, transaction
from ..errors import CulturaError, unknown
from ..executor import Executor, as_list, current_executor, ray_map, rebuild, set_torch_threads
from ..redact import scrub
from .embedders.base import file_sha256, hub_offline, offline_error, resolve_device
from .llm import OpenAIEndpoint
from .llm import base_url as resolve_base_url
from .registry import Registry
from .tiny import RANDOM_INIT, TINY_NAME, build_tiny_lm, folder_is_random_init, is_random_init

if TYPE_CHECKING:
    from ..project import Project

MODES = ("sentence", "prefix")
DEFAULT_MODE = "sentence"
MASK = "[MASK]"
NO_START_REASON = ("the scored text starts the prompt and the model has no start-of-text token to condition its "
                   "first token on; give the scorer one (openai:MODEL?bos=<|endoftext|>, or a tokenizer with a "
                   "BOS/EOS token)")


def split_mask(text: str) -> tuple[str, str]:
    """``(before, after)`` the single ``[MASK]`` of ``text``; an error unless it occurs exactly once."""
    n = text.count(MASK)
    if n != 1:
        raise CulturaError(f"A context needs exactly one {MASK}, found {n} in {text[:60]!r}.")
    before, _, after = text.partition(MASK)
    return before, after


SQL_CHUNK = 400


class LogProbScorer:
    """Scores ``(prefix, continuation)`` pairs: the summed log-probability of the continuation's tokens given
    the prefix. Subclasses implement :meth:`_score_batch`; batching lives here.

    Attributes: ``identity`` (family, model name and weights checksum or endpoint; keys the cache),
    ``batch_size``, ``stats`` (``calls``, ``scored``).
    """

    family = ""
    #: True for a family whose work is done by a server (an OpenAI-compatible endpoint, e.g. vLLM): the ``ray``
    #: executor leaves it in this process (the server is what scales out).
    remote_service = False
    #: How :func:`get_scorer` built this instance (``{"spec": ..., "options": {...}}``): a Ray actor builds the
    #: same scorer from it (None for an instance made directly; it is then sent pickled).
    recipe: dict | None = None

    def __init__(self, *, batch_size: int = 16):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise CulturaError(f"batch_size must be a positive integer, got {batch_size!r}.")
        self.batch_size = batch_size
        self.stats = {"calls": 0, "scored": 0}

    @property
    def identity(self) -> str:
        raise NotImplementedError

    @property
    def info(self) -> dict:
        return {"identity": self.identity, "family": self.family, "random_init": is_random_init(self.identity)}

    def _score_batch(self, pairs: list[tuple[str, str]]) -> list[tuple[float | None, int, str | None]]:
        """``[(logprob or None, n_tokens, reason or None)]``, one per ``(prefix, continuation)``."""
        raise NotImplementedError

    def score_pairs(self, pairs) -> list[tuple[float | None, int, str | None]]:
        """Score ``(prefix, continuation)`` pairs in batches (no cache)."""
        pairs = [shift_space(p, c) for p, c in pairs]
        out: list = []
        for i in range(0, len(pairs), self.batch_size):
            batch = pairs[i:i + self.batch_size]
            res = self._score_batch(batch)
            if len(res) != len(batch):
                raise CulturaError(f"Scorer {self.identity!r} returned {len(res)} scores for {len(batch)} inputs.")
            self.stats["calls"] += 1
            self.stats["scored"] += len(batch)
            out += res
        return out

    def score(self, items, *, mode: str = DEFAULT_MODE) -> list[float]:
        """log P for ``(context_with_mask, entity)`` items in ``mode`` (no cache; NaN for a failure)."""
        return [math.nan if lp is None else lp for lp, _, _ in self.score_pairs(to_pairs(items, mode))]


def shift_space(prefix: str, continuation: str) -> tuple[str, str]:
    """Move trailing whitespace of ``prefix`` to the front of ``continuation``."""
    stripped = prefix.rstrip()
    return stripped, prefix[len(stripped):] + continuation


def to_pairs(items, mode: str) -> list[tuple[str, str]]:
    """``(context, entity)`` items → ``(prefix, continuation)`` pairs for ``mode``."""
    if mode not in MODES:
        raise unknown("scoring mode", mode, MODES)
    out = []
    for context, entity in items:
        before, after = split_mask(context)
        out.append((before, entity) if mode == "prefix" else ("", before + entity + after))
    return out


# -- the cache -------------------------------------------------------------------------------------------

def context_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def score_cached(project: Project, scorer: LogProbScorer, items, *, mode: str = DEFAULT_MODE) -> np.ndarray:
    """log P for ``(context_with_mask, entity)`` items, in input order, from the ``llm_scores`` cache; only
    misses are computed (and written batch by batch, so an interrupted run keeps its work). A failed item is
    NaN (its reason is stored in the cache row)."""
    db = project.db
    items = [(c, e) for c, e in items]
    ex = current_executor()
    ex = ex if ex.is_ray and not scorer.remote_service else None
    model = scorer.identity
    keys = [(context_key(c), e) for c, e in items]
    uniq = list(dict.fromkeys(keys))
    found: dict[tuple[str, str], float] = {}
    by_ctx: dict[str, list[str]] = {}
    for ck, ent in uniq:
        by_ctx.setdefault(ck, []).append(ent)
    for ck, ents in by_ctx.items():
        for i in range(0, len(ents), SQL_CHUNK):
            part = ents[i:i + SQL_CHUNK]
            marks = ",".join("?" * len(part))
            for ent, lp in db.execute(
                    f"SELECT entity, logprob FROM llm_scores WHERE model = ? AND mode = ? AND context_key = ? "
                    f"AND entity IN ({marks})", [model, mode, ck, *part]).fetchall():
                found[(ck, ent)] = math.nan if lp is None else float(lp)
    text_of = {context_key(c): c for c, _ in items}
    misses = [k for k in uniq if k not in found]
    step = max(scorer.batch_size * 4, 32)
    parts = [misses[i:i + step] for i in range(0, len(misses), step)]
    if ex is not None and ex.wants(len(misses)):
        done = _ray_score(scorer, ex, parts, text_of, mode)
    else:
        done = ((part, scorer.score_pairs(to_pairs([(text_of[ck], ent) for ck, ent in part], mode)))
                for part in parts)
    for part, res in done:
        ts = now()
        rows = [{"model": model, "mode": mode, "context_key": ck, "entity": ent, "logprob": lp, "n_tokens": n,
                 "status": "ok" if lp is not None else "failed", "reason": reason, "created_at": ts}
                for (ck, ent), (lp, n, reason) in zip(part, res)]
        with transaction(db):
            db["llm_scores"].upsert_all(rows, pk=("model", "mode", "context_key", "entity"))
        for (ck, ent), (lp, _, _) in zip(part, res):
            found[(ck, ent)] = math.nan if lp is None else float(lp)
    return np.array([found[k] for k in keys], dtype=np.float64)


class ScoreActor:
    """A Ray Data actor: builds the scorer once (from its :attr:`LogProbScorer.recipe`, on the actor's device,
    or the instance sent pickled) and scores one chunk of ``(context, entity)`` items per call. A failure to
    build it comes back as the ``fatal`` column."""

    def __init__(self, recipe: dict, identity: str, batch_size: int, device: str, threads: int):
        self.error = ""
        set_torch_threads(threads)
        try:
            def make(spec, opts):
                if SCORERS.parse(spec)[0] == "hf":
                    opts["device"] = device
                return get_scorer(spec, **opts)

            sc = rebuild(recipe, identity, make)
            sc.batch_size = batch_size
            self.scorer = sc
        except CulturaError as e:
            self.error = str(e)

    def __call__(self, batch: dict) -> dict:
        out: dict[str, list] = {"group": [], "i": [], "logprob": [], "n_tokens": [], "reason": [], "error": []}
        for g, mode, contexts, entities in zip(batch["group"], batch["mode"], batch["contexts"], batch["entities"]):
            try:
                if self.error:
                    raise CulturaError(self.error)
                res = self.scorer.score_pairs(to_pairs(list(zip(as_list(contexts), as_list(entities))), str(mode)))
            except CulturaError as e:
                res, err = [(None, 0, None)], str(e)
            else:
                err = ""
            for i, (lp, n, reason) in enumerate(res):
                out["group"].append(int(g))
                out["i"].append(i)
                out["logprob"].append(math.nan if lp is None else float(lp))
                out["n_tokens"].append(int(n))
                out["reason"].append(reason or "")
                out["error"].append(err)
        return {"group": np.array(out["group"], dtype=np.int64), "i": np.array(out["i"], dtype=np.int64),
                "logprob": np.array(out["logprob"], dtype=np.float64),
                "n_tokens": np.array(out["n_tokens"], dtype=np.int64),
                "reason": np.array(out["reason"], dtype=object), "fatal": np.array(out["error"], dtype=object)}


def _ray_score(scorer: LogProbScorer, executor: Executor, parts: list, text_of: dict, mode: str):
    """``(part, results)`` per chunk of misses scored on Ray (in any order), each chunk the one a local run
    scores in one :meth:`LogProbScorer.score_pairs` call; the scorer's ``stats`` count the Ray calls."""
    recipe = scorer.recipe if scorer.recipe is not None else {"object": scorer}
    groups = [{"group": g, "mode": mode, "contexts": [text_of[ck] for ck, _ in part],
               "entities": [ent for _, ent in part]} for g, part in enumerate(parts)]
    device = executor.device
    pending: dict[int, dict[int, tuple]] = {}
    for batch in ray_map(groups, ScoreActor, executor=executor, constructor_kwargs={
            "recipe": recipe, "identity": scorer.identity, "batch_size": scorer.batch_size, "device": device,
            "threads": executor.actor_threads}):
        for g, i, lp, n, reason in zip(batch["group"].tolist(), batch["i"].tolist(), batch["logprob"].tolist(),
                                       batch["n_tokens"].tolist(), batch["reason"].tolist()):
            got = pending.setdefault(g, {})
            got[i] = (None if math.isnan(lp) else float(lp), int(n), reason or None)
            if len(got) == len(parts[g]):
                del pending[g]
                scorer.stats["calls"] += math.ceil(len(parts[g]) / scorer.batch_size)
                scorer.stats["scored"] += len(parts[g])
                yield parts[g], [got[k] for k in range(len(parts[g]))]


# -- Hugging Face causal LM --------------------------------------------------------------------------------

@lru_cache(maxsize=4)
def load_hf_causal_lm(name: str, device: str | None = None):
    """``(tokenizer, model, device, resolved_name)`` for a transformers causal LM (cached per process)."""

    path = str(build_tiny_lm()) if name == TINY_NAME else name
    try:
        from transformers import (  # deferred: heavy optional dependency, loaded on first use
            AutoModelForCausalLM,
            AutoTokenizer,
        )

        local = os.path.isdir(path)
        tok = AutoTokenizer.from_pretrained(path, local_files_only=local or hub_offline())
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=local or hub_offline())
    except OSError as e:
        raise offline_error(f"hf:{name}", e, local_hint="or give a local folder: hf:/path/to/model") from e
    dev = resolve_device(device)
    model.to(dev)
    model.eval()
    return tok, model, dev, path


def weights_checksum(path: str) -> str:
    """sha256 (first 12 hex) of the first weights file of a local or hub-cached model folder."""

    folder = path
    if not os.path.isdir(folder):
        try:
            from transformers.utils import cached_file  # deferred: heavy optional dependency, loaded on first use

            folder = os.path.dirname(cached_file(path, "config.json"))
        except Exception:  # noqa: BLE001 - no local copy: identity without checksum
            return "unknown"
    for pattern in ("model.safetensors", "pytorch_model.bin"):
        p = os.path.join(folder, pattern)
        if os.path.exists(p):
            return file_sha256(p)[:12]
    shards = sorted(f for f in os.listdir(folder) if f.endswith((".safetensors", ".bin")))
    return file_sha256(os.path.join(folder, shards[0]))[:12] if shards else "unknown"


class HFScorer(LogProbScorer):
    """A local transformers causal LM. Spec ``hf:NAME_OR_PATH`` (``hf:cultura-tiny-gpt2`` for the tiny test
    model). ``max_length`` truncates the prefix from the left (the continuation is always kept)."""

    family = "hf"

    def __init__(self, name: str, *, device: str | None = None, batch_size: int = 16, max_length: int = 1024):
        super().__init__(batch_size=batch_size)
        if not name:
            raise CulturaError("The hf scorer needs a model name or folder: hf:NAME_OR_PATH.")
        self.name = name
        self.device_arg = device
        self.max_length = int(max_length)
        self._identity: str | None = None

    @property
    def loaded(self):
        return load_hf_causal_lm(self.name, self.device_arg)

    @property
    def identity(self) -> str:
        if self._identity is None:
            path = self.loaded[3]
            mark = f"/{RANDOM_INIT}" if folder_is_random_init(path) else ""
            self._identity = f"hf:{self.name}@{weights_checksum(path)}{mark}"
        return self._identity

    @property
    def tokenizer(self):
        return self.loaded[0]

    def _score_batch(self, pairs):
        import torch  # deferred: heavy optional dependency, loaded on first use

        tok, model, dev, _ = self.loaded
        bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        pad = tok.pad_token_id if tok.pad_token_id is not None else (bos if bos is not None else 0)
        seqs, spans, out = [], [], []
        limit = min(self.max_length, getattr(model.config, "n_positions", None)
                    or getattr(model.config, "max_position_embeddings", None) or self.max_length)
        for prefix, cont in pairs:
            ctx = tok(prefix, add_special_tokens=False)["input_ids"] if prefix else []
            cids = tok(cont, add_special_tokens=False)["input_ids"]
            ids = ([bos] if bos is not None else []) + ctx + cids
            if len(cids) >= limit:
                seqs.append(ids[:1])
                spans.append(-2)
                continue
            if len(ids) > limit:
                ids = ids[len(ids) - limit:]
            # no start token and nothing before the continuation: its first token is unconditioned
            n = len(cids) if len(ids) > len(cids) else -1
            seqs.append(ids)
            spans.append(n)
        width = max(len(s) for s in seqs)
        input_ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            input_ids[i, :len(s)] = torch.tensor(s)
            mask[i, :len(s)] = 1
        with torch.no_grad():
            logits = model(input_ids=input_ids.to(dev), attention_mask=mask.to(dev)).logits.float()
            logp = torch.log_softmax(logits, dim=-1).cpu()
        for i, (s, n) in enumerate(zip(seqs, spans)):
            if n == -2:
                out.append((None, 0, f"the scored text is longer than the model's context ({limit} tokens)"))
                continue
            if n < 0:
                out.append((None, 0, NO_START_REASON))
                continue
            if n == 0:
                out.append((None, 0, "the continuation has no tokens"))
                continue
            pos = torch.arange(len(s) - n, len(s))
            lp = logp[i, pos - 1, torch.tensor(s[len(s) - n:])].sum().item()
            out.append((float(lp), n, None))
        return out


# -- OpenAI-compatible completions ---------------------------------------------------------------------------

class OpenAICompletionsScorer(OpenAIEndpoint, LogProbScorer):
    """Prompt log-probabilities from ``/v1/completions`` of an OpenAI-compatible server (vLLM, llama.cpp
    server, the legacy OpenAI API). Spec ``openai:MODEL`` (options after ``?``: ``openai:MODEL?api=prompt_logprobs``);
    the base URL comes from ``base_url``, else ``OPENAI_BASE_URL``.

    ``api`` picks the request form:

    - ``echo``: ``echo=True, logprobs=1, max_tokens=0`` (``max_tokens=1`` when a server refuses 0; the generated
      token is never counted). Tokens are assigned to the entity by their ``text_offset``.
    - ``prompt_logprobs``: vLLM's extension, ``extra_body={"prompt_logprobs": 1}`` with ``max_tokens=1``; the
      answer's ``choices[i].prompt_logprobs`` is one entry per prompt token (the first is ``null``), each
      ``{token_id: {"logprob", "rank", "decoded_token"}}``. The prompt token is the entry named by
      ``prompt_token_ids`` when the server returns them, else the one entry, else the entry that is not rank 1
      (the prompt token is always listed; a second entry is the top-1 alternative). Token boundaries come from
      the decoded tokens, laid back from the end of the prompt (the first token's text is unknown).
    - ``auto`` (default): ``echo`` with ``max_tokens=0``; if the server rejects that (HTTP 400),
      ``prompt_logprobs``; if that is rejected or answered without prompt log-probabilities, ``echo`` with
      ``max_tokens=1``. The form that worked is kept for later batches (``resolved_api``).

    Either way every token that overlaps the entity counts (a token straddling the boundary in full), and an
    entity whose first token has no log-probability (it starts the prompt and the server added no BOS) is a
    failure with :data:`NO_START_REASON`, as in the HF scorer. ``bos`` (``?bos=<|endoftext|>``) is a start
    token's text put before every prompt, for servers whose tokenizer adds none (GPT-2, Qwen); it is part of
    the identity, so its scores are cached apart.
    """

    family = "openai"
    remote_service = True  # the server does the work (vLLM: 'vllm serve MODEL'): the ray executor leaves it here
    APIS = ("auto", "echo", "prompt_logprobs")

    def __init__(self, model: str, *, base_url: str | None = None, batch_size: int = 16, max_tokens: int = 0,
                 client=None, timeout: float = 120.0, api: str = "auto", bos: str = ""):
        super().__init__(batch_size=batch_size)
        if not model:
            raise CulturaError("The openai scorer needs a model name: openai:MODEL.")
        if api not in self.APIS:
            raise unknown("completions log-probability API", api, self.APIS)
        self.model = model
        self.base_url = resolve_base_url(base_url)
        self.max_tokens = int(max_tokens)
        self.timeout = timeout
        self._client = client
        self.api = api
        self.bos = bos or ""
        # the forms still to try, in order; the first one is the one in use
        if api == "prompt_logprobs":
            self._forms = ["prompt_logprobs"]
        elif api == "echo" or self.max_tokens != 0:
            self._forms = ["echo0", "echo1"] if self.max_tokens == 0 else ["echo1"]
        else:
            self._forms = ["echo0", "prompt_logprobs", "echo1"]

    @property
    def identity(self) -> str:
        return f"openai:{self.model}@{self.host}" + (f"?bos={self.bos}" if self.bos else "")

    @property
    def resolved_api(self) -> str:
        """The request form in use: ``echo`` (max_tokens 0), ``echo+1`` (max_tokens 1) or ``prompt_logprobs``."""
        return {"echo0": "echo", "echo1": "echo+1", "prompt_logprobs": "prompt_logprobs"}[self._forms[0]]

    def _create(self, form: str, prompts: list[str]):
        if form == "prompt_logprobs":
            return self.client.completions.create(model=self.model, prompt=prompts, max_tokens=1, temperature=0,
                                                  extra_body={"prompt_logprobs": 1})
        return self.client.completions.create(model=self.model, prompt=prompts,
                                              max_tokens=0 if form == "echo0" else max(self.max_tokens, 1),
                                              echo=True, logprobs=1, temperature=0)

    def _request(self, prompts: list[str]):
        """``(form, response)`` from the first form the server accepts; rejected forms are dropped."""
        import openai  # deferred: heavy optional dependency, loaded on first use

        while True:
            form = self._forms[0]
            try:
                resp = self._create(form, prompts)
            except openai.BadRequestError as e:
                if len(self._forms) == 1:
                    raise CulturaError(f"The completions endpoint at {self.host} refused "
                                       f"the {self.resolved_api} request for prompt log-probabilities "
                                       f"({_short(e)}); try --llm openai:{self.model}?api=echo or "
                                       f"?api=prompt_logprobs.") from None
                self._forms.pop(0)
                continue
            except openai.APIConnectionError:
                raise CulturaError(f"Cannot reach the completions endpoint at {self.host}. "
                                   "Check OPENAI_BASE_URL.") from None
            except openai.NotFoundError:
                raise CulturaError(f"The endpoint does not serve model {self.model!r} on /v1/completions; check "
                                   "the name (--llm openai:MODEL).") from None
            if form == "prompt_logprobs" and len(self._forms) > 1 and not any(
                    _extra(ch, "prompt_logprobs") for ch in resp.choices):
                self._forms.pop(0)  # the server ignored the unknown parameter: not vLLM
                continue
            return form, resp

    def _score_batch(self, pairs):
        # the start token, when given, conditions the first scored token (spans shift past it)
        pairs = [(self.bos + p, c) for p, c in pairs]
        prompts = [p + c for p, c in pairs]
        form, resp = self._request(prompts)
        choices = sorted(resp.choices, key=lambda ch: ch.index)
        if len(choices) != len(prompts):
            raise CulturaError(f"The completions endpoint returned {len(choices)} choices for {len(prompts)} "
                               "prompts; it must answer a list prompt with one choice per prompt.")
        if form == "prompt_logprobs":
            return [_sum_prompt_logprobs(ch, p + c, len(p), len(p) + len(c)) for ch, (p, c) in zip(choices, pairs)]
        return [_sum_span(ch, len(p), len(p) + len(c)) for ch, (p, c) in zip(choices, pairs)]


def _short(e) -> str:
    msg = scrub(getattr(e, "message", None) or str(e))  # scrubbed before it is cut
    return msg if len(msg) <= 160 else msg[:157] + "..."


def _extra(obj, name: str):
    """A field outside the OpenAI schema (vLLM's ``prompt_logprobs``, ``prompt_token_ids``) of an SDK object."""
    val = getattr(obj, name, None)
    if val is None:
        val = (getattr(obj, "model_extra", None) or {}).get(name)
    return val


def _prompt_token_entry(entry: dict, token_id) -> dict | None:
    """The prompt token's ``{"logprob", "rank", "decoded_token"}`` among one position's entries."""
    if not entry:
        return None
    if token_id is not None:
        hit = entry.get(str(token_id), entry.get(token_id))
        if hit is not None:
            return hit
    vals = list(entry.values())
    if len(vals) == 1:
        return vals[0]
    return max(vals, key=lambda v: v.get("rank") or 0)  # the top-1 alternative has rank 1


def _sum_prompt_logprobs(choice, prompt: str, start: int, end: int) -> tuple[float | None, int, str | None]:
    """Sum the logprobs of the prompt tokens overlapping ``prompt[start:end]`` from vLLM's ``prompt_logprobs``.

    Token offsets: the decoded tokens of positions 1.. must spell the end of ``prompt``; position 0 (no
    log-probability) covers whatever precedes them (nothing when it is a BOS token)."""
    plp = _extra(choice, "prompt_logprobs")
    if not plp:
        return None, 0, "the endpoint returned no prompt_logprobs (needs vLLM's prompt_logprobs support)"
    ids = _extra(choice, "prompt_token_ids")
    if ids is not None and len(ids) != len(plp):
        ids = None
    toks: list[tuple[str, float | None]] = []
    for i, entry in enumerate(plp):
        if i == 0 or entry is None:
            toks.append(("", None))
            continue
        hit = _prompt_token_entry(entry, ids[i] if ids else None)
        if hit is None or hit.get("decoded_token") is None:
            return None, 0, "a prompt_logprobs entry has no decoded_token; token boundaries are unknown"
        toks.append((hit["decoded_token"], float(hit["logprob"])))
    tail = "".join(t for t, _ in toks[1:])
    if not prompt.endswith(tail):
        return None, 0, ("the decoded prompt tokens do not spell the prompt (a byte-level token splits a "
                         "character?); token boundaries are unknown, try ?api=echo")
    total, n = 0.0, 0
    off = len(prompt) - len(tail)
    spans = [(0, off, toks[0][1])]
    for t, val in toks[1:]:
        spans.append((off, off + len(t), val))
        off += len(t)
    for i, (tok_start, tok_end, val) in enumerate(spans):
        if tok_start == tok_end:  # BOS, or a partial character whose text the next token carries
            if i == 0 or not start <= tok_start < end:
                continue
        elif tok_start >= end or tok_end <= start:
            continue
        if val is None:
            return None, 0, NO_START_REASON
        total += val
        n += 1
    if n == 0:
        return None, 0, "no prompt token falls inside the entity span"
    return total, n, None


def _sum_span(choice, start: int, end: int) -> tuple[float | None, int, str | None]:
    lp = getattr(choice, "logprobs", None)
    if lp is None or not getattr(lp, "tokens", None):
        return None, 0, "the endpoint returned no prompt log-probabilities (needs echo + logprobs support)"
    tokens, lps, offs = lp.tokens, lp.token_logprobs, lp.text_offset
    if offs is None or len(offs) != len(tokens):
        return None, 0, "the endpoint returned no text offsets for the prompt tokens"
    total, n = 0.0, 0
    for tok, val, off in zip(tokens, lps, offs):
        tok_end = off + len(tok)
        if off >= end or tok_end <= start:
            continue
        if val is None:
            return None, 0, NO_START_REASON
        total += float(val)
        n += 1
    if n == 0:
        return None, 0, "no prompt token falls inside the entity span"
    return total, n, None


# -- registry ----------------------------------------------------------------------------------------------

ScorerFactory = Callable[..., LogProbScorer]
#: The LM scorer families (a :class:`cultura.models.registry.Registry`; plugins: entry points ``cultura.scorers``).
SCORERS: Registry[LogProbScorer] = Registry(
    "LLM scorer", LogProbScorer, entry_point_group="cultura.scorers",
    examples="'hf:cultura-tiny-gpt2', 'hf:/path/to/model' or 'openai:MODEL'",
    builtins={"hf": lambda rest, **kw: HFScorer(rest, **kw),
              "openai": lambda rest, **kw: OpenAICompletionsScorer(rest, **kw)})


def register_scorer(family: str, factory: ScorerFactory) -> None:
    """Register ``factory(rest, **options) -> LogProbScorer`` for specs ``family:rest``."""
    SCORERS.register(family, factory)


def get_scorer(spec: "str | LogProbScorer", **options: Any) -> LogProbScorer:
    """Build the scorer named by ``spec`` (``hf:NAME_OR_PATH``, ``openai:MODEL``, options as
    ``MODEL?api=echo``); an instance is returned as is."""
    if isinstance(spec, LogProbScorer):
        return spec
    hub_offline()  # a hub that cannot be reached is switched off now: a missing model fails in one sentence
    family, rest = SCORERS.parse(spec)
    rest, query = split_spec_options(rest)
    try:
        scorer = SCORERS.build(f"{family}:{rest}", **{**query, **options})
        scorer.recipe = {"spec": spec, "options": dict(options)}  # how a Ray actor builds the same scorer
        return scorer
    except TypeError as e:
        if "unexpected keyword" not in str(e):
            raise
        raise CulturaError(f"The {family} scorer does not take option(s) {', '.join(sorted(query))}: {e}.") from None


def split_spec_options(rest: str) -> tuple[str, dict[str, str]]:
    """``"MODEL?api=echo&x=1"`` → ``("MODEL", {"api": "echo", "x": "1"})``; a name without ``?key=value``
    options is returned as is. ``mode`` is read as ``api`` (``openai:MODEL?mode=prompt_logprobs``)."""
    name, sep, query = rest.rpartition("?")
    if not sep or not query or "=" not in query:
        return rest, {}
    opts: dict[str, str] = {}
    for part in query.split("&"):
        key, eq, val = part.partition("=")
        if not eq or not key.strip():
            raise CulturaError(f"Scorer option {part!r} in {rest!r} is not key=value; write MODEL?api=echo.")
        key = key.strip()
        opts["api" if key == "mode" else key] = val.strip()
    if "batch_size" in opts:
        try:
            opts["batch_size"] = int(opts["batch_size"])
        except ValueError:
            raise CulturaError(f"batch_size must be an integer, got {opts['batch_size']!r}.") from None
    return name, opts

