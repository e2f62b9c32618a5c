"""A thin strip (an extreme aspect ratio) never reaches a model's preprocessing."""
from __future__ import annotations



from tests.fakes.image_server import image_server, tall_png  # noqa: F401 (fixture)


def test_models_never_preprocess_a_thin_strip(project):
    """An image that got in anyway (an import, an older project) is bounded before model preprocessing:
    the tiny open_clip's preprocess would otherwise resize 64 x 1,000,000 to 224 x 3,500,000."""
    from PIL import Image

    from cultura.db.blobs import store_blob
    from cultura.models.embedders import embed_images_cached, get_embedder
    from cultura.models.embedders.base import SAFE_MAX_ASPECT, safe_image

    data = tall_png()
    sha, rel = store_blob(project, data, "png")
    project.db["images"].insert({"sha256": sha, "path": rel, "format": "png", "width": 64, "height": 1_000_000,
                                 "bytes": len(data), "status": "ok", "created_at": "2026-01-01T00:00:00Z"})
    emb = get_embedder("openclip:cultura-tiny")
    emb._load() if hasattr(emb, "_load") else None
    seen = []
    real = emb.preprocess

    def guarded(im):
        seen.append(im.size)
        if max(im.size) > SAFE_MAX_ASPECT * min(im.size) + 1:  # fail before allocating GBs on old code
            raise AssertionError(f"model preprocessing got a {im.size[0]}x{im.size[1]} image")
        return real(im)

    emb.preprocess = guarded
    v = embed_images_cached(project, emb, [sha])
    assert v.shape[0] == 1 and seen == [(64, 640)]
    small = Image.new("RGB", (320, 240))
    assert safe_image(small) is small  # ordinary images are untouched (their embeddings do not change)
