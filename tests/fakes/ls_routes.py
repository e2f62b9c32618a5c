"""Every URL route of a real Label Studio, read from its own URL configuration, made into concrete paths.

``routes(python, data_dir)`` runs Label Studio's Python with its Django settings and walks Django's URL resolver
(no hand list): one ``{"pattern", "name"}`` per route, ``api/…`` ones and the pages. ``concrete(pattern, ids)``
fills each parameter with the id of the victim's object of that kind (``ids``: project, task, annotation,
draft, prediction, view, export, user, organization), so every route is aimed at someone's real data.
"""
from __future__ import annotations

import json
import os
import re
import subprocess

SCRIPT = r'''
import json, os, sys, pathlib, warnings
warnings.simplefilter("ignore")
import label_studio
sys.path.insert(0, str(pathlib.Path(label_studio.__file__).parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings.label_studio")
import django
django.setup()
from django.urls import URLResolver, get_resolver
out = []
def walk(patterns, prefix):
    for p in patterns:
        if isinstance(p, URLResolver):
            walk(p.url_patterns, prefix + str(p.pattern))
        else:
            out.append({"pattern": prefix + str(p.pattern), "name": p.name})
walk(get_resolver().url_patterns, "")
print("@@" + json.dumps(out))
'''


def routes(python: str, data_dir) -> list[dict]:
    from cultura.annotate.server import QUIET_ENV

    env = {**os.environ, **QUIET_ENV, "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir)}
    res = subprocess.run([python, "-c", SCRIPT], env=env, cwd=str(data_dir), capture_output=True, text=True,
                         timeout=600)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("@@"))
    return json.loads(line[2:])


#: which of the victim's objects a route parameter names, by the path segment before it
_BY_SEGMENT = {"projects": "project", "tasks": "task", "annotations": "annotation", "drafts": "draft",
               "predictions": "prediction", "views": "view", "exports": "export", "users": "user",
               "organizations": "organization", "memberships": "user", "entities": "task"}


def concrete(pattern: str, ids: dict) -> str:
    """A path for ``pattern`` with every parameter set to the victim's object of that kind (1 where the
    victim has none of that kind, e.g. a storage or an ML backend)."""
    p = re.sub(r"\\\.\(\?P<format>[^)]*\)/\?", ".json", pattern)    # DRF format suffix: .json
    p = re.sub(r"\(\?P<(\w+)>[^)]*\)\??", r"<\1>", p)               # regex groups: named parameters
    p = p.replace("^", "").replace("$", "")
    p = p.replace("<drf_format_suffix:format>", ".json").replace("\\.", ".").replace("/?", "/")
    p = p.replace("<path:filename>", "x.png").replace("<path:path>", "x").replace("(?P<path>.*)", "x")
    p = p.replace("<sub_path>", "x").replace("<str:action_id>", "delete_tasks").replace("<str:entity_name>", "task")
    p = p.replace("<path:content_type_id>", "1")
    out, segs = [], p.split("/")
    for i, seg in enumerate(segs):
        m = re.fullmatch(r"(?:<(?:int|str|path):(\w+)>|<(\w+)>)(\.json)?", seg)
        if m is None:
            out.append(seg)
            continue
        name = m.group(1) or m.group(2)
        prev = segs[i - 1] if i else ""
        kind = {"export_pk": "export", "annotation_id": "annotation", "user_pk": "user", "task_id": "task",
                "project_id": "project", "entity_id": "task"}.get(name) or _BY_SEGMENT.get(prev)
        out.append(str(ids.get(kind, 1)) + (m.group(3) or ""))
    return "/" + "/".join(out).lstrip("/")
