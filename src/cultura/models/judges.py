"""The relevance judge (seed 004 §3.2 eq. (3); spec §6): a 1–5 cultural-relevance score per (image, culture).

The judge gets the rubric (seed 004 Table 12, ``templates/prompts/caire_relevance_score.j2``), the linked
entity's KB text (or the titles of the top-k linked entities), the image when the model takes images, and one
culture label at a time. Its output is constrained to the tokens 1–5 — ``guided_choice`` for servers that
support it (vLLM), else an optional ``logit_bias`` (token ids are model-specific, so the caller gives them),
else plain prompting — and the probabilities of the five tokens at the first output position give

    score = sum_s s · P(s)   (P renormalised over "1".."5")  — :func:`expected_score`

with the argmax kept (:func:`argmax_score`). The judge asks for
``top_logprobs=20`` alternatives (the OpenAI API's maximum) so that all five digits are normally scored;
a digit still absent gets probability 0 AND the result says so: ``missing`` lists the absent digits and the
``reason`` names them (status stays ``ok``; the suite counts such rows as ``n_incomplete``). When the endpoint returns no usable log-probabilities the reply text is
parsed (first digit 1–5, status ``parsed``, one-hot distribution); otherwise the row fails with its reason.

Judges are a registry: ``openai:MODEL`` (``openai-vision:MODEL`` sends the image too) and ``stub`` — a
deterministic in-process stand-in for demos and tests that talks to no model.
"""
from __future__ import annotations

import base64
import hashlib
import io
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import CulturaError, unknown
from ..redact import scrub
from .embedders.base import safe_image
from .llm import OpenAIEndpoint, render_prompt
from .llm import base_url as resolve_base_url
from .registry import Registry
from ..lazy import lazy

pixels = lazy("cultura.pixels")  # Pillow: imported by the first image a judge looks at

special = lazy("scipy.special")  # imported on first use (start-up)

SCORE_TOKENS = ("1", "2", "3", "4", "5")
TEMPLATE = "caire_relevance_score.j2"
#: Chain-of-thought prompt ending in "Score: N" (seed 004 §5.2; without retrieved text it is Baseline 2).
COT_TEMPLATE = "caire_relevance.j2"
STYLES = ("score", "cot")
_SCORE_LINE = re.compile(r"score\W{0,6}$", re.IGNORECASE)



# -- the judge's score (seed 004 §3, spec §6) ---------------------------------------------------------------

SCORE_TOKENS = ("1", "2", "3", "4", "5")


class ScoreInputError(CulturaError, ValueError):
    """The judge's score log-probabilities cannot be turned into a score; the message names the fix."""


def _score_logprobs(logprobs: Any) -> np.ndarray:
    if not isinstance(logprobs, Mapping):
        raise ScoreInputError('logprobs must be a mapping score token → log-probability, e.g. {"1": -2.3, ...}.')
    keyed = {str(k).strip(): v for k, v in logprobs.items()}
    missing = [s for s in SCORE_TOKENS if s not in keyed]
    extra = sorted(set(keyed) - set(SCORE_TOKENS))
    if missing or extra:
        raise ScoreInputError(
            f'logprobs must have exactly the keys "1".."5"; missing {missing}, unexpected {extra}. '
            "Use -inf for a score the judge never produced."
        )
    lp = _score_array([keyed[s] for s in SCORE_TOKENS])
    if np.all(lp == -np.inf):
        raise ScoreInputError("logprobs gives probability 0 to every score; the expectation is undefined.")
    return lp


def _score_array(values) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if np.any(np.isnan(arr)) or np.any(arr == np.inf):
        raise ScoreInputError("logprobs contains NaN or +inf; pass log-probabilities (-inf allowed for p = 0).")
    if np.any(arr > 1e-9):
        raise ScoreInputError("logprobs contains positive values; pass log-probabilities (<= 0), not probabilities.")
    return arr


def expected_score(logprobs: Mapping[Any, float]) -> float:
    """Expected relevance score ``sum_s s · P(s)`` over the judge's renormalised probabilities of "1".."5".

    ``P(s) = exp(logprob_s) / sum_{t=1..5} exp(logprob_t)`` (the five token probabilities renormalised, the
    rest of the vocabulary ignored), so the result lies in [1, 5]. Seed 004 §3 eq. (1) (CAIRe relevance
    score); spec §6.

    >>> expected_score({"1": 0.0, "2": 0.0, "3": 0.0, "4": 0.0, "5": 0.0})
    3.0
    >>> round(expected_score({"1": -30.0, "2": -30.0, "3": -30.0, "4": -0.7, "5": -0.7}), 3)
    4.5
    """
    p = special.softmax(_score_logprobs(logprobs))
    return float(np.clip(np.dot(np.arange(1, 6), p), 1.0, 5.0))



def argmax_score(logprobs: Mapping[Any, float]) -> int:
    """The most probable score token (1–5) of the judge; ties go to the lower score. Seed 004 §3; spec §6.

    >>> argmax_score({"1": -3.0, "2": -2.0, "3": -0.1, "4": -2.5, "5": -4.0})
    3
    """
    return int(np.argmax(_score_logprobs(logprobs)) + 1)


@dataclass
class JudgeResult:
    """One rating: the five log-probabilities, the expectation, the argmax, and status / reason."""

    status: str                                   # ok | parsed | failed
    logprobs: dict = field(default_factory=dict)  # "1".."5" -> log-probability (-inf when absent)
    score: float | None = None
    argmax: int | None = None
    reason: str | None = None
    reply: str | None = None
    missing: list = field(default_factory=list)   # score digits absent from the returned alternatives


#: Alternatives requested per position: the OpenAI API's maximum, so that the five digits are all scored even
#: when other tokens ("Score", " ", "The") take some of the top places.
DEFAULT_TOP_LOGPROBS = 20


def result_from_logprobs(top: list[tuple[str, float]], reply: str | None = None) -> JudgeResult:
    """Build a :class:`JudgeResult` from the first position's ``[(token, logprob)]`` (and the reply text as a
    fallback)."""
    lps = {s: -math.inf for s in SCORE_TOKENS}
    for tok, lp in top:
        t = str(tok).strip()
        if t in lps and lp is not None and float(lp) > lps[t]:
            lps[t] = float(lp)
    if any(v > -math.inf for v in lps.values()):
        missing = [t for t in SCORE_TOKENS if lps[t] == -math.inf]
        reason = None
        if missing:
            floor = min((float(lp) for _, lp in top if lp is not None), default=-math.inf)
            reason = (f"score token(s) {', '.join(missing)} not among the {len(top)} returned alternatives; their "
                      f"probability is taken as 0 (each is below exp({floor:.2f}))")
        return JudgeResult("ok", lps, expected_score(lps), argmax_score(lps), reply=reply, reason=reason,
                           missing=missing)
    m = re.search(r"[1-5]", reply or "")
    if m:
        one = {s: (0.0 if s == m.group(0) else -math.inf) for s in SCORE_TOKENS}
        return JudgeResult("parsed", one, float(m.group(0)), int(m.group(0)),
                           reason="no score token among the returned log-probabilities; parsed the reply",
                           reply=reply)
    return JudgeResult("failed", reason=f"the judge gave no score 1-5 (reply {str(reply)[:80]!r})", reply=reply)


def result_from_cot(content: list | None, reply: str | None) -> JudgeResult:
    """A chain-of-thought reply ending in "Score: N": the five digits' probabilities at the position of that
    N (from the reply's per-token ``top_logprobs``) give the expectation, like the constrained judge; without
    log-probabilities the last "Score: N" of the text is taken (status ``parsed``)."""
    text = ""
    hit = None
    for entry in content or []:
        tok = str(entry.get("token", "")) if isinstance(entry, dict) else str(getattr(entry, "token", ""))
        if tok.strip() in SCORE_TOKENS and _SCORE_LINE.search(text.rstrip()):
            hit = entry
        text += tok
    if hit is not None:
        get = (lambda o, k: o.get(k)) if isinstance(hit, dict) else getattr
        alts = get(hit, "top_logprobs") or []
        top = [((a.get("token") if isinstance(a, dict) else a.token),
                (a.get("logprob") if isinstance(a, dict) else a.logprob)) for a in alts]
        res = result_from_logprobs(top + [(get(hit, "token"), get(hit, "logprob"))], reply)
        if res.status == "ok":
            return res
    matches = re.findall(r"score\W{0,6}([1-5])\b", reply or "", flags=re.IGNORECASE)
    if matches:
        d = matches[-1]
        one = {s: (0.0 if s == d else -math.inf) for s in SCORE_TOKENS}
        return JudgeResult("parsed", one, float(d), int(d), reply=reply,
                           reason="no log-probabilities at the final score; parsed 'Score: N' from the reply")
    return JudgeResult("failed", reason=f"no 'Score: N' line in the reply (ends {str(reply)[-80:]!r})", reply=reply)


class RelevanceJudge:
    """Rates one (image, culture) pair. Implement :meth:`rate`; set ``supports_images`` when the model
    takes the image."""

    supports_images = False

    @property
    def identity(self) -> str:
        raise NotImplementedError

    def rate(self, *, culture: str, entity_text: str = "", titles: list[str] | None = None,
             image_path: str | None = None) -> JudgeResult:
        raise NotImplementedError


def image_data_url(path: str, *, max_side: int = 768) -> str:
    """A JPEG data URL of the image (longest side at most ``max_side``)."""

    im = safe_image(pixels.open_displayed(path, "RGB"))  # the picture a browser shows, a thin strip cropped
    im.thumbnail((max_side, max_side))
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


class OpenAIJudge(OpenAIEndpoint, RelevanceJudge):
    """An OpenAI-compatible chat model asked for one score token with ``logprobs=True, top_logprobs=20``.

    ``vision``: attach the image. ``guided``: send ``guided_choice: ["1".."5"]`` (vLLM). ``logit_bias``:
    ``{token_id: bias}`` for the five score tokens of this model's tokenizer (OpenAI-style constraint)."""

    def __init__(self, model: str, *, base_url: str | None = None, vision: bool = False, guided: bool = False,
                 logit_bias: dict | None = None, top_logprobs: int = DEFAULT_TOP_LOGPROBS, client=None,
                 timeout: float = 120.0, style: str = "score", max_tokens: int = 1024):
        if style not in STYLES:
            raise unknown("judge style", style, STYLES)
        self.style = style
        self.max_tokens = int(max_tokens)
        if not model:
            raise CulturaError("The judge needs a model name: openai:MODEL.", param="judge")
        if not 5 <= int(top_logprobs) <= 20:
            raise CulturaError(f"top_logprobs must be between 5 and 20 (the five score digits must fit; the API "
                               f"allows at most 20), got {top_logprobs}.", param="top_logprobs")
        self.model = model
        self.base_url = resolve_base_url(base_url)
        self.supports_images = bool(vision)
        self.guided = guided
        self.logit_bias = logit_bias
        self.top_logprobs = int(top_logprobs)
        self.timeout = timeout
        self._client = client

    @property
    def identity(self) -> str:
        cot = "-cot" if self.style == "cot" else ""
        return f"openai{'-vision' if self.supports_images else ''}{cot}:{self.model}@{self.host}"


    def messages(self, *, culture, entity_text="", titles=None, image_path=None) -> list[dict]:
        prompt = render_prompt(COT_TEMPLATE if self.style == "cot" else TEMPLATE, culture=culture, entity_text=entity_text or "", titles=titles or [],
                               with_image=bool(image_path and self.supports_images))
        if image_path and self.supports_images:
            content: Any = [{"type": "text", "text": prompt},
                            {"type": "image_url", "image_url": {"url": image_data_url(image_path)}}]
        else:
            content = prompt
        return [{"role": "user", "content": content}]

    def rate(self, *, culture, entity_text="", titles=None, image_path=None) -> JudgeResult:
        import openai  # deferred: heavy optional dependency, loaded on first use

        kwargs: dict = dict(model=self.model, messages=self.messages(culture=culture, entity_text=entity_text,
                                                                     titles=titles, image_path=image_path),
                            max_tokens=1 if self.style == "score" else self.max_tokens, temperature=0,
                            logprobs=True, top_logprobs=self.top_logprobs)
        if self.logit_bias and self.style == "score":
            kwargs["logit_bias"] = self.logit_bias
        if self.guided and self.style == "score":
            kwargs["extra_body"] = {"guided_choice": list(SCORE_TOKENS)}
        try:
            resp = self.client.chat.completions.create(**kwargs)
        except openai.APIConnectionError:
            raise CulturaError(f"Cannot reach the judge endpoint at {self.host}. Check "
                               "OPENAI_BASE_URL.") from None
        except (openai.AuthenticationError, openai.NotFoundError) as e:
            raise CulturaError(f"The judge endpoint refused the call ({type(e).__name__}); check OPENAI_API_KEY "
                               f"and the model name {self.model!r}.") from None
        except openai.APIError as e:
            return JudgeResult("failed", reason=scrub(f"{type(e).__name__}: {e}")[:200])  # scrub, then cut
        if not resp.choices:
            return JudgeResult("failed", reason="the judge returned no choices")
        ch = resp.choices[0]
        reply = ch.message.content if ch.message else None
        top: list[tuple[str, float]] = []
        content = getattr(getattr(ch, "logprobs", None), "content", None) or []
        if self.style == "cot":
            return result_from_cot(content, reply)
        if content:
            first = content[0]
            top = [(t.token, t.logprob) for t in (first.top_logprobs or [])] + [(first.token, first.logprob)]
        return result_from_logprobs(top, reply)


class StubJudge(RelevanceJudge):
    """A deterministic in-process STUB judge for demos and tests — it consults no model.

    The "score" is high when the culture's name (or code) occurs in the entity text / titles, low otherwise,
    with a hash-seeded spread of log-probabilities so the expectation and the uncertainty vary per pair."""

    def __init__(self, *, seed: int = 0, aliases: dict[str, list[str]] | None = None):
        self.seed = int(seed)
        self.aliases = aliases or {}

    @property
    def identity(self) -> str:
        return f"stub-judge:seed={self.seed}"

    def rate(self, *, culture, entity_text="", titles=None, image_path=None) -> JudgeResult:
        text = " ".join([entity_text or "", *(titles or [])]).casefold()
        names = [culture, *self.aliases.get(culture, [])]
        hit = any(n and n.casefold() in text for n in names)
        h = hashlib.sha256(f"{self.seed}|{culture}|{entity_text}|{titles}".encode()).digest()
        peak = (4 + h[0] % 2) if hit else (1 + h[0] % 2)
        sharp = 0.5 + (h[1] / 255.0) * 2.5
        lps = {s: -sharp * abs(int(s) - peak) - 0.1 * (h[2 + i] / 255.0) for i, s in enumerate(SCORE_TOKENS)}
        norm = math.log(sum(math.exp(v) for v in lps.values()))
        lps = {s: v - norm for s, v in lps.items()}
        return JudgeResult("ok", lps, expected_score(lps), argmax_score(lps), reply=str(argmax_score(lps)))


JudgeFactory = Callable[..., RelevanceJudge]
#: The relevance judge families (a :class:`cultura.models.registry.Registry`; plugins: entry points
#: ``cultura.judges``).
JUDGES: Registry[RelevanceJudge] = Registry(
    "judge", RelevanceJudge, entry_point_group="cultura.judges",
    examples="'openai:MODEL', 'openai-vision:MODEL', 'openai-vision-cot:MODEL' or 'stub'",
    builtins={"openai": lambda rest, **kw: OpenAIJudge(rest, **kw),
              "openai-vision": lambda rest, **kw: OpenAIJudge(rest, vision=True, **kw),
              # chain-of-thought ("Score: N"); with context "none" this is seed 004's VLM baseline (Baseline 2)
              "openai-cot": lambda rest, **kw: OpenAIJudge(rest, style="cot", **kw),
              "openai-vision-cot": lambda rest, **kw: OpenAIJudge(rest, vision=True, style="cot", **kw),
              "stub": lambda rest, **kw: StubJudge(**({"seed": int(rest)} if rest else {}), **kw)})


def register_judge(family: str, factory: JudgeFactory) -> None:
    """Register ``factory(rest, **options) -> RelevanceJudge`` for specs ``family:rest``."""
    JUDGES.register(family, factory)


def get_judge(spec: "str | RelevanceJudge", **options) -> RelevanceJudge:
    """``openai:MODEL``, ``openai-vision:MODEL``, ``openai-cot:MODEL``, ``openai-vision-cot:MODEL`` (chain of
    thought ending "Score: N"), ``stub`` (or ``stub:SEED``); an instance is returned as is."""
    return JUDGES.build(spec, **options)
