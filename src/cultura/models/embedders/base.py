"""The `Embedder` interface: batching, normalisation, progress and call counting live here, once.

A model family subclasses :class:`Embedder` and implements the batch methods it supports:

- ``_embed_image_batch(images: list[PIL.Image]) -> array (n, d)``
- ``_embed_text_batch(texts: list[str]) -> array (n, d)``

Both may return a NumPy array, a torch tensor or a list of lists; the base turns the result into float32,
L2-normalises every row and checks there is one row per input. A family that embeds one modality only
leaves the other method alone: calling it raises :class:`ModelCapabilityError`.

>>> from cultura.models.embedders import get_embedder
>>> e = get_embedder("fake:dim=8")
>>> v = e.embed_texts(["tea", "coffee", "tea"])
>>> v.shape, bool((v[0] == v[2]).all())
((3, 8), True)
>>> e.stats["texts"]
3
"""
from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import json
import os
import socket
import urllib.parse
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from ...errors import CulturaError, unknown
from ...files import user_cache
from ...lazy import lazy
from ...progress import Progress
from ...progress import task as progress_task

Image = lazy("PIL.Image")  # Pillow: loaded by the first image (a run whose vectors are cached opens none)

# Inputs above this count show a progress bar (when ``progress`` is None = auto).
PROGRESS_MIN_ITEMS = 256

#: Named instructions (seed 000 App. U, Figure 24): ``@retrieval`` and ``@agnostic`` in a spec or option.
INSTRUCTION_PRESETS = {
    "retrieval": "Find an image that matches the given caption.",
    "agnostic": "Find an image that matches the given caption. Focus on the semantics instead of the textual "
                "language.",
}
#: How a text instruction is joined to each text unless a template is given.
DEFAULT_INSTRUCTION_TEMPLATE = "{instruction}\n{text}"


class ModelUnavailable(CulturaError):
    """A model's weights or server cannot be reached (offline hub, missing files, server down)."""


class ModelCapabilityError(CulturaError):
    """The model cannot embed this modality (e.g. a text-only sentence-transformers model asked for images)."""


class Embedder:
    """Embeds images and texts into one space; every row is float32 and L2-normalised.

    Parameters (keyword-only, shared by every family):
        device: "cpu", "cuda", "cuda:1"… or None/"auto" (CUDA when present). Used by torch families.
        batch_size: inputs per model call.
        progress: where batches report their progress (:mod:`cultura.progress`): a reporter, True (the
            calling context's reporter), False (nobody), or None: the context's reporter, only for more than
            ``PROGRESS_MIN_ITEMS`` inputs.

    Attributes:
        identity: stable string naming family, architecture, pretrained tag and weights checksum; it keys the
            embedding cache and goes with every result.
        info: dict with the same facts, spelled out.
        stats: counters of model calls: ``image_calls``, ``images``, ``text_calls``, ``texts``.
    """

    family: ClassVar[str] = ""
    #: True for a model built without trained weights (its numbers mean nothing); families set or override it
    random_init: bool = False
    #: not a model at all (the ``fake`` hash embedder): reports show it under a banner, help texts list it last
    non_model: bool = False
    supports_images: ClassVar[bool] = True
    supports_texts: ClassVar[bool] = True
    #: True for a family whose work is done by a server (an OpenAI-compatible endpoint): the ``ray`` executor
    #: leaves it in this process (the server is what scales out, e.g. vLLM).
    remote_service: ClassVar[bool] = False
    #: How :func:`get_embedder` built this instance (``{"spec": ..., "options": {...}}``): a Ray actor builds
    #: the same model from it (None for an instance made directly; it is then sent pickled).
    recipe: dict | None = None
    #: True when the text encoding depends on a language tag given beside the text (NLLB-CLIP's source-language
    #: token). Such a family's ``_embed_text_batch`` takes ``language=`` and the cache keys texts by language.
    language_aware: bool = False
    #: Families that can condition image embeddings on an instruction (a system prompt) set this and read
    #: ``self.instructions["image"]`` in ``_embed_image_batch``.
    supports_image_instruction: ClassVar[bool] = False
    #: ``{"text": str | None, "image": str | None, "template": str}`` (see :meth:`set_instructions`).
    instructions: dict = {}

    def __init_subclass__(cls, **kw):
        """A family's ``identity`` gets the instruction suffix appended, so that an instructed model is a
        different model everywhere its identity is used (embedding cache key, stored results)."""
        super().__init_subclass__(**kw)
        prop = cls.__dict__.get("identity")
        if isinstance(prop, property) and not getattr(prop.fget, "_with_instructions", False):
            fget = prop.fget

            def identity(self, _fget=fget):
                base = _fget(self)
                suffix = self.instruction_suffix()
                return base if not suffix or base.endswith(suffix) else base + suffix

            identity._with_instructions = True
            identity.__doc__ = fget.__doc__
            cls.identity = property(identity)

    def __init__(self, *, device: str | None = None, batch_size: int = 32, progress: Progress = None):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise CulturaError(f"batch_size must be a positive integer, got {batch_size!r}.")
        self.requested_device = device
        self.batch_size = batch_size
        self.progress = progress
        self.stats = {"image_calls": 0, "images": 0, "text_calls": 0, "texts": 0}
        self._dim: int | None = None

    # -- identity -------------------------------------------------------------------------------------
    @property
    def identity(self) -> str:
        """A stable string such as ``openclip:ViT-B-32/openai@1a2b3c4d5e6f``. Families override."""
        raise NotImplementedError

    @property
    def info(self) -> dict:
        """Identity facts as a dict (family, architecture, pretrained, weights_sha256, dim, device…)."""
        out = {"identity": self.identity, "family": self.family, "dim": self._dim,
               "device": getattr(self, "device", None), "random_init": self.random_init}
        if self.non_model:
            out["non_model"] = True
        if self.instructions:
            out["instructions"] = dict(self.instructions)
        return out

    # -- instructions (seed 000 App. U) -----------------------------------------------------------------
    def set_instructions(self, *, text: str | None = None, image: str | None = None,
                         template: str | None = None) -> "Embedder":
        """Condition the model on an instruction per modality (MLLM embedders: GME, ColQwen, E5-V…).

        ``text`` is joined to every text with ``template`` (default ``"{instruction}\\n{text}"``); ``image``
        is passed to families that support it (``supports_image_instruction``, e.g. ``openai`` with
        ``images="messages"``: a system message). ``@retrieval`` / ``@agnostic`` name seed 000's prompts
        (:data:`INSTRUCTION_PRESETS`). The instructions become part of :attr:`identity` (suffix
        ``#instr=<sha256[:12]>``), hence of the embedding cache key and of every stored result; the texts
        themselves are in :attr:`info`. Returns self."""
        text, image = resolve_instruction(text), resolve_instruction(image)
        if image and not self.supports_image_instruction:
            raise ModelCapabilityError(
                f"Model family {self.family!r} cannot condition image embeddings on an instruction. Use a "
                "family that can (e.g. 'openai:MODEL' with images=messages), or give a text instruction only.")
        template = template or DEFAULT_INSTRUCTION_TEMPLATE
        if text and ("{text}" not in template or "{instruction}" not in template):
            raise CulturaError(f"Instruction template {template!r} needs both {{instruction}} and {{text}}.")
        self.instructions = {k: v for k, v in (("text", text), ("image", image)) if v}
        if text and template != DEFAULT_INSTRUCTION_TEMPLATE:
            self.instructions["template"] = template
        return self

    def instruction_suffix(self) -> str:
        """``#instr=<sha256[:12]>`` of the instructions, or "" without any."""
        if not self.instructions:
            return ""
        blob = json.dumps(self.instructions, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return "#instr=" + hashlib.sha256(blob).hexdigest()[:12]

    def _instructed(self, texts: list[str]) -> list[str]:
        inst = self.instructions.get("text")
        if not inst:
            return texts
        template = self.instructions.get("template", DEFAULT_INSTRUCTION_TEMPLATE)
        return [template.replace("{instruction}", inst).replace("{text}", t) for t in texts]

    @property
    def dim(self) -> int:
        """Embedding dimension (computed from one text or image call when the family cannot tell)."""
        if self._dim is None:
            if self.supports_texts:
                self.embed_texts(["dim probe"])
            else:
                self.embed_images([Image.new("RGB", (8, 8))])
        return int(self._dim)

    def __repr__(self) -> str:
        try:
            ident = self.identity
        except Exception:  # identity may need a loaded model
            ident = self.family
        return f"<{type(self).__name__} {ident}>"

    # -- public API -----------------------------------------------------------------------------------
    def embed_images(self, images: Sequence[Any]) -> np.ndarray:
        """Embed PIL images; returns an ``(len(images), dim)`` float32 array with unit-norm rows. Every
        image is bounded by :func:`safe_image` first (no model preprocessing sees a thin strip)."""
        if not self.supports_images:
            raise ModelCapabilityError(
                f"Model {self.identity!r} embeds text only. Use an image-text model for images "
                "(e.g. 'openclip:ViT-B-32/openai' or 'st:TEXT_MODEL+clip-ViT-B-32').")
        return self._run([safe_image(im) for im in images], self._embed_image_batch, "image", "Embedding images")

    def embed_texts(self, texts: Sequence[str], *, language: str | None = None) -> np.ndarray:
        """Embed strings; returns an ``(len(texts), dim)`` float32 array with unit-norm rows.

        ``language`` (ISO 639-1 such as ``"hi"``, or a model-specific code such as ``"hin_Deva"``) is the
        language of the texts. A language-aware model (:attr:`language_aware`, e.g. NLLB-CLIP, whose tokenizer
        prefixes a source-language token) encodes it; the others ignore it."""
        texts = list(texts)
        bad = [t for t in texts if not isinstance(t, str)]
        if bad:
            raise CulturaError(f"embed_texts needs strings; got {type(bad[0]).__name__} {bad[0]!r}.")
        if not self.supports_texts:
            raise ModelCapabilityError(f"Model {self.identity!r} embeds images only.")
        fn = self._embed_text_batch
        if language and self.language_aware:
            def fn(batch, _lang=language):
                return self._embed_text_batch(batch, language=_lang)
        return self._run(self._instructed(texts), fn, "text", "Embedding texts")

    # -- to implement ---------------------------------------------------------------------------------
    def _embed_image_batch(self, images: list) -> Any:
        raise ModelCapabilityError(f"Model {self.identity!r} cannot embed images.")

    def _embed_text_batch(self, texts: list[str]) -> Any:
        raise ModelCapabilityError(f"Model {self.identity!r} cannot embed texts.")

    # -- machinery ------------------------------------------------------------------------------------
    def _run(self, items: list, fn: Callable[[list], Any], kind: str, label: str) -> np.ndarray:
        if not items:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        out: list[np.ndarray] = []
        bar = progress_task(label, len(items), progress=shown(self.progress, len(items)))
        try:
            for start in range(0, len(items), self.batch_size):
                batch = items[start:start + self.batch_size]
                arr = normalize(_to_numpy(fn(batch)))
                if arr.ndim != 2 or arr.shape[0] != len(batch):
                    raise CulturaError(
                        f"Model {self.identity!r} returned {arr.shape[0] if arr.ndim else 0} vectors for "
                        f"{len(batch)} {kind}s; each input needs exactly one row.")
                self.stats[f"{kind}_calls"] += 1
                self.stats[f"{kind}s"] += len(batch)
                self._dim = arr.shape[1]
                out.append(arr)
                bar.advance(len(batch))
        finally:
            bar.close()
        return out[0] if len(out) == 1 else np.concatenate(out, axis=0)

    def reset_stats(self) -> None:
        for k in self.stats:
            self.stats[k] = 0


#: No model preprocessing sees an image whose longer side is more than this many times its shorter one, or
#: with more than SAFE_MAX_PIXELS pixels: a 64 x 1,000,000 strip (allowed by the pixel cap) would otherwise
#: be resized by CLIP-style preprocessing to 224 x 3,500,000 (GBs of memory).
SAFE_MAX_ASPECT = 10.0
SAFE_MAX_PIXELS = 40_000_000


def safe_image(im: Any) -> Any:
    """``im`` bounded for model preprocessing: an extreme strip is centre-cropped to an aspect ratio of
    :data:`SAFE_MAX_ASPECT` (what the models' own resize-and-centre-crop keeps anyway) and a huge image is
    shrunk to :data:`SAFE_MAX_PIXELS`. Ordinary images are returned unchanged (same object, same pixels,
    so their embeddings do not change). Anything that is not a PIL image passes through."""
    size = getattr(im, "size", None)
    if not (isinstance(size, tuple) and len(size) == 2 and hasattr(im, "crop")):
        return im
    w, h = size
    if min(w, h) <= 0:
        return im
    if max(w, h) > SAFE_MAX_ASPECT * min(w, h):
        keep = max(1, int(SAFE_MAX_ASPECT * min(w, h)))
        box = ((w - keep) // 2, 0, (w - keep) // 2 + keep, h) if w > h else (0, (h - keep) // 2, w, (h - keep) // 2 + keep)
        im = im.crop(box)
        w, h = im.size
    if w * h > SAFE_MAX_PIXELS:
        scale = (SAFE_MAX_PIXELS / (w * h)) ** 0.5
        im = im.resize((max(1, int(w * scale)), max(1, int(h * scale))), reducing_gap=2.0)
    return im


def normalize(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation to float32 (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.divide(x, norms, out=x, where=norms > 0)
    return x


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor, without importing torch
        x = x.detach().float().cpu().numpy()
    return np.array(x, dtype=np.float32, copy=True)


def shown(progress: Progress, n: int) -> Progress:
    """An embedder's ``progress`` for a job of ``n`` inputs: None (auto) reports only above
    :data:`PROGRESS_MIN_ITEMS` inputs."""
    if progress is None:
        return None if n > PROGRESS_MIN_ITEMS else False
    return progress


# -- helpers shared by the torch families ------------------------------------------------------------
def resolve_device(device: str | None) -> str:
    """``None``/"auto" → "cuda" when torch sees a GPU, else "cpu" (imports torch)."""
    import torch  # deferred: heavy optional dependency, loaded on first use

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


def hub_offline() -> bool:
    """True when the Hugging Face hub is switched off (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE), or cannot be
    reached at all (its host does not resolve): then the hub is switched off for this process, so a missing
    model fails at once with one sentence instead of a minute of download retries."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().upper() in {"1", "ON", "YES", "TRUE"}:
            return True
    if not hub_reachable():
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            from huggingface_hub import constants  # deferred: heavy optional dependency, loaded on first use
            constants.HF_HUB_OFFLINE = True
        except Exception:  # pragma: no cover - huggingface_hub missing
            pass
        return True
    try:
        from huggingface_hub import constants  # deferred: heavy optional dependency, loaded on first use
        return bool(constants.HF_HUB_OFFLINE)
    except Exception:  # pragma: no cover - huggingface_hub missing
        return False


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub's host (``HF_ENDPOINT``, default huggingface.co) resolves, checked once per process with
    a short timeout (no request is sent)."""
    host = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or ""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(socket.getaddrinfo, host, 443).result(timeout=timeout)
        return True
    except Exception:  # gaierror, timeout: no route to the hub
        return False
    finally:
        pool.shutdown(wait=False)


def offline_error(spec: str, cause: BaseException | None = None, *, local_hint: str = "") -> ModelUnavailable:
    """The one message for weights that need the hub: offline → say so; online → the download failed."""
    hint = local_hint or "or use pretrained=None / a local path"
    if hub_offline():
        msg = (f"Model {spec!r} needs weights from the Hugging Face hub, which is offline (HF_HUB_OFFLINE=1). "
               f"Download them once with network access, {hint}.")
    else:
        msg = (f"Model {spec!r} needs weights from the Hugging Face hub and they could not be fetched"
               f"{f' ({type(cause).__name__}: {cause})' if cause else ''}. Check the name and your network, "
               f"{hint}.")
    err = ModelUnavailable(msg)
    err.__cause__ = cause
    return err


def _checksum_memo_path() -> Path | None:
    """Where weights' checksums are remembered (None: ``CULTURA_CACHE_DIR=off``, nothing remembered)."""
    base = user_cache()
    return None if base is None else base / "weights_sha256.json"


def file_sha256(path: str | os.PathLike, *, memo_min_bytes: int = 64 << 20) -> str:
    """sha256 of a weights file. Large files are memoised by (path, size, mtime) in the user cache."""
    p = Path(path).resolve()
    st = p.stat()
    key = f"{p}|{st.st_size}|{st.st_mtime_ns}"
    memo_file = _checksum_memo_path()
    remember = memo_file is not None and st.st_size >= memo_min_bytes  # no user cache: nothing remembered
    memo: dict = {}
    if remember and memo_file.exists():
        try:
            memo = json.loads(memo_file.read_text())
        except (OSError, ValueError):
            memo = {}
        if key in memo:
            return memo[key]
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    digest = h.hexdigest()
    if remember:
        try:
            memo[key] = digest
            memo_file.parent.mkdir(parents=True, exist_ok=True)
            memo_file.write_text(json.dumps(memo, indent=0))
        except OSError:
            pass  # a read-only cache only costs a re-hash next time
    return digest


def resolve_instruction(value: str | None) -> str | None:
    """An instruction as given, or the preset it names (``"@agnostic"``); None/"" for none."""
    if value is None or not str(value).strip():
        return None
    value = str(value).strip()
    if value.startswith("@"):
        name = value[1:]
        if name not in INSTRUCTION_PRESETS:
            raise unknown("instruction preset", name, INSTRUCTION_PRESETS,
                          hint="Write the instruction itself, or @retrieval / @agnostic (seed 000 App. U).")
        return INSTRUCTION_PRESETS[name]
    return value


def parse_options(text: str) -> dict[str, str]:
    """``"dim=32,seed=1"`` → ``{"dim": "32", "seed": "1"}`` (used by specs that carry options)."""
    opts: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        k, sep, v = part.partition("=")
        if not sep:
            raise CulturaError(f"Embedder option {part!r} must look like key=value (e.g. 'fake:dim=32').")
        opts[k.strip()] = v.strip()
    return opts
