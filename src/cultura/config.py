"""``cultura.toml``: the project configuration, validated strictly.

Every section is a pydantic model with ``extra="forbid"``: a mistyped key is an error that gives its path and
the valid keys. Numbers are finite (``inf`` and ``nan`` are refused like any out-of-range value) and the file is
shallow (arrays and tables nested at most :data:`cultura.config_file.MAX_DEPTH` levels: a deeper one is one
sentence, not a ``RecursionError``). Secrets are never read from this file: API keys come from the environment (or 0600 files).
"""
from __future__ import annotations

import difflib
import re
import urllib.parse
from pathlib import Path
from typing import Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .config_file import check_depth, config_data, read_config_bytes, remember_valid
from .errors import ConfigError
from .names import endpoint_url_problem
from .redact import strip_userinfo


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class ProjectSection(_Section):
    name: str = "cultura-project"
    countries: list[str] = Field(default_factory=list)
    preset: str | None = None


class LLMSection(_Section):
    model: str = "gpt-4o-mini"
    vision_model: str | None = None
    # falls back to OPENAI_BASE_URL, then the SDK default
    base_url: str | None = Field(None, json_schema_extra={"form": "url"})
    max_attempts: int = Field(3, ge=1, le=20)
    batch_size: int = Field(25, ge=1, le=500)
    timeout: float = Field(60.0, gt=0)
    temperature: float = Field(0.7, ge=0, le=2)
    json_mode: Literal["auto", "json_schema", "json_object", "none"] = "auto"

    @field_validator("base_url")
    @classmethod
    def _parsable(cls, v):
        if v is not None:
            problem = endpoint_url_problem(v)
            if problem:  # pydantic reports a ValueError with the key's path
                raise ValueError(f"not a valid URL ({problem}); give the server's http(s) base URL, e.g. "
                                 "http://127.0.0.1:8000/v1")
        return v


class SearchSection(_Section):
    provider: str = "ddgs"
    backend: str = "duckduckgo"                   # ddgs engine; "auto" lets ddgs mix engines
    per_query: int = Field(10, ge=1, le=1000)
    safesearch: Literal["on", "moderate", "off"] = "moderate"
    min_interval: float = Field(2.0, ge=0)       # seconds between two DuckDuckGo calls
    max_attempts: int = Field(6, ge=1, le=50)
    backoff_base: float = Field(2.0, gt=0)        # first back-off in seconds, doubled each attempt
    backoff_max: float = Field(120.0, gt=0)


class DownloadSection(_Section):
    workers: int = Field(32, ge=1, le=1024)
    per_host: int = Field(4, ge=1, le=256)
    max_bytes: int = Field(20_000_000, ge=1024)
    max_pixels: int = Field(89_478_485, ge=1)     # Pillow's own decompression-bomb limit
    min_side: int = Field(64, ge=1)
    max_aspect_ratio: float = Field(20.0, ge=1)   # longer side / shorter side; thin strips blow up models
    # "decode": every image decoded while downloading (truncation and damage caught, hashes computed then);
    # "header": JPEG/PNG/WebP checked from their header and end only, decoded and hashed by dedup, and out of
    # the reviewed pool until then (about a quarter of the download's CPU per image: for fast links and many
    # images)
    check: Literal["decode", "header"] = "decode"
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(30.0, gt=0)
    max_attempts: int = Field(3, ge=1, le=20)
    max_redirects: int = Field(5, ge=0, le=20)
    retry_after_max: float = Field(60.0, ge=0)    # longest Retry-After honoured; longer = give up
    backoff_base: float = Field(1.0, ge=0)        # first retry wait in seconds (doubled, jittered)
    total_timeout: float = Field(120.0, gt=0)     # wall-clock cap for one attempt (slow-drip servers)
    # exact "host:port" allowed despite being private
    allow_hosts: list[str] = Field(default_factory=list, json_schema_extra={"form": "host:port"})
    respect_robots_tag: bool = True
    user_agent: str = "cultura/0.1 (+research image collection; honours X-Robots-Tag)"
    # unset: the environment's HTTP_PROXY/HTTPS_PROXY/ALL_PROXY/NO_PROXY (as curl and httpx read them);
    # "http://host:port": every download through that proxy; "direct": no proxy, whatever the environment says
    proxy: str | None = Field(None, json_schema_extra={"form": "url"})

    @field_validator("allow_hosts")
    @classmethod
    def _host_ports(cls, v):
        for entry in v:
            problem = host_port_problem(entry)
            if problem:
                raise ValueError(problem)
        return v

    @field_validator("user_agent")
    @classmethod
    def _sendable_header(cls, v):
        # checked here, not when the request is made: a CR/LF would crash every download (and could add a header
        # of the user's choosing), a megabyte-long value makes servers drop every connection without a word
        problem = header_value_problem(v)
        if problem:
            raise ValueError(f"{problem}; give one line of printable ASCII, at most {MAX_HEADER_VALUE} characters "
                             "(e.g. 'my-lab-crawler/1.0 (+https://example.org/contact)')")
        return v

    @field_validator("proxy")
    @classmethod
    def _proxy_url(cls, v):
        if v is None or v.strip() == "":
            return None
        problem = proxy_url_problem(v)
        if problem:
            raise ValueError(problem)
        return v.strip()


#: Longest value accepted for a setting sent as an HTTP header (download.user_agent), in characters.
MAX_HEADER_VALUE = 1024


def header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header value (``None`` when it can): empty, longer than
    :data:`MAX_HEADER_VALUE`, or any character outside printable ASCII (CR, LF, other controls, non-ASCII)."""
    if not value.strip():
        return "is empty (servers such as Wikimedia refuse requests without a user agent)"
    if len(value) > MAX_HEADER_VALUE:
        return f"is {len(value):,} characters long, over the {MAX_HEADER_VALUE} an HTTP header should carry"
    bad = next((c for c in value if not " " <= c <= "~"), None)
    if bad is not None:
        what = "a line break" if bad in "\r\n" else ("a control character" if ord(bad) < 32 or ord(bad) == 127
                                                       else "a non-ASCII character")
        return f"contains {what} ({ascii(bad)}), which an HTTP header cannot carry"
    if value != value.strip():
        return "starts or ends with a space"
    return None


_HOSTNAME = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_.])?$")


def host_port_problem(value) -> str | None:
    """Why ``value`` is not one ``download.allow_hosts`` entry (``None`` when it is): the exact ``host:port`` a
    URL's server listens on (``127.0.0.1:8000``, ``images.example.org:443``, ``[::1]:8080``), never the URL
    itself: the address check compares host and port, so a URL there would never match and its downloads would
    stay skipped."""
    if not isinstance(value, str):
        return f"{_shown_input(value)} is not text; write each entry as host:port, e.g. 127.0.0.1:8000"
    v = value.strip()
    if "://" in v or v.startswith("//") or "/" in v:
        try:
            p = urllib.parse.urlsplit(v if "://" in v or v.startswith("//") else "//" + v)
            port = p.port or {"http": 80, "https": 443}.get(p.scheme.lower())
            host = p.hostname
        except ValueError:
            host = port = None
        fix = (f"write {(f'[{host}]' if ':' in host else host)}:{port}" if host and port
               else "write host:port, e.g. 127.0.0.1:8000")
        return f"{_shown_input(value)} is a URL, but each entry is the host:port a server listens on; {fix}"
    m = re.match(r"^\[([0-9A-Fa-f:.]+)\]:(\d+)$", v) or re.match(r"^([^:\[\]]+):(\d+)$", v)
    if m is None:
        if v and ":" not in v.strip("[]") or re.match(r"^\[[0-9A-Fa-f:.]+\]$", v):
            return (f"{_shown_input(value)} has no port; write host:port, e.g. {v}:8000 (80 for http://, 443 "
                    "for https://)")
        return f"{_shown_input(value)} is not host:port; write it as e.g. 127.0.0.1:8000 or [::1]:8080"
    host, port = m.group(1), int(m.group(2))
    if not 1 <= port <= 65535:
        return f"{_shown_input(value)} has port {port}, outside 1..65535; write host:port"
    if not v.startswith("[") and not _HOSTNAME.match(host):
        return f"{_shown_input(value)} has a host name with spaces or symbols; write host:port, e.g. 127.0.0.1:8000"
    return None


def proxy_url_problem(value: str) -> str | None:
    """Why ``value`` cannot be ``download.proxy`` (``None`` when it can): ``direct``, or ``http://host:port``
    without credentials, path or query."""
    value = value.strip()
    if value == "direct":
        return None
    if len(value) > MAX_HEADER_VALUE or any(not "!" <= c <= "~" for c in value):
        return "must be 'direct' or an http://host:port URL (printable ASCII, no spaces)"
    if "://" not in value:
        return f"has no scheme; write it as http://{value}"
    try:
        p = urllib.parse.urlsplit(value)
        port = p.port
    except ValueError as e:
        return f"is not a valid URL ({e}); write it as http://host:port"
    if p.scheme.lower() != "http":
        return (f"uses {p.scheme}://, but the downloader talks to HTTP proxies only (HTTPS sites go through them "
                "with CONNECT); write it as http://host:port")
    if p.username is not None or p.password is not None:
        return ("carries a user name or password, and cultura.toml holds no secrets; leave download.proxy unset "
                "and put the proxy in the environment instead (HTTPS_PROXY and HTTP_PROXY), with user:password@ "
                "before its host")
    if not p.hostname:
        return "has no host; write it as http://host:port"
    if p.path not in ("", "/") or p.query or p.fragment:
        return "must be just http://host:port (no path, query or fragment)"
    del port  # parsed for its error only: no port is 80, as curl and httpx read it
    return None


class DedupSection(_Section):
    # Hamming thresholds (bits of 64) from the calibration in docs/dedup_calibration.md
    phash_threshold: int = Field(10, ge=0, le=64)
    dhash_threshold: int = Field(8, ge=0, le=64)
    methods: list[Literal["sha256", "phash", "dhash", "embedding"]] = Field(
        default_factory=lambda: ["sha256", "phash", "dhash"])
    embedder: str = "openclip:ViT-B-32/openai"
    embedding_threshold: float = Field(0.95, ge=-1, le=1)
    scope: Literal["within-concept", "global"] = "within-concept"
    # embedding pair search: "exact" (quadratic), "ivf" (approximate recall, exact precision) or "auto"
    # (exact up to 100k images per search, IVF above); IVF cells (unset: ~2*sqrt(n)) and cells probed per image
    embedding_index: Literal["auto", "exact", "ivf"] = "auto"
    embedding_nlist: int | None = Field(None, ge=1)
    embedding_nprobe: int = Field(8, ge=1)
    # where image hashing and embedding run: in this process, or on Ray (settings in [ray]; RAY_ADDRESS for an
    # existing cluster)
    executor: Literal["local", "ray"] = "local"


class ConceptsSection(_Section):
    dedup_embedder: str = "st:BAAI/bge-m3"
    dedup_threshold: float = Field(0.92, ge=-1, le=1)


class TagSection(_Section):
    method: Literal["auto", "llm", "clip"] = "auto"
    clip_model: str = "openclip:ViT-B-32/openai"
    top_k: int = Field(3, ge=1, le=100)
    min_score: float = 0.0
    executor: Literal["local", "ray"] = "local"   # where --method clip embeds images (settings in [ray])


class AnnotateSection(_Section):
    # where annotators' browsers load task images: the base URL of 'cultura annotate serve-images' (or any
    # web server holding the project's blobs/ tree), e.g. "http://127.0.0.1:8081". Used by push and adjudicate.
    image_base_url: str | None = Field(None, json_schema_extra={"form": "url"})
    label_studio_bin: str | None = None           # the label-studio executable (default: PATH, .venv-ls)
    port: int | None = Field(None, ge=1, le=65535)  # port of 'cultura annotate server start'
    relevance_other_countries: int = Field(1, ge=0, le=50)
    max_tasks_per_project: int = Field(90_000, ge=1)

    @field_validator("image_base_url")
    @classmethod
    def _http_only(cls, v):
        if v is not None and (not v.lower().startswith(("http://", "https://")) or endpoint_url_problem(v)):
            raise ValueError("must be an http:// or https:// URL that annotators' browsers can load, e.g. the "
                             "one 'cultura annotate serve-images' prints")
        return v


class BuildSection(_Section):
    # dataset card of 'cultura export'
    title: str | None = None
    license: str | None = None
    contact: str | None = None


class EvaluateSection(_Section):
    # per-suite default options ([evaluate.llm] llm = "hf:…", [evaluate.attribution] judge = "…"); a
    # command's --option SUITE.KEY=VALUE overrides them. One table per built-in suite.
    executor: Literal["local", "ray"] = "local"   # where embedding and LM scoring run (settings in [ray])
    prevalence: dict = Field(default_factory=dict)
    association: dict = Field(default_factory=dict)
    descriptor: dict = Field(default_factory=dict)
    latent: dict = Field(default_factory=dict)
    social: dict = Field(default_factory=dict)
    llm: dict = Field(default_factory=dict)
    attribution: dict = Field(default_factory=dict)


class RaySection(_Section):
    # the actor pool of the "ray" executor (dedup.executor, tag.executor, evaluate.executor, --executor ray);
    # the cluster is RAY_ADDRESS (none: a local Ray on this machine)
    actors: int | None = Field(None, ge=1)        # default: as many as the cluster's CPUs (GPUs) hold
    num_cpus: float = Field(1.0, gt=0)            # CPUs per actor
    num_gpus: float = Field(0.0, ge=0)            # GPUs per actor; > 0: GPU actors, models built on cuda
    min_items: int = Field(256, ge=0)             # a job with fewer cache misses runs in this process
    # torch threads per actor (default: num_cpus); equal to a local run's torch threads, the numbers are bit for
    # bit that run's (torch may round the last bit differently with another thread count)
    threads: int | None = Field(None, ge=1)


class Config(_Section):
    project: ProjectSection = Field(default_factory=ProjectSection)
    llm: LLMSection = Field(default_factory=LLMSection)
    search: SearchSection = Field(default_factory=SearchSection)
    download: DownloadSection = Field(default_factory=DownloadSection)
    dedup: DedupSection = Field(default_factory=DedupSection)
    concepts: ConceptsSection = Field(default_factory=ConceptsSection)
    tag: TagSection = Field(default_factory=TagSection)
    annotate: AnnotateSection = Field(default_factory=AnnotateSection)
    build: BuildSection = Field(default_factory=BuildSection)
    evaluate: EvaluateSection = Field(default_factory=EvaluateSection)
    ray: RaySection = Field(default_factory=RaySection)
    # free-text culture labels beside countries (cultura.cultures): [culture_labels.KEY] name/country/language
    culture_labels: dict = Field(default_factory=dict)


def _explain(e: ValidationError, source: str) -> str:
    lines = []
    for err in e.errors():
        path = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            parent = Config
            for part in err["loc"][:-1]:
                field = parent.model_fields.get(str(part))
                parent = field.annotation if field is not None else None
                if not (isinstance(parent, type) and issubclass(parent, BaseModel)):
                    parent = None
                    break
            valid = sorted(parent.model_fields) if parent else []
            close = difflib.get_close_matches(str(err["loc"][-1]), valid, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            lines.append(f"unknown key '{path}'.{hint} Valid keys here: {', '.join(valid)}")
        else:
            lines.append(f"'{path}': {err['msg']} (got {_shown_input(err.get('input'))})")
    return f"Invalid configuration in {source}: " + "; ".join(lines) + ". Fix the file and rerun."


def _shown_input(value) -> str:
    """A value for an error message: never its credentials (``user:password@`` of a URL), never megabytes."""
    if isinstance(value, str):
        value = strip_userinfo(value)
        if len(value) > 80:
            return f"{value[:60]!r}… ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}… ({len(text):,} characters)"


def parse_config(data: dict, source: str = "cultura.toml") -> Config:
    check_depth(data, source)
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_explain(e, source)) from None


def load_config(path: Path) -> Config:
    """The validated configuration of the file at ``path`` (its bytes remembered as valid: see
    :func:`cultura.config_file.known_valid`)."""
    raw = read_config_bytes(path)  # read once: the bytes remembered as valid are the bytes validated
    config = parse_config(config_data(raw, path), str(path))
    remember_valid(raw)
    return config


def dump_config(cfg: Config) -> str:
    data = cfg.model_dump(exclude_none=True)
    return tomli_w.dumps(data)


def set_config_value(cfg: Config, dotted: str, value) -> Config:
    """Return a copy of ``cfg`` with ``section.key`` set (validated)."""
    data = cfg.model_dump()
    parts = dotted.split(".")
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    return parse_config(data, f"setting {dotted}")
