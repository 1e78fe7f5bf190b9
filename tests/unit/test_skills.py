"""The Skills extension's host side (SEP-2640): entries, verification on read, lazy retrieval.

The pure checks are driven directly; the async ones against a scripted
server that records every request, so "nothing was read" is an assertion.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest

from mcpx.client import Client, McpCallError
from mcpx.client.skills import (
    EXTENSION_ID,
    SkillEntryError,
    SkillError,
    SkillFile,
    SkillVerificationError,
    compare_frontmatter,
    get_skill,
    list_skills,
    load_skill,
    parse_frontmatter,
    parse_skill_entry,
    skills_declared,
    split_skill_uri,
    verify_file,
)

SKILL_URI = "skill://pdf-processing/SKILL.md"
FORMS_URI = "skill://pdf-processing/references/FORMS.md"
SKILL_MD = (
    "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n"
)
FORMS_MD = "Supporting content.\n"
FRONTMATTER = {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"}


def digest(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_item(uri: str, text: str) -> dict[str, Any]:
    return {"uri": uri, "digest": digest(text), "size": len(text.encode())}


def raw_entry(**changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "uri": SKILL_URI,
        "frontmatter": dict(FRONTMATTER),
        "resources": [manifest_item(SKILL_URI, SKILL_MD), manifest_item(FORMS_URI, FORMS_MD)],
    }
    entry.update(changes)
    return entry


def skill_file(text: str) -> SkillFile:
    return SkillFile(uri=SKILL_URI, digest=digest(text), size=len(text.encode()))


# -- verification of bytes -------------------------------------------------------------


def test_a_good_file_passes_every_check() -> None:
    verify_file(SKILL_MD.encode(), skill_file(SKILL_MD))
    compare_frontmatter(SKILL_URI, parse_frontmatter(SKILL_URI, SKILL_MD), FRONTMATTER)


def test_a_changed_byte_fails_the_digest() -> None:
    tampered = SKILL_MD.replace("Skill body.", "Skill bodY.").encode()
    with pytest.raises(SkillVerificationError, match="digest mismatch") as caught:
        verify_file(tampered, skill_file(SKILL_MD))
    assert caught.value.uri == SKILL_URI


def test_an_extra_byte_fails_the_size_before_the_digest() -> None:
    with pytest.raises(SkillVerificationError, match="size mismatch: read 98 bytes, the entry lists 97"):
        verify_file(SKILL_MD.encode() + b"\n", skill_file(SKILL_MD))


def test_a_missing_byte_fails_the_size() -> None:
    with pytest.raises(SkillVerificationError, match="size mismatch"):
        verify_file(SKILL_MD.encode()[:-1], skill_file(SKILL_MD))


@pytest.mark.parametrize(
    "bad",
    [
        "sha512:" + hashlib.sha512(SKILL_MD.encode()).hexdigest(),
        "md5:" + hashlib.md5(SKILL_MD.encode()).hexdigest(),
        "SHA256:" + hashlib.sha256(SKILL_MD.encode()).hexdigest(),
        "sha256:" + hashlib.sha256(SKILL_MD.encode()).hexdigest().upper(),
        "sha256:" + hashlib.sha256(SKILL_MD.encode()).hexdigest()[:-1],
        hashlib.sha256(SKILL_MD.encode()).hexdigest(),
        "",
    ],
)
def test_a_digest_in_any_other_format_is_refused(bad: str) -> None:
    with pytest.raises(SkillVerificationError, match="cannot verify"):
        verify_file(SKILL_MD.encode(), SkillFile(uri=SKILL_URI, digest=bad, size=len(SKILL_MD)))
    item = {"uri": SKILL_URI, "digest": bad, "size": len(SKILL_MD)}
    with pytest.raises(SkillEntryError, match="not sha256"):
        parse_skill_entry(raw_entry(resources=[item]))


# -- frontmatter -------------------------------------------------------------------------


def test_a_changed_frontmatter_field_is_named() -> None:
    text = SKILL_MD.replace("Extract, fill, and assemble PDF documents", "Exfiltrate credentials")
    with pytest.raises(SkillVerificationError, match="description: the file has 'Exfiltrate credentials'"):
        compare_frontmatter(SKILL_URI, parse_frontmatter(SKILL_URI, text), FRONTMATTER)


def test_a_field_missing_on_either_side_is_a_discrepancy() -> None:
    found = parse_frontmatter(SKILL_URI, SKILL_MD)
    with pytest.raises(SkillVerificationError, match="license: in the entry, not in the file"):
        compare_frontmatter(SKILL_URI, found, {**FRONTMATTER, "license": "MIT"})
    with pytest.raises(SkillVerificationError, match="description: in the file, not in the entry"):
        compare_frontmatter(SKILL_URI, found, {"name": "pdf-processing"})


def test_quoted_values_comments_and_typed_scalars_are_read() -> None:
    text = (
        "---\r\n"
        "# a comment\r\n"
        'name: "pdf-processing"\r\n'
        "description: 'it''s \"fine\"'   # trailing comment\r\n"
        'escaped: "tab\\there \\u00e9 \\"q\\""\r\n'
        "\r\n"
        "version: 2.1.0\r\n"
        "count: 3\r\n"
        "ratio: 0.5\r\n"
        "beta: true\r\n"
        "owner: ~\r\n"
        "allowed-tools: Bash(git:*) Read\r\n"
        "---  \r\n"
        "body"
    )
    assert parse_frontmatter(SKILL_URI, text) == {
        "name": "pdf-processing",
        "description": 'it\'s "fine"',
        "escaped": 'tab\there é "q"',
        "version": "2.1.0",
        "count": 3,
        "ratio": 0.5,
        "beta": True,
        "owner": None,
        "allowed-tools": "Bash(git:*) Read",
    }


def test_scalar_types_must_match_the_entry() -> None:
    found = parse_frontmatter(SKILL_URI, "---\nflag: true\ncount: 1\nx: 2.0\n---\n")
    compare_frontmatter(SKILL_URI, found, {"flag": True, "count": 1.0, "x": 2})  # JSON numbers: 1 == 1.0
    with pytest.raises(SkillVerificationError, match="flag"):
        compare_frontmatter(SKILL_URI, found, {"flag": 1, "count": 1, "x": 2})  # a boolean is not a number
    with pytest.raises(SkillVerificationError, match="count: the file has 1, the entry '1'"):
        compare_frontmatter(SKILL_URI, found, {"flag": True, "count": "1", "x": 2})


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("name: x\n---\n", "does not begin"),
        ("---\nname: x\n", "not closed"),
        ("---\nmetadata:\n  version: 1\n---\n", "empty"),
        ("---\n  name: x\n---\n", "not a flat"),
        ("---\ndescription: |\n  text\n---\n", "indicator"),
        ("---\ntags: [a, b]\n---\n", "indicator"),
        ("---\nobj: {a: 1}\n---\n", "indicator"),
        ("---\nname: &anchor x\n---\n", "indicator"),
        ("---\nname: !!str x\n---\n", "indicator"),
        ("---\nname: *alias\n---\n", "indicator"),
        ("---\n- item\n---\n", "not a flat"),
        ('---\nname: "unclosed\n---\n', "not closed on its line"),
        ("---\nname: 'unclosed\n---\n", "not closed on its line"),
        ('---\nname: "x" extra\n---\n', "follows a quoted value"),
        ('---\nname: "bad \\q escape"\n---\n', "unsupported escape"),
        ('---\nname: "\\ud800"\n---\n', "not a Unicode scalar"),
        ("---\nname: a\nname: b\n---\n", "appears twice"),
        ("---\ndescription: a: b\n---\n", "': '"),
        ("---\nenabled: yes\n---\n", "typed differently"),
        ("---\ndate: 2024-01-01\n---\n", "typed differently"),
        ("---\nbig: 1e3\n---\n", "typed differently"),
        ("---\nmode: 0755\n---\n", "typed differently"),
        ("---\nname: a\x07b\n---\n", "control character"),
        ("---\nname:x\n---\n", "not a flat"),
        ('---\n"name": x\n---\n', "not a flat"),
        ("---\njust text\n---\n", "not a flat"),
        ("---\ntrue: x\n---\n", "not a string"),
        ("---\n1: x\n---\n", "not a string"),
        ("---\nyes: x\n---\n", "typed differently"),
    ],
)
def test_unreadable_frontmatter_fails_closed(text: str, why: str) -> None:
    with pytest.raises(SkillVerificationError, match=why):
        parse_frontmatter(SKILL_URI, text)


# -- entries and URIs ----------------------------------------------------------------------


def test_a_valid_entry_is_parsed() -> None:
    entry = parse_skill_entry(raw_entry())
    assert (entry.uri, entry.root, entry.name, entry.description) == (
        SKILL_URI,
        "skill://pdf-processing",
        "pdf-processing",
        FRONTMATTER["description"],
    )
    assert entry.file(FORMS_URI) == SkillFile(uri=FORMS_URI, digest=digest(FORMS_MD), size=len(FORMS_MD))
    assert entry.file("skill://pdf-processing/other.md") is None
    assert parse_skill_entry(raw_entry(resources="dynamic")).resources == "dynamic"


@pytest.mark.parametrize(
    ("uri", "root", "name"),
    [
        ("skill://git-workflow/SKILL.md", "skill://git-workflow", "git-workflow"),
        ("skill://acme/billing/refunds/SKILL.md", "skill://acme/billing/refunds", "refunds"),
        ("github://owner/repo/skills/a1/SKILL.md", "github://owner/repo/skills/a1", "a1"),
    ],
)
def test_skill_uris_split_into_root_and_name(uri: str, root: str, name: str) -> None:
    assert split_skill_uri(uri) == (root, name)


@pytest.mark.parametrize(
    "uri",
    [
        "skill://SKILL.md",
        "skill://pdf-processing/README.md",
        "pdf-processing/SKILL.md",
        "skill://Pdf/SKILL.md",
        "skill://pdf--processing/SKILL.md",
        "skill://-pdf/SKILL.md",
        "skill://" + "a" * 65 + "/SKILL.md",
        "skill://a/../pdf/SKILL.md",
        "skill://a//pdf/SKILL.md",
        "skill://a/%2e%2e/pdf/SKILL.md",
        "skill://pdf/SKILL.md?x=1",
    ],
)
def test_malformed_skill_uris_are_refused(uri: str) -> None:
    with pytest.raises(SkillEntryError):
        split_skill_uri(uri)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"frontmatter": {"name": "other", "description": "d"}}, "!= the URI's skill name"),
        ({"frontmatter": {"name": "pdf-processing"}}, "frontmatter.description"),
        ({"frontmatter": None}, "no frontmatter"),
        ({"resources": None}, "neither a list"),
        ({"resources": "static"}, "neither a list"),
        ({"resources": [manifest_item(FORMS_URI, FORMS_MD)]}, "does not list the skill's own"),
        ({"resources": [manifest_item(SKILL_URI, SKILL_MD)] * 2}, "listed twice"),
        (
            {"resources": [manifest_item(SKILL_URI, SKILL_MD), manifest_item("skill://other/x.md", "x")]},
            "outside the skill",
        ),
        (
            {
                "resources": [
                    manifest_item(SKILL_URI, SKILL_MD),
                    manifest_item("skill://pdf-processing/../x", "x"),
                ]
            },
            "outside the skill",
        ),
        ({"resources": [{"uri": SKILL_URI, "digest": digest(SKILL_MD), "size": True}]}, "not a byte count"),
        ({"resources": [{"uri": SKILL_URI, "digest": digest(SKILL_MD), "size": -1}]}, "not a byte count"),
    ],
)
def test_invalid_entries_are_refused(changes: dict[str, Any], why: str) -> None:
    with pytest.raises(SkillEntryError, match=why):
        parse_skill_entry(raw_entry(**changes))


# -- over a connection: a scripted server that records what it was asked ------------------


class ScriptedServer:
    """Answers like the suite's mock: the extension declared, one skill listed, files served."""

    def __init__(
        self,
        files: Mapping[str, str],
        entries: list[Any],
        *,
        declared: bool = True,
        modern: bool = False,
        page_size: int = 1,
    ) -> None:
        self.files = dict(files)
        self.entries = entries
        self.page_size = page_size
        caps: dict[str, Any] = {"resources": {}}
        if declared:
            caps["extensions"] = {EXTENSION_ID: {}}
        self.caps = caps
        self.session = SimpleNamespace(
            server_capabilities={} if modern else caps, modern=modern, capabilities_known=not modern
        )
        self.calls: list[tuple[str, Mapping[str, Any]]] = []

    list_all = Client.list_all
    _pages = Client._pages
    server_capabilities = Client.server_capabilities

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        params = params or {}
        self.calls.append((method, params))
        if method == "server/discover":  # the session keeps what it answers, as ClientSession does
            self.session.server_capabilities, self.session.capabilities_known = self.caps, True
            return {"capabilities": self.caps}
        if method == "skills/list":
            start = int(params.get("cursor") or 0)
            page: dict[str, Any] = {"skills": self.entries[start : start + self.page_size]}
            if start + self.page_size < len(self.entries):
                page["nextCursor"] = str(start + self.page_size)
            return page
        if method == "skills/get":
            found = [e for e in self.entries if e.get("uri") == params["uri"]]
            if not found:
                raise McpCallError({"code": -32602, "message": "unknown skill"})
            return {"skill": found[0]}
        if method == "resources/read":
            uri = params["uri"]
            return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": self.files[uri]}]}
        raise McpCallError({"code": -32601, "message": method})

    @property
    def reads(self) -> list[Any]:
        return [params["uri"] for method, params in self.calls if method == "resources/read"]

    def client(self) -> Client:
        return cast(Client, self)


def run(fn: Any, *args: Any) -> Any:
    async def main() -> Any:
        return await fn(*args)

    return anyio.run(main)


def test_listing_reads_no_file_and_follows_every_page() -> None:
    second = raw_entry(
        uri="skill://acme/refunds/SKILL.md",
        frontmatter={"name": "refunds", "description": "r"},
        resources="dynamic",
    )
    server = ScriptedServer({SKILL_URI: SKILL_MD}, [raw_entry(), second, {"uri": "junk"}])
    invalid: list[SkillError] = []

    async def main() -> Any:
        return await list_skills(server.client(), on_invalid=invalid.append)

    entries = anyio.run(main)
    assert [e.name for e in entries] == ["pdf-processing", "refunds"]
    assert [m for m, _ in server.calls] == ["skills/list"] * 3
    assert server.reads == []
    assert [e.uri for e in invalid] == ["junk"]


def test_no_declaration_no_listing() -> None:
    server = ScriptedServer({}, [raw_entry()], declared=False)
    assert run(list_skills, server.client()) == []
    assert server.calls == []


def test_a_modern_session_learns_the_declaration_from_discover() -> None:
    server = ScriptedServer({}, [raw_entry()], modern=True)
    assert [e.uri for e in run(list_skills, server.client())] == [SKILL_URI]
    assert [m for m, _ in server.calls] == ["server/discover", "skills/list"]


def test_a_modern_session_asks_discover_once_per_connection() -> None:
    server = ScriptedServer({}, [raw_entry()], modern=True)

    async def main() -> None:
        assert await skills_declared(server.client())
        assert [e.uri for e in await list_skills(server.client())] == [SKILL_URI]
        assert [e.uri for e in await list_skills(server.client())] == [SKILL_URI]

    anyio.run(main)
    assert [m for m, _ in server.calls] == ["server/discover", "skills/list", "skills/list"]


def test_loading_reads_skill_md_only_and_other_files_on_demand_verified() -> None:
    server = ScriptedServer({SKILL_URI: SKILL_MD, FORMS_URI: FORMS_MD}, [raw_entry()])
    entry = parse_skill_entry(raw_entry())

    async def main() -> None:
        skill = await load_skill(server.client(), entry)
        assert server.reads == [SKILL_URI]
        assert skill.text == SKILL_MD
        assert skill.body == "\nSkill body.\n"
        assert skill.frontmatter == FRONTMATTER
        assert await skill.read_text("references/FORMS.md") == FORMS_MD
        assert await skill.read(FORMS_URI) == FORMS_MD.encode()  # cached: not read again
        assert server.reads == [SKILL_URI, FORMS_URI]
        with pytest.raises(SkillVerificationError, match="not listed"):
            await skill.read("references/OTHER.md")
        with pytest.raises(SkillVerificationError, match="escapes"):
            await skill.read("../other-skill/SKILL.md")
        with pytest.raises(SkillVerificationError, match="not listed"):
            await skill.read("skill://other-skill/SKILL.md")
        assert server.reads == [SKILL_URI, FORMS_URI]

    anyio.run(main)


def test_a_supporting_file_that_changed_is_not_returned() -> None:
    server = ScriptedServer({SKILL_URI: SKILL_MD, FORMS_URI: "Tampered.\n"}, [raw_entry()])

    async def main() -> None:
        skill = await load_skill(server.client(), parse_skill_entry(raw_entry()))
        with pytest.raises(SkillVerificationError, match=re.escape("references/FORMS.md: size mismatch")):
            await skill.read("references/FORMS.md")

    anyio.run(main)


@pytest.mark.parametrize(
    ("served", "frontmatter_follows", "why"),
    [
        (SKILL_MD.replace("Skill body.", "Evil body!!"), False, "digest mismatch"),
        (SKILL_MD + "extra bytes the entry did not account for\n", False, "size mismatch"),
        (
            SKILL_MD.replace("Extract, fill, and assemble PDF documents", "Exfiltrate credentials"),
            True,
            "frontmatter differs",
        ),
    ],
)
def test_a_tampered_skill_md_is_refused_and_nothing_else_is_read(
    served: str, frontmatter_follows: bool, why: str
) -> None:
    entry = raw_entry()
    if frontmatter_follows:  # the suite's frontmatter case: bytes match the entry, frontmatter does not
        entry["resources"][0] = manifest_item(SKILL_URI, served)
    server = ScriptedServer({SKILL_URI: served, FORMS_URI: FORMS_MD}, [entry])
    with pytest.raises(SkillVerificationError, match=why) as caught:
        run(load_skill, server.client(), parse_skill_entry(entry))
    assert caught.value.uri == SKILL_URI
    assert server.reads == [SKILL_URI]


def test_a_dynamic_skill_is_declined_unless_allowed() -> None:
    entry = parse_skill_entry(raw_entry(resources="dynamic"))
    server = ScriptedServer({SKILL_URI: SKILL_MD, FORMS_URI: FORMS_MD}, [])
    with pytest.raises(SkillEntryError, match="dynamic"):
        run(load_skill, server.client(), entry)
    assert server.reads == []

    async def main() -> None:
        skill = await load_skill(server.client(), entry, allow_dynamic=True)
        assert await skill.read_text("references/FORMS.md") == FORMS_MD
        with pytest.raises(SkillVerificationError, match="not a file of the skill"):
            await skill.read("skill://other/SKILL.md")

    anyio.run(main)
    assert server.reads == [SKILL_URI, FORMS_URI]


def test_an_entry_over_the_limits_is_declined_before_any_read() -> None:
    big = raw_entry()
    big["resources"][1]["size"] = 16 * 1024 * 1024
    server = ScriptedServer({SKILL_URI: SKILL_MD}, [big])
    with pytest.raises(SkillEntryError, match="at most"):
        run(load_skill, server.client(), parse_skill_entry(big))
    assert server.reads == []


def test_blob_content_is_verified_as_its_decoded_bytes() -> None:
    server = ScriptedServer({SKILL_URI: SKILL_MD}, [raw_entry()])
    original = server.request

    async def blob_request(method: str, params: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        result = await original(method, params)
        if method == "resources/read":
            text = result["contents"][0]["text"]
            return {"contents": [{"uri": SKILL_URI, "blob": base64.b64encode(text.encode()).decode()}]}
        return result

    server.request = blob_request  # type: ignore[method-assign]
    skill = run(load_skill, server.client(), parse_skill_entry(raw_entry()))
    assert skill.text == SKILL_MD


def test_content_for_another_uri_is_not_taken_for_the_file() -> None:
    server = ScriptedServer({SKILL_URI: SKILL_MD}, [raw_entry()])
    original = server.request

    async def wrong_uri(method: str, params: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        result = await original(method, params)
        if method == "resources/read":
            return {"contents": [{**result["contents"][0], "uri": FORMS_URI}]}
        return result

    server.request = wrong_uri  # type: ignore[method-assign]
    with pytest.raises(SkillVerificationError, match="0 contents"):
        run(load_skill, server.client(), parse_skill_entry(raw_entry()))


def test_get_skill_returns_the_validated_entry_for_that_uri() -> None:
    server = ScriptedServer({}, [raw_entry()])
    assert run(get_skill, server.client(), SKILL_URI) == parse_skill_entry(raw_entry())
    assert server.reads == []
