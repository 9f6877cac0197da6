"""`placer serve`: run the REST service (FastAPI under uvicorn) and print its URL."""

from __future__ import annotations

import copy
import os


def add_parser(sub) -> None:
    p = sub.add_parser(
        "serve", help="run the REST service",
        description="Serve the REST API (OpenAPI docs at /docs). Set PLACER_API_KEYS (comma-separated; each key "
                    "sees only its own graphs, placements and jobs) and PLACER_ADMIN_KEY (sees everything) to "
                    "require 'Authorization: Bearer <key>'. Without keys it listens on 127.0.0.1, and refuses "
                    "another interface (--host, PLACER_HOST) unless --insecure is given. Ctrl-C or SIGTERM shuts "
                    "it down cleanly (exit 0).",
    )
    p.add_argument("--host", help="interface to bind (default: PLACER_HOST, else 127.0.0.1)")
    p.add_argument("--port", type=int, help="TCP port (default: PLACER_PORT, else 8000)")
    p.add_argument("--insecure", action="store_true", default=None,
                   help="serve without keys on an interface beyond loopback: anyone who can reach the port can "
                        "use the service (default: PLACER_INSECURE, else refused)")
    p.add_argument("--data-dir", help="database and job folders (default: PLACER_DATA_DIR, else ./data)")
    p.add_argument("--workers", type=int, default=1,
                   help="uvicorn worker processes sharing the database (one of them runs the training jobs)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(run=run)


def run(args) -> int:
    from pydantic import ValidationError

    from placer.errors import PlacerError
    from service.core.config import Settings
    from service.storage import StorageError

    if args.workers < 1:
        raise PlacerError(f"--workers must be at least 1, got {args.workers}")
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port), ("data_dir", args.data_dir),
                                   ("insecure", args.insecure)) if v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as e:
        first = e.errors()[0]
        raise PlacerError(f"bad setting {'.'.join(map(str, first['loc'])) or ''}: {first['msg']}") from None
    try:
        settings.check_exposure()
    except ValueError as e:
        raise PlacerError(str(e)) from None
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # mkdir's "File exists" for a file where the folder should be
        raise PlacerError(f"data dir {str(settings.data_dir)!r}: is a file, not a folder") from None
    except OSError as e:
        raise PlacerError(f"data dir {str(settings.data_dir)!r}: cannot create ({e.strerror})") from None

    import uvicorn

    from service.main import create_app
    from service.sqlite_storage import open_storage

    try:
        open_storage(settings.database_url).close()  # fail here, in one line, not inside uvicorn's start-up
    except StorageError as e:
        raise PlacerError(str(e)) from None

    _check_can_listen(settings.host, settings.port)
    shown_host = f"[{settings.host}]" if ":" in settings.host else settings.host
    print(f"placer serve: http://{shown_host}:{settings.port}  (API docs at /docs; data in "
          f"{os.path.abspath(settings.data_dir)})", flush=True)
    if not settings.auth_enabled:
        if settings.loopback_only:
            print("placer serve: no PLACER_API_KEYS set: listening on loopback only, no authentication", flush=True)
        else:
            print(f"placer serve: WARNING: --insecure: no PLACER_API_KEYS set and listening on {settings.host}: "
                  "anyone who can reach this port can use the service", flush=True)
    if args.workers > 1:
        # Workers build their own app from the environment (PLACER_*), so pass the overrides on.
        os.environ.update({"PLACER_HOST": settings.host, "PLACER_PORT": str(settings.port),
                           "PLACER_DATA_DIR": str(settings.data_dir), _PARENT_ENV: str(os.getpid())})
        uvicorn.run("placer.cli.serve:worker_app", factory=True, workers=args.workers, host=settings.host,
                    port=settings.port, log_level=args.log_level, log_config=_log_config(args.log_level),
                    **_http(settings))
    else:
        uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=args.log_level,
                    log_config=_log_config(args.log_level), **_http(settings))
    return 0


def _http(settings) -> dict:
    """uvicorn's HTTP options: its h11 protocol with a 431 for headers over ``max_header_bytes``
    (`service.http`)."""
    return {"http": "service.http:HeaderLimitH11Protocol", "h11_max_incomplete_event_size": settings.max_header_bytes}


def _log_config(level: str) -> dict:
    """uvicorn's logging, with the service's own lines (jobs started, ended, resumed; bundled graphs
    stored) printed as uvicorn prints its own: without a handler for them, info lines went nowhere and
    warnings reached stderr bare."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["placer.service"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


_PARENT_ENV = "_PLACER_SERVE_PID"


def worker_app():
    """The app of one worker of ``--workers N``, which stops when ``placer serve`` is gone.

    uvicorn's workers outlive a parent killed with SIGKILL: they went on serving, unsupervised, holding
    the port (a new ``placer serve`` could not listen) and the jobs. A worker whose parent changes sends
    itself SIGTERM, so it shuts down as on Ctrl-C (its jobs checkpoint and are queued to resume).
    """
    import signal
    import threading
    import time

    from service.main import create_app

    parent = int(os.environ.get(_PARENT_ENV, "0"))

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    if parent:
        threading.Thread(target=watch, name="placer-parent-watch", daemon=True).start()
    return create_app()


def _check_can_listen(host: str, port: int) -> None:
    """Fail in one line when the address is taken or not ours, before the app starts."""
    import socket

    from placer.errors import PlacerError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise PlacerError(f"cannot listen on {host}:{port} ({e.strerror})") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as e:
            raise PlacerError(f"cannot listen on {host}:{port} ({e.strerror})") from None
