"""Multi-label concept tags per image (seed 000 App. I): an OpenAI-compatible vision chat model (image sent
as a data URL, the App. I prompt), with a CLIP zero-shot fallback (``"a photo of a {concept}"``, top-k with
scores). Tags are what later keeps distractor images free of the query concept.

Each image × source gets one ``image_tag_status`` row (done / failed with the error and raw reply), so reruns
only do what is missing and a bad reply is a row, not a crash.
"""
from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

from .. import pixels
from ..bounds import COUNT, from_field
from ..config import TagSection
from ..db import dumps, finish_run, now, start_run, transaction
from .blobs import check_blobs
from .images import image_files
from ..errors import CulturaError, unknown
from ..executor import current_executor, use_executor
from ..models.embedders import cache_images, embed_images_cached, embed_texts_cached, get_embedder
from ..models.embedders.base import ModelUnavailable
from ..models.llm import LLM, call_outcome, render_prompt
from ..names import check_concept
from ..progress import Progress, task, track
from .concepts import active_concepts

if TYPE_CHECKING:
    from ..project import Project

CLIP_TEMPLATE = "a photo of a {}"


class TagReply(BaseModel):
    tags: list[str] = Field(default_factory=list)


def _images_todo(db, source: str, retry_failed: bool, overwrite: bool = False) -> list[dict]:
    if overwrite:  # every kept image, tagged again (its earlier tags of this source are replaced)
        return [dict(r) for r in db.query("SELECT sha256, path, format FROM images WHERE status = 'ok' "
                                          "ORDER BY sha256")]
    sql = """SELECT sha256, path, format FROM images i WHERE status = 'ok' AND NOT EXISTS (
               SELECT 1 FROM image_tag_status s WHERE s.sha256 = i.sha256 AND s.source = ?
               AND (s.status = 'done' OR ? = 0)) ORDER BY sha256"""
    return [dict(r) for r in db.query(sql, [source, int(retry_failed)])]


def _mark(db, sha, source, status, error=None, raw=None):
    db.execute("""INSERT INTO image_tag_status (sha256, source, status, error, raw, created_at) VALUES (?,?,?,?,?,?)
                  ON CONFLICT (sha256, source) DO UPDATE SET status = excluded.status, error = excluded.error,
                  raw = excluded.raw, created_at = excluded.created_at""", [sha, source, status, error, raw, now()])


def _data_url(project: Project, row) -> str:
    """The image as the model should see it: the picture a browser shows, in a format vision APIs take (a
    TIFF, an AVIF, an EXIF-turned, 16-bit or transparent image is sent converted)."""
    data, mime = pixels.browser_bytes(project.root / row["path"], formats=pixels.MODEL_FORMATS, plain=True)
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def tag_with_llm(project: Project, *, model: str | None = None, retry_failed: bool = False, limit: int | None = None,
                 llm: LLM | None = None, progress: Progress = None, overwrite: bool = False) -> dict:
    """Tag images with a vision chat model; tags outside the concept list are dropped (kept in ``raw``).
    ``overwrite``: tag every image again, replacing its earlier tags from this model."""

    llm = llm or LLM(project, model=model or project.config.llm.vision_model)
    db = project.db
    concepts = [c["name"] for c in active_concepts(db)]
    if not concepts:
        raise CulturaError("No active concepts to tag with. Load or generate concepts first.")
    known = set(concepts)
    source = f"llm:{llm.model}"
    check_blobs(project)  # an image whose file is gone is marked 'missing' (re-fetched later), not fatal
    todo = _images_todo(db, source, retry_failed, overwrite)[: limit or None]
    prompt = render_prompt("image_tagging.j2", concepts=concepts)
    run = start_run(db, "images.tag", {"method": "llm", "model": llm.model})
    done = failed = n_tags = 0
    for row in track(todo, "tagging", progress=progress):
        try:
            url = _data_url(project, row)
        except pixels.UNREADABLE as e:  # a damaged blob is that image's failure, not the run's
            with transaction(db):
                _mark(db, row["sha256"], source, "failed", error=f"unreadable image ({type(e).__name__}: {e})")
            failed += 1
            continue
        messages = [{"role": "user", "content": [
            {"type": "text", "text": prompt},
            {"type": "image_url", "image_url": {"url": url}}]}]
        obj, call_id = llm.json_call(stage="images.tag", schema=TagReply, messages=messages, run_id=run)
        with transaction(db):
            if obj is None:
                err = call_outcome(db, call_id)[0]
                _mark(db, row["sha256"], source, "failed", error=err)
                failed += 1
                continue
            # a reply tag the name validator refuses (a control character, 10 kB of text) matches no concept
            tags = [check_concept(t)[0] or str(t)[:80] for t in obj.tags]
            kept = [t for t in dict.fromkeys(tags) if t in known]
            if overwrite:
                db.execute("DELETE FROM image_tags WHERE sha256 = ? AND source = ?", [row["sha256"], source])
            for rank, t in enumerate(kept, start=1):
                db["image_tags"].upsert({"sha256": row["sha256"], "tag": t, "score": 1.0 / rank, "source": source,
                                         "created_at": now()}, pk=("sha256", "tag", "source"))
            _mark(db, row["sha256"], source, "done", raw=dumps({"tags": obj.tags,
                                                                "dropped": [t for t in tags if t not in known]}))
            done += 1
            n_tags += len(kept)
    summary = {"method": "llm", "model": llm.model, "images": len(todo), "done": done, "failed": failed,
               "tags": n_tags, **_note(db, source, todo, overwrite)}
    finish_run(db, run, summary)
    return summary


def tag_with_clip(project: Project, *, clip_model: str | None = None, top_k: int | None = None,
                  min_score: float | None = None, template: str = CLIP_TEMPLATE, limit: int | None = None,
                  embedder=None, progress: Progress = None, overwrite: bool = False) -> dict:
    """Zero-shot tags: softmax over 100 × cosine(image, "a photo of a {concept}"), top-k kept with scores.
    ``overwrite``: tag every image again (a new ``top_k``, ``min_score`` or template), replacing its earlier
    tags from this model."""

    cfg = project.config.tag
    emb = embedder or get_embedder(clip_model or cfg.clip_model)
    top_k = top_k or cfg.top_k
    min_score = cfg.min_score if min_score is None else min_score
    db = project.db
    concepts = [c["name"] for c in active_concepts(db)]
    if not concepts:
        raise CulturaError("No active concepts to tag with. Load or generate concepts first.")
    source = f"clip:{emb.identity}"
    check_blobs(project)  # an image whose file is gone is marked 'missing' (re-fetched later), not fatal
    todo = _images_todo(db, source, True, overwrite)[: limit or None]
    run = start_run(db, "images.tag", {"method": "clip", "model": emb.identity, "top_k": top_k,
                                       "overwrite": overwrite})
    n_tags = 0
    if todo:
        text = embed_texts_cached(project, emb, [template.format(c) for c in concepts])
        if current_executor().is_ray:  # one Ray job for every image; the parts below then read the cache
            cache_images(project, emb, [r["sha256"] for r in todo], files=image_files(db))
        bar = task("tagging (clip)", len(todo), progress=progress)
        for start in range(0, len(todo), 256):
            if start:
                bar.advance(256)
            part = todo[start:start + 256]
            img = embed_images_cached(project, emb, [r["sha256"] for r in part], files=image_files(db))
            logits = 100.0 * img @ text.T
            logits -= logits.max(axis=1, keepdims=True)
            probs = np.exp(logits)
            probs /= probs.sum(axis=1, keepdims=True)
            k = min(top_k, len(concepts))
            with transaction(db):
                for row, p in zip(part, probs):
                    if overwrite:
                        db.execute("DELETE FROM image_tags WHERE sha256 = ? AND source = ?", [row["sha256"], source])
                    best = np.argsort(-p, kind="stable")[:k]
                    for j in best:
                        if p[j] >= min_score:
                            db["image_tags"].upsert({"sha256": row["sha256"], "tag": concepts[j],
                                                     "score": float(p[j]), "source": source, "created_at": now()},
                                                    pk=("sha256", "tag", "source"))
                            n_tags += 1
                    _mark(db, row["sha256"], source, "done")
        bar.update(done=len(todo))
        bar.close()
    summary = {"method": "clip", "model": emb.identity, "images": len(todo), "done": len(todo), "failed": 0,
               "tags": n_tags, **_note(db, source, todo, overwrite)}
    finish_run(db, run, summary)
    return summary


def _note(db, source: str, todo: list, overwrite: bool) -> dict:
    """When nothing was left to tag because every image already has this source's tags: say how to retag."""
    if todo or overwrite:
        return {}
    n = db.execute("SELECT count(*) FROM image_tag_status WHERE source = ? AND status = 'done'", [source]).fetchone()[0]
    if not n:
        return {}
    return {"note": f"{n} images already carry tags from {source}; pass --overwrite to tag them again (a new "
                    "--top-k, for instance), replacing those tags."}


TAGGERS = {"llm": tag_with_llm, "clip": tag_with_clip}


def tag_images(project: Project, *, method: str | None = None, executor: str | None = None, **kwargs) -> dict:
    """Tag every kept image. ``method='auto'`` uses the vision LLM when an API key and ``llm.vision_model``
    are configured, else the CLIP zero-shot fallback. ``executor`` (default ``tag.executor``): where CLIP
    embeds the images, ``local`` or ``ray`` (:mod:`cultura.executor`)."""
    with use_executor(executor or project.config.tag.executor, config=project.config):
        return _tag_images(project, method=method, **kwargs)


#: Tags kept per image (CLIP): the range of tag.top_k.
TOP_K = from_field(TagSection, "top_k")


def _tag_images(project: Project, *, method: str | None = None, **kwargs) -> dict:
    for name, bound in (("top_k", TOP_K), ("limit", COUNT)):
        kwargs[name] = bound.check_optional(kwargs.get(name), name)
    method = method or project.config.tag.method
    fallback = None
    if method == "auto":
        has_llm = bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY_FILE"))
        method = "llm" if has_llm and project.config.llm.vision_model else "clip"
        if method == "clip":
            fallback = ("--method auto fell back to CLIP zero-shot because " +
                        ("no OPENAI_API_KEY is set" if not has_llm else "llm.vision_model is not set") + ". ")
    if method not in TAGGERS:
        raise unknown("tagging method", method, [*TAGGERS, "auto"])
    fn = TAGGERS[method]
    if method == "clip" and kwargs.get("model") and not kwargs.get("clip_model"):
        kwargs["clip_model"] = kwargs.pop("model")  # ``model``: the model of whichever method runs
    allowed = {"llm": {"model", "retry_failed", "limit", "llm", "progress", "overwrite"},
               "clip": {"clip_model", "top_k", "min_score", "template", "limit", "embedder", "progress",
                        "overwrite"}}[method]
    try:
        return fn(project, **{k: v for k, v in kwargs.items() if k in allowed and v is not None})
    except ModelUnavailable as e:
        if method != "clip":
            raise
        raise CulturaError(f"{fallback or ''}{e} Offline alternatives: local weights ('--model "
                           "openclip:ARCH/path/to/weights.pt' or a folder), a vision model on a local "
                           "OpenAI-compatible server (llm.base_url and llm.vision_model, then --method llm), or "
                           "'--model openclip:cultura-tiny' (random-init: for trying the pipeline only; "
                           "build refuses its tags).") from None


