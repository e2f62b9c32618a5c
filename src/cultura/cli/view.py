"""CLI command of the view area: ``cultura view`` (thin: parse, build the site, print; ``--serve`` serves it)."""
from __future__ import annotations

import click
from rich.markup import escape

from ..benchmark.verify import check_versions, ready_versions
from ..bounds import PORT
from ..view.server import make_server
from ..view.site import PAGE_SIZE, PAGE_SIZES, build_view, view_dir
from .build import warn_versions
from .console import bounded, emit_json, json_option, out, pass_ctx, serve_until_interrupted, summary


@click.command("view")
@click.option("--serve", is_flag=True, help="After building, serve the view on 127.0.0.1 (Ctrl-C stops).")
@click.option("--port", type=bounded(PORT), default=8765, show_default=True,
              help="Port for --serve on 127.0.0.1 (0: a free one).")
@click.option("--page-size", type=bounded(PAGE_SIZES), default=PAGE_SIZE, show_default=True,
              help="Images, duplicate sets, flags, trials or items per page.")
@click.option("--overwrite", is_flag=True, help="Remake every thumbnail (pages are always updated when they "
                                                "changed).")
@json_option
@pass_ctx
def view(ctx, serve, port, page_size, overwrite, as_json):
    """Write a browsable static site of the project to reports/view/: the pool by country × concept with
    each image's status, duplicate sets side by side, culture-conflict flags, every benchmark's trials
    (roles hidden until shown) and annotator disagreements. Thumbnails are made once; a rerun only adds
    what changed. Open reports/view/index.html, or use --serve."""
    res = build_view(ctx.project, overwrite=overwrite, page_size=page_size)
    benches = ready_versions(ctx.project)   # the view shows every version's trials as built: say which no longer hold
    warn_versions(check_versions(ctx.project, benches))
    if not serve:
        summary("cultura view", res, as_json)
        return
    httpd = make_server(view_dir(ctx.project), port)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
    if as_json:
        emit_json({**res, "url": url})
    else:
        summary("cultura view", res)
        out.print(f"Serving {escape(str(view_dir(ctx.project)))} at {url} (Ctrl-C stops).", soft_wrap=True)
    serve_until_interrupted(httpd)


COMMANDS = [view]
