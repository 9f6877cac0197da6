"""Settings: every knob of the service in one typed object, read from ``PLACER_*``.

Validators run when the settings are built (at start-up), so a bad value
stops the service with one message instead of failing on the first request.
"""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

LOOPBACK = "127.0.0.1"
ENV_PREFIX = "PLACER_"


def limit_named(setting: str) -> str:
    """How a refusal names the limit it hit: the setting and the variable that raises it."""
    return f"(setting {setting}; raise it with {ENV_PREFIX}{setting.upper()})"


def _repo_graphs() -> Path | None:
    """The repository's bundled graphs, when running from a checkout (or an editable install)."""
    folder = Path(__file__).resolve().parents[2] / "graphs"
    return folder if folder.is_dir() else None


class Settings(BaseSettings):
    """Configuration of the service (environment variables ``PLACER_<FIELD>``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    data_dir: Path = Path("./data")
    """Where the database, job folders and checkpoints live."""
    database_url: str = ""
    """Storage backend; empty means ``sqlite:///<data_dir>/placer.db``."""
    api_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Accepted bearer tokens (comma-separated in the environment); empty (and no admin_key) disables auth.
    Each key is a tenant: it sees only the graphs, placements and jobs it created."""
    admin_key: str = ""
    """A bearer token that sees and manages every tenant's graphs, placements and jobs, and owns those stored
    before tenancy or by a service without keys (and the bundled graphs, which every key may read)."""
    insecure: bool = False
    """Serve without keys on an interface beyond loopback (``placer serve --insecure``): anyone who can reach
    the port can use the service. Without it, such a start is refused."""
    max_header_bytes: int = Field(32 * 2**10, ge=1024)
    """Largest request line plus headers accepted (431 beyond)."""
    parse_workers: int = Field(2, ge=1)
    """Processes that parse and validate large request bodies (JSON decoding holds the interpreter lock, so
    in a thread it would stall every other request); requests beyond wait for one."""
    parse_in_process_bytes: int = Field(1 * 2**20, ge=0)
    """Bodies up to this size are parsed in a thread of the service itself (cheaper than a round trip to a
    parse process); larger ones in a parse process."""
    host: str = ""
    """Interface to bind; empty means loopback (``127.0.0.1``)."""
    port: int = Field(8000, ge=0, le=65535)
    """TCP port to listen on."""
    max_upload_bytes: int = Field(64 * 2**20, gt=0)
    """Largest request body accepted, as sent (413 beyond)."""
    max_inflated_bytes: int = Field(64 * 2**20, gt=0)
    """Largest graph once gunzipped (413 beyond): a small gzip bomb stays small. Parsing JSON takes up to
    ~27 times its size in memory (512 MiB of ``[],`` from a 0.5 MB body: about 13 GB), so by default a gzip
    body inflates no further than a plain body may be; max_ops ops of a real graph take ~30 MB."""
    max_ops: int = Field(100_000, gt=0)
    """Largest graph accepted, in ops (413 beyond). The scale family's 128-layer GPT step (93,092 ops; 20.6 MiB
    of JSON, 1.1 MiB gzipped) fits every default; a parsed graph takes about 1.6 KiB per op in the graph cache,
    so max_ops bounds that cache (graph_cache_size graphs) as max_inflated_bytes bounds parsing."""
    best_seconds: float = Field(60.0, gt=0)
    """Time budget of one ``best`` (or baselines) request: heuristics not started by then are skipped."""
    max_running_jobs: int = Field(1, ge=1)
    """Training processes run at once; further jobs wait in the queue."""
    max_queued_jobs: int = Field(100, ge=0)
    """Jobs allowed to wait for a slot; beyond, new jobs are refused with 429."""
    max_wait_seconds: float = Field(600.0, ge=0)
    """Longest a ``method: rl`` placement request may wait for its job."""
    job_poll_seconds: float = Field(0.5, gt=0)
    """How often the job monitor reaps finished processes and starts queued jobs."""
    job_niceness: int = Field(10, ge=0, le=19)
    """Niceness added to training processes, so that answers given at once (a zero-shot ``rl`` placement, the
    heuristics) keep the CPU while a job trains: on 2 cores an ``rl`` answer took 3.5-20 s instead of 1.5 s
    beside a job at the service's own priority. An idle machine still gives a job all of it; 0 turns it off."""
    job_stop_seconds: float = Field(20.0, gt=0)
    """How long a job may take to checkpoint after SIGTERM before it is killed."""
    train_command: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: [sys.executable, "-m", "placer.cli.main", "train"]
    )
    """Command that trains one job (space-separated in the environment); the
    service appends ``GRAPH --cluster C --budget-seconds S --seed N --out DIR [--resume]``."""
    bundled_graphs_dir: Path | None = Field(default_factory=lambda: _repo_graphs())
    """Graph files (``*.json.gz``) stored once at first start, so they are listed ready to place (one
    deleted is not stored again); empty for none. Default: the repository's ``graphs/`` folder, when there is one."""
    warm_up: bool = True
    """Compile the numba kernels of ``rl`` and ``best`` answers at start-up, in the background, by placing a
    small graph: otherwise the first such request after an install (in Docker, after every container start)
    waits 7-9 s for them."""
    graph_cache_size: int = Field(16, ge=0)
    """Parsed graphs kept in memory (graphs are immutable, parsing a large one is slow)."""

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, v: object) -> object:
        if isinstance(v, str):
            v = v.split(",")
        if isinstance(v, list):
            # An empty key would match a request with no Authorization header at all.
            keys = [k.strip() if isinstance(k, str) else k for k in v if not isinstance(k, str) or k.strip()]
            if v and not keys:
                # Set but blank is a mistake (an unset variable in `-e PLACER_API_KEYS=$KEYS`), not a wish to
                # run without keys: the service ran open to anyone, on 0.0.0.0 in Docker. Unset it for that.
                raise ValueError("PLACER_API_KEYS is set but names no key; give keys (comma-separated) "
                                 "or unset it to run without authentication")
            return keys
        return v

    @field_validator("bundled_graphs_dir", mode="before")
    @classmethod
    def _empty_is_none(cls, v: object) -> object:
        return None if v == "" else v

    @field_validator("train_command", mode="before")
    @classmethod
    def _split_command(cls, v: object) -> object:
        if isinstance(v, str):
            return v.split()
        return v

    @model_validator(mode="after")
    def _defaults(self) -> "Settings":
        if not self.database_url:
            self.database_url = f"sqlite:///{self.data_dir / 'placer.db'}"
        if not self.host:
            self.host = LOOPBACK
        if not self.train_command:
            raise ValueError("train_command must name a program")
        return self

    @field_validator("admin_key", mode="after")
    @classmethod
    def _strip_admin(cls, v: str) -> str:
        return v.strip()

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_keys or self.admin_key)

    def check_exposure(self) -> None:
        """Refuse to serve without keys on an interface beyond loopback, unless `insecure` says to.

        Raises
        ------
        ValueError
            Naming the two ways out: keys, or ``--insecure``.
        """
        if not self.auth_enabled and not self.loopback_only and not self.insecure:
            raise ValueError(f"refusing to listen on {self.host} without API keys: anyone who can reach the port "
                             "could use the service; set PLACER_API_KEYS (and PLACER_ADMIN_KEY), or pass "
                             "--insecure (PLACER_INSECURE=1) to serve without keys anyway")

    @property
    def loopback_only(self) -> bool:
        """True when the bound interface is reachable from this machine only."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def jobs_dir(self) -> Path:
        return self.data_dir / "jobs"
