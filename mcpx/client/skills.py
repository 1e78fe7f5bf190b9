"""``mcpx.client.skills``: the host side of the Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``).

A server that declares the extension lists its skills with ``skills/list``
(one ``get_skill`` for a single URI with ``skills/get``); each entry carries
the skill's frontmatter and a manifest of its files with a ``sha256:`` digest
and a size.  The files themselves are ordinary resources, read with
``resources/read``.  This module is what a host needs to use them safely:

* **Nothing is read ahead of need** (SEP-2640 "Lazy Retrieval").
  ``list_skills`` only lists; ``load_skill`` reads ``SKILL.md`` and nothing
  else; a supporting file is read when ``LoadedSkill.read`` asks for it.
* **Nothing unverified is used** (SEP-2640 "Verification on Read").  Every file
  read is checked against its entry's ``size`` and ``digest`` before it is
  returned; ``SKILL.md``'s frontmatter is then compared field by field with
  the entry's ``frontmatter`` ("Frontmatter Verification").  Any mismatch
  raises ``SkillVerificationError`` and the content is dropped.
* **Fail closed.**  The frontmatter reader understands flat ``key: value``
  scalars (plain, single- or double-quoted) and nothing more; whatever it
  cannot read with certainty is a verification failure, not a guess.  An
  entry that is malformed (``SkillEntryError``) is never loaded.  A skill
  whose ``resources`` is ``"dynamic"`` has no digests and is loaded only when
  the caller says so (``allow_dynamic=True``).

The pure helpers (``parse_skill_entry``, ``verify_file``,
``parse_frontmatter``, ``compare_frontmatter``, ``split_skill_uri``) do no
I/O; the async functions take a connected ``mcpx.client.Client``.

Typical use::

    for entry in await list_skills(client):       # no file is read here
        ...                                       # show entry.name / entry.description
    skill = await load_skill(client, entry)       # SKILL.md, verified, or SkillError
    forms = await skill.read_text("references/FORMS.md")   # verified on read
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import unquote

if TYPE_CHECKING:
    from . import Client

__all__ = [
    "EXTENSION_ID",
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "LoadedSkill",
    "Scalar",
    "SkillEntry",
    "SkillEntryError",
    "SkillError",
    "SkillFile",
    "SkillVerificationError",
    "compare_frontmatter",
    "get_skill",
    "list_skills",
    "load_skill",
    "parse_frontmatter",
    "parse_skill_entry",
    "skills_declared",
    "split_skill_uri",
    "verify_file",
]

EXTENSION_ID: Final = "io.modelcontextprotocol/skills"
SKILL_FILE: Final = "SKILL.md"
DYNAMIC: Final = "dynamic"
# SEP-2640 "Limits": a host must accept skills up to these and may decline larger ones; mcpx declines.
MAX_SKILL_FILES: Final = 512
MAX_SKILL_BYTES: Final = 16 * 1024 * 1024

Scalar = str | int | float | bool | None

_NAME = re.compile(r"(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")  # Agent Skills naming rules
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


class SkillError(Exception):
    """A skill cannot be used; ``uri`` names what, ``reason`` says why."""

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = uri
        self.reason = reason
        super().__init__(f"{uri}: {reason}")


class SkillEntryError(SkillError):
    """The skill's entry itself is unusable (malformed, over the limits, or declined): never loaded."""


class SkillVerificationError(SkillError):
    """Content read from the server does not match the held entry; it was not used (SEP-2640)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillFile:
    """One file of a skill's manifest: the resource, and what its raw bytes must hash to."""

    uri: str
    digest: str  # "sha256:" + 64 lowercase hex
    size: int  # bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillEntry:
    """One validated ``skills/list`` / ``skills/get`` entry; build it with ``parse_skill_entry``."""

    uri: str  # the skill's SKILL.md
    root: str  # the skill's directory: ``uri`` without "/SKILL.md"
    name: str  # the final skill-path segment, equal to frontmatter["name"]
    frontmatter: Mapping[str, Any]
    resources: tuple[SkillFile, ...] | Literal["dynamic"]

    @property
    def description(self) -> str:
        return str(self.frontmatter["description"])

    def file(self, uri: str) -> SkillFile | None:
        """The manifest entry for ``uri``; None when unlisted (or the skill is dynamic)."""
        if self.resources == DYNAMIC:
            return None
        return next((f for f in self.resources if f.uri == uri), None)


# -- pure checks ---------------------------------------------------------------------


def _safe_segments(uri: str, path: str) -> list[str]:
    segments = path.split("/")
    for segment in segments:
        decoded = unquote(segment)
        if not segment or decoded in {".", ".."} or "/" in decoded or "\\" in decoded:
            raise SkillEntryError(uri, f"path segment {segment!r} is empty or escapes its directory")
    return segments


def split_skill_uri(uri: str) -> tuple[str, str]:
    """``(root, name)`` of a skill's SKILL.md URI, or ``SkillEntryError`` (SEP-2640 "Resource Mapping").

    The URI must be ``<scheme>://<skill-path>/SKILL.md`` with no query or
    fragment and no empty, ``.`` or ``..`` segment, and the final skill-path
    segment (the skill's name) must follow the Agent Skills naming rules.
    """
    scheme, sep, path = uri.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        raise SkillEntryError(uri, "not an absolute <scheme>://<skill-path>/SKILL.md URI")
    if "?" in path or "#" in path:
        raise SkillEntryError(uri, "a skill URI carries no query or fragment")
    segments = _safe_segments(uri, path)
    if len(segments) < 2 or segments[-1] != SKILL_FILE:
        raise SkillEntryError(uri, f"does not name a {SKILL_FILE} under a skill path")
    name = segments[-2]
    if not _NAME.fullmatch(name):
        raise SkillEntryError(uri, f"skill name {name!r} breaks the naming rules (1-64 of a-z, 0-9, -)")
    return uri[: -len("/" + SKILL_FILE)], name


def _within(root: str, uri: str) -> bool:
    """Whether ``uri`` is a file inside the skill directory ``root`` (no escaping segments)."""
    if not uri.startswith(root + "/") or "?" in uri or "#" in uri:
        return False
    try:
        _safe_segments(uri, uri[len(root) + 1 :])
    except SkillEntryError:
        return False
    return True


def _check_digest(uri: str, digest: object) -> str:
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise SkillEntryError(uri, f"digest {digest!r} is not sha256:<64 lowercase hex>")
    return digest


def _check_size(uri: str, size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise SkillEntryError(uri, f"size {size!r} is not a byte count")
    return size


def parse_skill_entry(raw: object) -> SkillEntry:
    """Validate one entry as the server sent it; ``SkillEntryError`` when a host must not load it.

    Checked (SEP-2640 "Skill Entries"): the URI's shape, ``frontmatter`` with
    string ``name`` and ``description`` and ``name`` equal to the URI's final
    skill-path segment, and ``resources`` either ``"dynamic"`` or a complete
    manifest: each file inside the skill, listed once, with a sha256 digest
    and a size, SKILL.md among them.
    """
    if not isinstance(raw, Mapping):
        raise SkillEntryError("(entry)", "a skill entry is not an object")
    uri = raw.get("uri")
    if not isinstance(uri, str):
        raise SkillEntryError("(entry)", "a skill entry has no uri")
    root, name = split_skill_uri(uri)
    frontmatter = raw.get("frontmatter")
    if not isinstance(frontmatter, Mapping):
        raise SkillEntryError(uri, "the entry has no frontmatter object")
    for field in ("name", "description"):
        if not isinstance(frontmatter.get(field), str) or not frontmatter[field]:
            raise SkillEntryError(uri, f"frontmatter.{field} is missing or not a non-empty string")
    if frontmatter["name"] != name:
        raise SkillEntryError(
            uri, f"frontmatter.name {frontmatter['name']!r} != the URI's skill name {name!r}"
        )
    listed = raw.get("resources")
    if listed == DYNAMIC:
        return SkillEntry(uri=uri, root=root, name=name, frontmatter=dict(frontmatter), resources=DYNAMIC)
    if not isinstance(listed, list):
        raise SkillEntryError(uri, 'resources is neither a list of files nor "dynamic"')
    files: list[SkillFile] = []
    seen: set[str] = set()
    for item in listed:
        if not isinstance(item, Mapping) or not isinstance(item.get("uri"), str):
            raise SkillEntryError(uri, "a resources item has no uri")
        file_uri = item["uri"]
        if file_uri != uri and not _within(root, file_uri):
            raise SkillEntryError(uri, f"resource {file_uri} lies outside the skill {root}")
        if file_uri in seen:
            raise SkillEntryError(uri, f"resource {file_uri} is listed twice")
        seen.add(file_uri)
        digest = _check_digest(file_uri, item.get("digest"))
        size = _check_size(file_uri, item.get("size"))
        files.append(SkillFile(uri=file_uri, digest=digest, size=size))
    if uri not in seen:
        raise SkillEntryError(uri, f"resources does not list the skill's own {SKILL_FILE}")
    return SkillEntry(uri=uri, root=root, name=name, frontmatter=dict(frontmatter), resources=tuple(files))


def verify_file(data: bytes, expected: SkillFile) -> None:
    """Check raw bytes against their manifest entry; ``SkillVerificationError`` on any mismatch.

    Size first: a length that differs is a failure whether or not the digest
    is computed (SEP-2640 "Resources").  A digest in any format but
    ``sha256:<64 lowercase hex>`` is refused, not skipped.
    """
    match = _DIGEST.fullmatch(expected.digest)
    if match is None:
        raise SkillVerificationError(expected.uri, f"cannot verify against digest {expected.digest!r}")
    if len(data) != expected.size:
        raise SkillVerificationError(
            expected.uri, f"size mismatch: read {len(data)} bytes, the entry lists {expected.size}"
        )
    actual = hashlib.sha256(data).hexdigest()
    if actual != match.group(1):
        raise SkillVerificationError(
            expected.uri, f"digest mismatch: read sha256:{actual}, the entry lists {expected.digest}"
        )


# -- frontmatter -----------------------------------------------------------------------

_KEY_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]*):(?:[ \t]+(.*))?")
_PLAIN_FORBIDDEN_START = frozenset("[]{}#&*!|>'\"%@`,")
_DQ_ESCAPES: Final = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
    "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\",
}  # fmt: skip
_HEX_ESCAPES: Final = {"x": 2, "u": 4, "U": 8}
# YAML 1.2 core schema (what the entry's JSON must have been rendered from).
_NULL = frozenset({"null", "Null", "NULL", "~"})
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_INT10 = re.compile(r"[-+]?[0-9]+")
_INT16 = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_SPECIAL_FLOAT: Final = {
    ".inf": math.inf, ".Inf": math.inf, ".INF": math.inf,
    "+.inf": math.inf, "+.Inf": math.inf, "+.INF": math.inf,
    "-.inf": -math.inf, "-.Inf": -math.inf, "-.INF": -math.inf,
}  # fmt: skip
# Plain scalars other YAML readers (1.1: PyYAML, js-yaml's extras) type differently: ambiguous, refused.
_AMBIGUOUS = re.compile(
    r"(?:y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF"  # 1.1 booleans
    r"|[-+]?0[0-9_]+|[-+]?0b[01_]+|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"  # octal, binary, base 60
    r"|(?=[^_]*_)(?=.*[0-9])[-+]?[0-9_]*\.?[0-9_]*(?:[eE][-+]?[0-9]+)?"  # underscored numbers
    r"|(?=.*[0-9])[-+]?[0-9]*\.?[0-9]*[eE][-+]?[0-9]+|[-+]0x[0-9a-fA-F]+|[-+]?0o[0-7]+"  # exponents, signed hex, 1.2 octal
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt \t].*)?"  # timestamps
    r"|\.nan|\.NaN|\.NAN|<<|=)"
)


class _Unreadable(Exception):
    pass


def _double_quoted(body: str) -> tuple[str, str]:
    """The value of a ``"..."`` scalar starting after the quote, and what follows the closing quote."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == '"':
            return "".join(out), body[i + 1 :]
        if ch == "\\":
            if i + 1 >= len(body):
                raise _Unreadable("a double-quoted value ends in a backslash (line continuation)")
            esc = body[i + 1]
            if esc in _DQ_ESCAPES:
                out.append(_DQ_ESCAPES[esc])
                i += 2
                continue
            width = _HEX_ESCAPES.get(esc)
            digits = body[i + 2 : i + 2 + width] if width else ""
            if not width or len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise _Unreadable(f"unsupported escape \\{esc} in a double-quoted value")
            code = int(digits, 16)
            if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                raise _Unreadable(f"escape \\{esc}{digits} is not a Unicode scalar value")
            out.append(chr(code))
            i += 2 + width
            continue
        out.append(ch)
        i += 1
    raise _Unreadable("a double-quoted value is not closed on its line")


def _single_quoted(body: str) -> tuple[str, str]:
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "'":
            if body[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), body[i + 1 :]
        out.append(body[i])
        i += 1
    raise _Unreadable("a single-quoted value is not closed on its line")


def _plain(text: str) -> Scalar:
    """A plain scalar, typed by the YAML 1.2 core schema; ``_Unreadable`` when in any doubt."""
    for marker in (" #", "\t#"):  # a comment ends the value
        text = text.split(marker, 1)[0]
    text = text.rstrip(" \t")
    if not text:
        raise _Unreadable("the value is empty (nested and null-by-omission values are not read)")
    first, second = text[0], text[1:2]
    if first in _PLAIN_FORBIDDEN_START or (first in "-?:" and second in {"", " ", "\t"}):
        raise _Unreadable(f"value {text!r} starts with a YAML indicator")
    if ": " in text or ":\t" in text or text.endswith(":"):
        raise _Unreadable(f"value {text!r} contains ': ', which YAML does not allow in a plain scalar")
    if text in _NULL:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _AMBIGUOUS.fullmatch(text):
        raise _Unreadable(f"value {text!r} is typed differently by different YAML readers; quote it")
    if _INT10.fullmatch(text):
        return int(text)
    if _INT16.fullmatch(text):
        return int(text[2:], 16)
    if _FLOAT.fullmatch(text):
        return float(text)
    if text in _SPECIAL_FLOAT:
        return _SPECIAL_FLOAT[text]
    return text


def _value(text: str) -> Scalar:
    if text[:1] in {'"', "'"}:
        value, rest = (_double_quoted if text[0] == '"' else _single_quoted)(text[1:])
        if rest.strip(" \t") and not (rest[:1] in {" ", "\t"} and rest.lstrip(" \t").startswith("#")):
            raise _Unreadable(f"text {rest.strip()!r} follows a quoted value")
        return value
    return _plain(text)


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _split_frontmatter(uri: str, text: str) -> tuple[list[str], str]:
    """The frontmatter's lines (without the ``---`` fences) and the body after it."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[0].removesuffix("\r").rstrip(" \t") != "---":
        raise SkillVerificationError(uri, "SKILL.md does not begin with a --- frontmatter block")
    for end in range(1, len(lines)):
        if lines[end].removesuffix("\r").rstrip(" \t") == "---":
            return [line.removesuffix("\r") for line in lines[1:end]], "\n".join(lines[end + 1 :])
    raise SkillVerificationError(uri, "SKILL.md's frontmatter block is not closed by ---")


def parse_frontmatter(uri: str, text: str) -> dict[str, Scalar]:
    """The YAML frontmatter of a SKILL.md, read strictly; ``SkillVerificationError`` when unreadable.

    The file must open with a ``---`` line and the frontmatter ends at the
    next ``---`` line.  Between them only ``key: value`` lines with a scalar
    value (plain, ``'single'`` or ``"double"`` quoted), blank lines and
    ``#`` comments are read.  Indentation (nesting), block scalars, flow
    collections, anchors, tags, duplicate keys, control characters and plain
    values that YAML readers type differently are all refused: the caller
    must then not load the skill.
    """
    lines, _ = _split_frontmatter(uri, text)
    fields: dict[str, Scalar] = {}
    for number, line in enumerate(lines, start=2):
        try:
            if _CONTROL.search(line):
                raise _Unreadable("a control character")
            stripped = line.strip(" \t")
            if not stripped or stripped.startswith("#"):
                continue
            match = _KEY_LINE.fullmatch(line)
            if match is None:
                raise _Unreadable("not a flat 'key: value' line")
            key, raw = match.group(1), match.group(2)
            if not isinstance(_plain(key), str):  # true: / 1: / null: are not string keys in YAML
                raise _Unreadable(f"key {key!r} is not a string in YAML")
            if key in fields:
                raise _Unreadable(f"key {key!r} appears twice")
            fields[key] = _value(raw or "")
        except _Unreadable as exc:
            raise SkillVerificationError(uri, f"unreadable frontmatter, line {number}: {exc}") from None
    return fields


def _same(a: object, b: object) -> bool:
    """JSON-value equality: booleans are not numbers, and ints equal floats of the same value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def compare_frontmatter(uri: str, found: Mapping[str, Any], declared: Mapping[str, Any]) -> None:
    """Field by field, the file's frontmatter against the entry's; ``SkillVerificationError`` on any difference."""
    differences: list[str] = []
    for key in sorted({*found, *declared}):
        if key not in found:
            differences.append(f"{key}: in the entry, not in the file")
        elif key not in declared:
            differences.append(f"{key}: in the file, not in the entry")
        elif not _same(found[key], declared[key]):
            differences.append(f"{key}: the file has {found[key]!r}, the entry {declared[key]!r}")
    if differences:
        raise SkillVerificationError(uri, "frontmatter differs from the entry's: " + "; ".join(differences))


# -- over a connection --------------------------------------------------------------------


def _content_bytes(uri: str, result: Mapping[str, Any]) -> bytes:
    """The raw bytes of ``uri`` in a ``resources/read`` result: text as UTF-8, blob base64-decoded."""
    contents = result.get("contents")
    listed = contents if isinstance(contents, list) else []
    matching = [c for c in listed if isinstance(c, Mapping) and c.get("uri") == uri]
    if len(matching) != 1:
        raise SkillVerificationError(
            uri, f"resources/read returned {len(matching)} contents for this uri, not 1"
        )
    content = matching[0]
    text, blob = content.get("text"), content.get("blob")
    try:
        if isinstance(text, str) and blob is None:
            return text.encode("utf-8")
        if isinstance(blob, str) and text is None:
            return base64.b64decode(blob, validate=True)
    except (UnicodeEncodeError, binascii.Error) as exc:
        raise SkillVerificationError(uri, f"unreadable content: {exc}") from None
    raise SkillVerificationError(uri, "the content has neither text nor blob (or both)")


async def _read(client: Client, uri: str) -> bytes:
    return _content_bytes(uri, await client.request("resources/read", {"uri": uri}))


async def skills_declared(client: Client) -> bool:
    """Whether the server declared ``io.modelcontextprotocol/skills``.

    Legacy sessions know from ``initialize``; a 2026-07-28 session asks
    ``server/discover`` once per connection (``Client.server_capabilities``
    keeps the answer), and no skill file is read.
    """
    caps: Any = await client.server_capabilities()
    extensions = caps.get("extensions") if isinstance(caps, Mapping) else None
    return isinstance(extensions, Mapping) and isinstance(extensions.get(EXTENSION_ID), Mapping)


async def list_skills(
    client: Client, *, on_invalid: Callable[[SkillEntryError], None] | None = None
) -> list[SkillEntry]:
    """Every page of ``skills/list``, validated; ``[]`` when the server did not declare the extension.

    Reads no skill file (SEP-2640 "Lazy Retrieval").  An entry that fails
    ``parse_skill_entry`` is left out and handed to ``on_invalid``.  An empty
    listing does not prove the server has no skills: ``get_skill`` still
    answers for a URI learnt elsewhere.
    """
    if not await skills_declared(client):
        return []
    entries: list[SkillEntry] = []
    for raw in await client.list_all("skills/list", "skills"):
        try:
            entries.append(parse_skill_entry(raw))
        except SkillEntryError as exc:
            if on_invalid is not None:
                on_invalid(exc)
    return entries


async def get_skill(client: Client, uri: str) -> SkillEntry:
    """The entry for one SKILL.md URI (``skills/get``), validated; reads no skill file."""
    result = await client.request("skills/get", {"uri": uri})
    entry = parse_skill_entry(result.get("skill"))
    if entry.uri != uri:
        raise SkillEntryError(uri, f"skills/get answered with the entry for {entry.uri}")
    return entry


class LoadedSkill:
    """A skill whose SKILL.md was read and verified; its other files are read, verified, on demand.

    The held ``entry`` is what every later read is checked against (SEP-2640
    "The Acting Window and the Held Entry"): a file it does not list is a
    verification failure, never a read.
    """

    def __init__(self, client: Client, entry: SkillEntry, data: bytes) -> None:
        """Use ``load_skill``: it verifies ``data`` (the SKILL.md bytes) before building this."""
        self.client = client
        self.entry = entry
        self.text = data.decode("utf-8")  # SKILL.md, verified
        self.frontmatter = parse_frontmatter(entry.uri, self.text)
        self.body = _split_frontmatter(entry.uri, self.text)[1]  # SKILL.md after its frontmatter
        self._cache: dict[str, bytes] = {entry.uri: data}
        self._retrieved = len(data)  # bytes read, for a dynamic skill's total limit

    def resolve(self, ref: str) -> str:
        """The URI of ``ref``: a URI as is, or a path relative to the skill's root (SEP-2640 "Relative References")."""
        if "://" in ref:
            return ref
        if ref.startswith("/"):
            raise SkillVerificationError(ref, "a reference within a skill is relative to its root")
        uri = f"{self.entry.root}/{ref}"
        if not _within(self.entry.root, uri):
            raise SkillVerificationError(uri, f"{ref!r} escapes the skill's directory")
        return uri

    async def read(self, ref: str) -> bytes:
        """The verified bytes of one of the skill's files (cached); ``SkillVerificationError`` otherwise."""
        uri = self.resolve(ref)
        cached = self._cache.get(uri)
        if cached is not None:
            return cached
        if self.entry.resources == DYNAMIC:
            if not _within(self.entry.root, uri):
                raise SkillVerificationError(uri, f"not a file of the skill {self.entry.root}")
            data = await _read(self.client, uri)
            if self._retrieved + len(data) > MAX_SKILL_BYTES:
                raise SkillVerificationError(uri, f"the skill's files exceed {MAX_SKILL_BYTES} bytes")
            self._retrieved += len(data)
        else:
            expected = self.entry.file(uri)
            if expected is None:
                raise SkillVerificationError(
                    uri, "not listed in the skill's entry (an unlisted file is a change)"
                )
            data = await _read(self.client, uri)
            verify_file(data, expected)
        self._cache[uri] = data
        return data

    async def read_text(self, ref: str) -> str:
        data = await self.read(ref)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SkillVerificationError(self.resolve(ref), f"not UTF-8 text: {exc}") from None


async def load_skill(client: Client, entry: SkillEntry, *, allow_dynamic: bool = False) -> LoadedSkill:
    """Read the skill's SKILL.md and verify it; only then return it (nothing else is read).

    Verification (SEP-2640 "Integrity and Verification"): the bytes against
    the entry's size and digest, then the frontmatter field by field against
    the entry's.  Any failure raises ``SkillVerificationError`` and the
    content is dropped; the caller must not read the skill's other files.
    ``SkillEntryError`` when the entry is over the limits, or ``"dynamic"``
    without ``allow_dynamic`` (no digest to verify against).
    """
    if entry.resources == DYNAMIC:
        if not allow_dynamic:
            raise SkillEntryError(entry.uri, 'resources is "dynamic": no digests to verify against')
        data = await _read(client, entry.uri)
        if len(data) > MAX_SKILL_BYTES:
            raise SkillVerificationError(entry.uri, f"{SKILL_FILE} exceeds {MAX_SKILL_BYTES} bytes")
    else:
        if len(entry.resources) > MAX_SKILL_FILES:
            raise SkillEntryError(
                entry.uri, f"{len(entry.resources)} files; mcpx loads at most {MAX_SKILL_FILES}"
            )
        total = sum(f.size for f in entry.resources)
        if total > MAX_SKILL_BYTES:
            raise SkillEntryError(entry.uri, f"{total} bytes of files; mcpx loads at most {MAX_SKILL_BYTES}")
        expected = entry.file(entry.uri)
        assert expected is not None  # parse_skill_entry saw to it
        data = await _read(client, entry.uri)
        verify_file(data, expected)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillVerificationError(entry.uri, f"{SKILL_FILE} is not UTF-8 text: {exc}") from None
    compare_frontmatter(entry.uri, parse_frontmatter(entry.uri, text), entry.frontmatter)
    return LoadedSkill(client, entry, data)
