"""An OpenAI-compatible ``/v1/embeddings`` server: ``openai:MODEL`` (vLLM, TEI, llama.cpp, OpenAI itself…).

The base URL comes from the ``base_url=`` option or ``OPENAI_BASE_URL``; the key from ``api_key=`` or
``OPENAI_API_KEY`` (a placeholder is sent when neither is set, as local servers need none). The key is never
part of the identity, ``info`` or any error message.

Images (for MLLM embedders served elsewhere) are sent as ``data:image/png;base64,…`` URLs:

- ``images="input"`` (default): in the ``input`` list, one string per image, like texts;
- ``images="messages"``: vLLM's chat-style embedding request, one request per image with
  ``messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": DATA_URL}}]}]``;
- ``images="none"``: the model is used for text only.
"""
from __future__ import annotations

import base64
import io
import os

from ...errors import CulturaError
from ...names import check_endpoint_url
from ...redact import scrub, strip_userinfo
from .base import Embedder, ModelCapabilityError, ModelUnavailable

IMAGE_MODES = ("input", "messages", "none")


def image_data_url(img, fmt: str = "PNG") -> str:
    """A PIL image as a ``data:image/…;base64,…`` URL."""
    buf = io.BytesIO()
    im = img.convert("RGB") if fmt.upper() in ("JPEG", "JPG") or img.mode not in ("RGB", "RGBA", "L") else img
    im.save(buf, format=fmt.upper().replace("JPG", "JPEG"))
    mime = "jpeg" if fmt.upper() in ("JPEG", "JPG") else fmt.lower()
    return f"data:image/{mime};base64," + base64.b64encode(buf.getvalue()).decode("ascii")


class OpenAIEmbedder(Embedder):
    """Embeddings from an OpenAI-compatible server, through the openai SDK."""

    family = "openai"
    remote_service = True  # the server does the work: the ray executor leaves it in this process

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 images: str = "input", image_format: str = "PNG", dimensions: int | None = None,
                 timeout: float = 60.0, max_retries: int = 2, **kw):
        kw.setdefault("batch_size", 64)
        super().__init__(**kw)
        import openai  # deferred: heavy optional dependency, loaded on first use

        if images not in IMAGE_MODES:
            raise CulturaError(f"images={images!r} is not one of {', '.join(IMAGE_MODES)}.")
        self.model_name = model
        self.image_mode = images
        self.image_format = image_format
        self.dimensions = dimensions
        self.base_url = (check_endpoint_url(base_url, source="base_url", param="base_url") if base_url else
                         check_endpoint_url(os.environ["OPENAI_BASE_URL"], source="OPENAI_BASE_URL")
                         if os.environ.get("OPENAI_BASE_URL") else "https://api.openai.com/v1")
        self.device = "remote"
        self._openai = openai
        self.client = openai.OpenAI(base_url=self.base_url,
                                    api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
                                    timeout=timeout, max_retries=max_retries)

    @property
    def supports_images(self) -> bool:  # type: ignore[override]
        return self.image_mode != "none"

    @property
    def supports_image_instruction(self) -> bool:  # type: ignore[override]
        """An image instruction is sent as a system message: chat-style requests (``images="messages"``) only."""
        return self.image_mode == "messages"

    @property
    def identity(self) -> str:
        return f"openai:{self.model_name}" + (f",dimensions={self.dimensions}" if self.dimensions else "")

    @property
    def info(self) -> dict:
        return {**super().info, "architecture": self.model_name, "pretrained": None, "weights_sha256": None,
                "base_url": strip_userinfo(self.base_url), "image_mode": self.image_mode}

    # -- wire ----------------------------------------------------------------------------------------
    def _call(self, what: str, fn):
        o = self._openai
        try:
            return fn()
        except o.APIConnectionError as e:
            raise ModelUnavailable(f"Cannot reach the embeddings server at {strip_userinfo(self.base_url)} for {self.identity!r} "
                                   f"({type(e).__name__}). Start it, or set OPENAI_BASE_URL to its /v1 URL.") from e
        except o.AuthenticationError as e:
            raise ModelUnavailable(f"The embeddings server at {strip_userinfo(self.base_url)} refused the API key "
                                   "(401). Set OPENAI_API_KEY to a valid key.") from e
        except o.NotFoundError as e:
            raise ModelUnavailable(f"The embeddings server at {strip_userinfo(self.base_url)} does not serve model "
                                   f"{self.model_name!r} (404). Check the model name it lists at /v1/models.") from e
        except o.BadRequestError as e:
            if what == "image":
                raise ModelCapabilityError(
                    f"The embeddings server at {strip_userinfo(self.base_url)} rejected images for {self.model_name!r} "
                    f"({e.status_code}: {_short(e)}). Serve a multimodal embedder, try images='messages' "
                    "(vLLM chat-style requests), or use this model for text only.") from e
            raise CulturaError(f"The embeddings server rejected the request ({e.status_code}: {_short(e)}).") from e
        except o.APIStatusError as e:
            raise ModelUnavailable(f"The embeddings server at {strip_userinfo(self.base_url)} failed ({e.status_code}: "
                                   f"{_short(e)}). Retry later or check the server log.") from e

    def _create(self, inputs: list[str]):
        kwargs = {"model": self.model_name, "input": inputs, "encoding_format": "float"}
        if self.dimensions:
            kwargs["dimensions"] = self.dimensions
        return self.client.embeddings.create(**kwargs)

    @staticmethod
    def _vectors(resp, n: int):
        data = sorted(resp.data, key=lambda d: d.index)
        if len(data) != n:
            raise CulturaError(f"The embeddings server returned {len(data)} vectors for {n} inputs.")
        return [d.embedding for d in data]

    def _embed_text_batch(self, texts):
        return self._vectors(self._call("text", lambda: self._create(texts)), len(texts))

    def _embed_image_batch(self, images):
        urls = [image_data_url(im, self.image_format) for im in images]
        if self.image_mode == "input":
            return self._vectors(self._call("image", lambda: self._create(urls)), len(urls))
        out = []
        for url in urls:  # vLLM: one chat-style request per image
            messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]
            if self.instructions.get("image"):  # seed 000 App. U: the retriever's system prompt
                messages.insert(0, {"role": "system", "content": [{"type": "text",
                                                                   "text": self.instructions["image"]}]})
            body = {"model": self.model_name, "encoding_format": "float", "messages": messages}
            resp = self._call("image", lambda: self.client.post(
                "/embeddings", body=body, cast_to=self._openai.types.CreateEmbeddingResponse))
            out.extend(self._vectors(resp, 1))
        return out


def _short(e: Exception, n: int = 200) -> str:
    msg = scrub(getattr(e, "message", None) or str(e))  # scrubbed before it is cut (no half secret left)
    return msg if len(msg) <= n else msg[:n] + "…"


def from_spec(rest: str, **options) -> OpenAIEmbedder:
    """Factory for ``openai:MODEL``."""
    rest = rest.strip()
    if not rest:
        raise CulturaError("An openai spec needs the served model name, e.g. 'openai:text-embedding-3-small'.")
    return OpenAIEmbedder(rest, **options)
