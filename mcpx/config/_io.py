"""The few functions of ``mcpx.config`` that touch the disk: read the config file, make the state directory.

Everything they decide is decided by the pure parts (``_file``, ``_settings``);
these only fetch text and create files.

State directory (``state.dir``): created ``0700`` — parents that do not exist
too, as the XDG base directory rule asks — and an existing one owned by us is
tightened to ``0700``; one owned by another user is refused.  ``mkdir`` and
``open`` are given the final mode, so the umask can only take permissions
away, never add them: nothing is ever readable by others, not even for the
instant before a ``chmod``; the ``chmod`` that follows restores bits a strict
umask took (the owner's own write bit, say).  Files are written whole: to a
new ``0600`` temporary file in the same directory, then renamed over the old.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from .._atomic import replace_file
from ._file import Config, config_location, detect_format, parse_config
from ._settings import ConfigError

__all__ = ["ensure_state_dir", "load_config", "write_state_file"]


def load_config(
    path: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
    flag_origins: Mapping[str, str] | None = None,
) -> Config:
    """Find and read the configuration file (``path`` is ``--config``), then parse it with ``parse_config``.

    ``environ`` defaults to ``os.environ``.  Raises ``ConfigError`` when a
    file that was asked for does not exist or cannot be read, and for every
    problem ``parse_config`` finds.
    """
    env = os.environ if environ is None else environ
    home = env.get("HOME") or str(Path.home())
    location, chosen_by, required = config_location(env, home, path)
    text: str | None
    stamp: tuple[int, int] | None = None
    try:
        with open(location, encoding="utf-8") as file:  # text mode, as Path.read_text: newlines translated
            info = os.fstat(file.fileno())  # of the file read, whatever replaces it meanwhile
            stamp = (info.st_mtime_ns, info.st_size)
            text = file.read()
    except FileNotFoundError:
        if required:
            fix = (
                "pass another --config" if chosen_by == "--config" else "set MCPX_CONFIG to an existing file"
            )
            raise ConfigError(
                [f"config file {location} ({chosen_by}) does not exist; create it, or {fix}"]
            ) from None
        text = None
    except UnicodeDecodeError:
        raise ConfigError([f"config file {location} is not UTF-8 text; save it as UTF-8"]) from None
    except OSError as exc:
        raise ConfigError(
            [f"cannot read config file {location}: {exc.strerror}; check its permissions"]
        ) from None
    config = parse_config(
        text,
        format=detect_format(location, text or ""),
        origin=location,
        environ=env,
        flags=flags or {},
        flag_origins=flag_origins or {},
        home=home,
        found=text is not None,
    )
    if text is not None:
        config = dataclasses.replace(config, text=text, stamp=stamp)
    secrets = _literal_secrets(config) if text is not None else []
    if secrets:
        with contextlib.suppress(OSError):
            mode = os.stat(location).st_mode
            if mode & 0o077:
                named = ", ".join(secrets[:5]) + (f" and {len(secrets) - 5} more" if len(secrets) > 5 else "")
                warning = (
                    f"{location} holds secrets ({named}) and is readable by other users (mode "
                    f"{mode & 0o777:o}); run chmod 600 {location}, or move the secrets to environment "
                    "variables (…Env)"
                )
                return _with_warning(config, warning)
    return config


# The words that make an env variable's or a header's name a secret's: API_KEY, GITHUB_TOKEN,
# DB_PASSWORD, Authorization, X-Api-Key, Cookie ...  MEMORY_FILE_PATH or Accept are not.
_SECRET_NAME = re.compile(
    r"(?i)(token|secret|passw|pwd|api[-_]?key|private[-_]?key|access[-_]?key|credential|auth|cookie|session)"
)


def _literal_secrets(config: Config) -> list[str]:
    """What the file itself holds that looks like a secret: ``server env NAME``, ``server header NAME``, auth."""
    found: list[str] = []
    for name, server in config.servers.items():
        found += [f"{name} env {key}" for key, _ in server.env if _SECRET_NAME.search(key)]
        found += [f"{name} header {key}" for key, _ in server.headers if _SECRET_NAME.search(key)]
        if server.auth is not None and "config" in server.auth.secret_from:
            found.append(f"{name} auth")
    return found


def _with_warning(config: Config, warning: str) -> Config:
    return dataclasses.replace(config, warnings=(*config.warnings, warning))


def ensure_state_dir(path: str | os.PathLike[str]) -> Path:
    """The state directory at ``path``, created ``0700`` if missing and tightened to ``0700`` if not.

    Raises ``ConfigError`` when ``path`` is not a directory or belongs to
    another user.
    """
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)  # the umask can only narrow this
        except FileExistsError:
            continue
        os.chmod(directory, 0o700)  # ours: give back what a strict umask took (the next mkdir needs w+x)
    info = os.stat(target)
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError([f"state.dir {target} is not a directory; remove it or set state.dir elsewhere"])
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise ConfigError(
            [
                f"state.dir {target} belongs to another user; set state.dir (MCPX_STATE) to a directory of your own"
            ]
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(target, 0o700)
    return target


def write_state_file(state_dir: str | os.PathLike[str], name: str, data: bytes) -> Path:
    """Replace ``<state_dir>/<name>`` with ``data``, atomically, mode ``0600`` from its first byte.

    The directory is made with ``ensure_state_dir``.  ``name`` is a plain
    file name (no ``/``).
    """
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"a state file name is a plain file name, not {name!r}")
    directory = ensure_state_dir(state_dir)
    target = directory / name
    replace_file(target, data)
    return target
