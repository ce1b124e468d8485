"""``srt migrate``: the v1 layout (``infra:``, ``backend.mooncake_kv_store``) to schema 2.

v1 recipes configured the discovery plane and the Mooncake master through dedicated keys;
schema 2 says the same with ``services:`` entries. The rewrite is mechanical and
idempotent, and it goes through ruamel.yaml's round-trip mode: the comments, key order,
quoting and flow style of everything it does not rewrite survive. A reviewer then diffs the
migrated recipe against the original and sees only the lines that changed meaning.

The text is first parsed by srt's own loader, which refuses duplicate keys and alias bombs
with their line, so ruamel only ever sees a document srt would accept.
"""

from __future__ import annotations

import copy
import io
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from srt_services.recipe.problems import LocatedProblem, Problem, RecipeError, locate
from srt_services.recipe.reading import read_text
from srt_services.recipe.source import parse_text

if TYPE_CHECKING:
    from ruamel.yaml import YAML

#: The one note of a recipe that needed no rewrite.
UNCHANGED = "already schema 2; nothing to do"
#: ``backend.type`` values that are schema 2 ``engine.type`` values.
ENGINE_TYPES = ("sglang", "vllm", "trtllm")

_KEY_LINE = re.compile(r"^( *)[^\s#-][^#]*:\s*(#.*)?$")
_NESTED_KEY = re.compile(r"^( *)[^\s#-]")
_DASH = re.compile(r"^( *)- ")


def migrate_document(tree: Any, plain: dict[str, Any]) -> list[str]:
    """Rewrite ``tree`` (ruamel's ``CommentedMap`` of the text) in place; return the notes.

    Every value is read from ``plain``, the same text as srt's own loader reads it (YAML
    1.1, where ``no`` is false), and ``tree`` is only edited: ruamel reads YAML 1.2, where
    ``etcd_nats_dedicated_node: no`` would be the true-looking string "no".
    """
    if plain.get("schema") == 2:
        return [UNCHANGED]
    notes: list[str] = []
    frontend = plain.get("frontend") or {}
    ftype = frontend.get("type", "dynamo") if isinstance(frontend, dict) else "dynamo"
    dynamo = plain.get("dynamo") or {}
    planes_nats = isinstance(dynamo, dict) and "nats" in (
        dynamo.get("request_plane"),
        dynamo.get("event_plane"),
    )
    front: list[dict[str, Any]] = []
    back: list[dict[str, Any]] = []
    where = None
    infra_said = _Said()
    if "infra" in tree:
        where = list(tree).index("infra")
        infra_said = _delete(tree, "infra")
        front = _infra_entries(plain.get("infra") or {}, ftype, planes_nats, notes)
    backend = plain.get("backend")
    if isinstance(backend, dict) and "mooncake_kv_store" in backend:
        kept = tree["backend"]
        at = list(kept).index("mooncake_kv_store")
        said = _delete(kept, "mooncake_kv_store")
        said_text = said.eol + said.after
        master = _mooncake_master(tree, backend["mooncake_kv_store"] or {}, kept, notes)
        if any(e.get("placement") == {"node": "dedicated"} for e in front):
            # v1 ran the master where etcd and NATS ran; schema 2 says so, as the three
            # share the infra node (all dedicated or none)
            master["placement"] = {"node": "dedicated"}
        back = [master]
        if kept:
            _keep(kept, at - 1, said_text)
        else:
            at = list(tree).index("backend")
            block = _delete(tree, "backend")
            _keep(tree, at - 1, block.eol + block.after + said_text)
    if isinstance(backend, dict) and "type" in backend:
        _backend_type(tree, plain, backend["type"], notes)
    replaced = where is not None and "services" not in tree and bool(front or back)
    if front or back:
        _add_services(tree, front, back, where)
    if where is not None:
        # what was said in and after the v1 block stays where it was: on and after the
        # services that replaced it, or after the setting before it
        if replaced:
            _set_comment(tree, "services", infra_said)
            _keep(tree, where, infra_said.after)
        else:
            _keep(tree, where - 1, infra_said.eol + infra_said.after)
    _insert(tree, 0, "schema", 2)
    return notes


def _infra_entries(
    infra: dict[str, Any], ftype: str, planes_nats: bool, notes: list[str]
) -> list[dict[str, Any]]:
    dedicated = _infra_dedicated(infra, notes)
    payload = infra.get("nats_max_payload_mb")
    if ftype != "dynamo":
        if dedicated or payload is not None:
            notes.append(f"dropped infra (no discovery plane under frontend.type {ftype})")
        return []
    entries: list[dict[str, Any]] = []
    if dedicated:
        entries.append({"name": "etcd", "type": "etcd", "placement": {"node": "dedicated"}})
        notes.append("infra.etcd_nats_dedicated_node -> services etcd placement.node: dedicated")
    if payload is not None or (dedicated and planes_nats):
        entry: dict[str, Any] = {"name": "nats", "type": "nats"}
        if dedicated:
            entry["placement"] = {"node": "dedicated"}
        if payload is not None:
            entry["options"] = {"max_payload_mb": payload}
            notes.append("infra.nats_max_payload_mb -> services nats options.max_payload_mb")
        entries.append(entry)
    return entries


def _infra_dedicated(infra: dict[str, Any], notes: list[str]) -> bool:
    """Whether v1's ``infra`` asks for a dedicated etcd/NATS node; what is dropped is noted."""
    dedicated_flag = infra.get("etcd_nats_dedicated_node")
    placement = infra.get("placement")
    if isinstance(placement, dict) and placement.get("node") == "dedicated":
        dedicated_flag = True  # the 2.0 draft spelling, `infra.placement.node`
        notes.append("infra.placement.node: dedicated read as infra.etcd_nats_dedicated_node")
    for key in infra:
        if key not in ("etcd_nats_dedicated_node", "nats_max_payload_mb", "placement"):
            notes.append(f"dropped infra.{key} (not a v1 setting)")
    if dedicated_flag is False:
        notes.append("dropped infra.etcd_nats_dedicated_node: false (the default)")
    return bool(dedicated_flag)


def _backend_type(tree: Any, plain: dict[str, Any], engine_type: Any, notes: list[str]) -> None:
    """v1 named the inference engine ``backend.type``; schema 2 calls it ``engine.type``."""
    if engine_type not in ENGINE_TYPES:
        return  # not a v1 engine name: left where it is, so the load error points at it
    engine = plain.get("engine")
    if engine is not None and not isinstance(engine, dict):
        return
    written = (engine or {}).get("type")
    if written is not None and written != engine_type:
        notes.append(
            f"kept backend.type {engine_type}: engine.type says {written} (drop one by hand)"
        )
        return
    from ruamel.yaml.comments import CommentedMap

    kept = tree["backend"]
    where = list(tree).index("backend")
    flow = _is_flow(kept)
    # the setting's own comment goes with it (`type: vllm  # the engine`); the lines after
    # it belong to what follows, and stay where they are
    at = list(kept).index("type")
    said = _delete(kept, "type")
    block_said = _Said()
    if kept:
        _keep(kept, at - 1, said.after)
    else:
        block_said = _delete(tree, "backend")
    after = said.after + block_said.after
    if engine is None:
        block = CommentedMap(type=engine_type)
        if flow:
            block.fa.set_flow_style()  # written as the backend block was
            _set_comment(tree, "engine", block_said if block_said.eol else said)
        else:
            _set_comment(block, "type", said)
            _set_comment(tree, "engine", block_said)
        _insert(tree, where, "engine", block)
        _keep(tree, where, after)
        notes.append("backend.type -> engine.type")
        return
    target = tree["engine"]
    if written is None:
        target["type"] = engine_type
    if _is_flow(target):  # a comment cannot sit inside `{...}`: it goes after it
        _set_comment(tree, "engine", said if said.eol else block_said)
    else:
        _set_comment(target, "type", said)
        _set_comment(tree, "engine", block_said)
    if not kept:
        _keep(tree, where - 1, after)
    notes.append("backend.type -> engine.type")


# ---------------------------------------------------------------- comments of what moves
#
# ruamel keeps a comment with the node it follows: `key: value  # note` and the comment
# lines after it up to the next key are one token on `key`. Deleting a key would delete
# them; these helpers take them off first and give them to the node that now comes
# before that place, so a migrated recipe keeps every comment it had.


@dataclass(slots=True)
class _Said:
    """The comments of a deleted key: its end-of-line comment (and the column it was at),
    and every other comment line in and after its value."""

    eol: str = ""
    column: int = 0
    after: str = ""


def _tokens(entry: Any) -> list[Any]:
    """The comment tokens of one ``ca.items`` entry."""
    found = []
    for token in entry or ():
        for t in token if isinstance(token, list) else [token]:
            if t is not None and hasattr(t, "value"):
                found.append(t)
    return found


def _comments(node: Any) -> str:
    """Every comment inside ``node`` (a ruamel map or list), in document order."""
    ca = getattr(node, "ca", None)
    if ca is None:
        return ""
    out: list[str] = []
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    for key in keys:
        out.extend(t.value for t in _tokens(ca.items.get(key)))
        out.append(_comments(node[key]))
    return "".join(out)


def _delete(mapping: Any, key: str) -> _Said:
    """Delete ``key`` from ``mapping``; return the comments on it and inside its value."""
    ca = getattr(mapping, "ca", None)
    tokens = _tokens(ca.items.pop(key, None) if ca is not None else None)
    text = "".join(t.value for t in tokens)
    said = _Said()
    if text.startswith("#"):
        head, _, text = text.partition("\n")
        said = _Said(head + "\n", tokens[0].column or 0)
    elif text.startswith("\n"):
        text = text[1:]  # the end of the key's own line, not a blank line
    said.after = text + _comments(mapping[key])
    del mapping[key]
    return said


def _set_comment(mapping: Any, key: str, said: _Said) -> None:
    """``said``'s end-of-line comment on ``key`` of ``mapping`` (unless it has one), at the
    column it had."""
    ca = getattr(mapping, "ca", None)
    if not said.eol or ca is None or key in ca.items:
        return
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    ca.items[key] = [None, None, CommentToken(said.eol, CommentMark(said.column), None), None]


def _keep(mapping: Any, index: int, said: str) -> None:
    """Write ``said`` (comment lines) right after entry ``index`` of ``mapping`` (after the
    last line of its value); with no entry before, at the top of ``mapping``."""
    text = "\n".join(line.strip() for line in said.splitlines()).rstrip("\n")
    if not text.strip() or getattr(mapping, "ca", None) is None:
        return
    keys = list(mapping)
    if index < 0 or not keys:
        from ruamel.yaml.error import CommentMark
        from ruamel.yaml.tokens import CommentToken

        # the comments above the first key (the document's own, kept in front of these)
        if mapping.ca.comment is None:
            mapping.ca.comment = [None, []]
        if mapping.ca.comment[1] is None:
            mapping.ca.comment[1] = []
        text = text.lstrip("\n")
        mapping.ca.comment[1].append(CommentToken(text + "\n", CommentMark(0), None))
        return
    container, key = mapping, keys[min(index, len(keys) - 1)]
    while True:  # down to the last line of that entry's value
        value = container[key]
        if not value or not isinstance(value, dict | list) or _is_flow(value):
            break
        if getattr(value, "ca", None) is None:
            break
        container, key = value, (list(value)[-1] if isinstance(value, dict) else len(value) - 1)
    _append_comment(container, key, text + "\n")


def _append_comment(container: Any, key: Any, text: str) -> None:
    """``text`` after the line of ``key`` in ``container`` (a map or a list)."""
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    slot = 2 if isinstance(container, dict) else 0
    entry = container.ca.items.setdefault(key, [None, None, None, None])
    token = entry[slot]
    if token is None:
        entry[slot] = CommentToken("\n" + text, CommentMark(0), None)
    else:
        token.value = token.value.rstrip("\n") + "\n" + text


def _is_flow(node: Any) -> bool:
    fa = getattr(node, "fa", None)
    return bool(fa is not None and fa.flow_style())


def _mooncake_master(tree: Any, kv: dict[str, Any], kept: Any, notes: list[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": "mooncake-master", "type": "mooncake-master"}
    if kv.get("container"):
        entry["container"] = kv["container"]
    if kv.get("master_extra_args"):
        entry["args"] = list(kv["master_extra_args"])
    if kv.get("store_config"):
        entry["options"] = {"store_config": kv["store_config"]}
    notes.append("backend.mooncake_kv_store -> services mooncake-master")
    env = kv.get("env") or {}
    roles = tree.get("roles")
    carried = False
    if env and isinstance(roles, dict):
        for name, role in roles.items():
            if not isinstance(role, dict):
                continue
            if role.get("env") is None:
                role["env"] = dict(env)
            elif isinstance(role["env"], dict):
                role["env"].update(env)  # the Mooncake values win, as in v1
            else:
                notes.append(f"roles.{name}.env is not a mapping: the Mooncake env is not in it")
                continue
            carried = True
            notes.append(f"backend.mooncake_kv_store.env -> roles.{name}.env")
    if env and not carried:
        kept["mooncake_kv_store"] = {"env": env}
        notes.append(
            "kept backend.mooncake_kv_store.env: no role to carry it (move it by hand; the"
            " recipe does not load until then)"
        )
    return entry


def _add_services(
    data: dict[str, Any], front: list[dict[str, Any]], back: list[dict[str, Any]], where: int | None
) -> None:
    from ruamel.yaml.comments import CommentedSeq

    services = data.get("services")
    if isinstance(services, list):
        for i, entry in enumerate(front):
            services.insert(i, _commented(entry))
        services.extend(_commented(e) for e in back)
        return
    seq = CommentedSeq([_commented(e) for e in [*front, *back]])
    if "services" in data:  # `services:` with nothing under it
        data["services"] = seq
        return
    # where `infra` was, so the discovery plane stays where the reader expects it
    _insert(data, where if where is not None else len(data), "services", seq)


def _commented(value: Any) -> Any:
    """A new entry as ruamel's own map (so comments can be kept on it)."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        return CommentedMap((k, _commented(v)) for k, v in value.items())
    if isinstance(value, list):
        return CommentedSeq(_commented(v) for v in value)
    return value


def _insert(data: Any, pos: int, key: str, value: Any) -> None:
    data.insert(pos, key, value)  # CommentedMap.insert: a key at a position, comments kept


def _round_trip(text: str) -> YAML:
    """A ruamel round-trip instance that writes with the document's own indentation."""
    from ruamel.yaml import YAML

    mapping, offset = _indents(text)
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=mapping, sequence=offset + 2, offset=offset)
    return yaml


def _indents(text: str) -> tuple[int, int]:
    """(mapping indent, block-sequence dash offset) as the file writes them; (2, 2) if unsure.

    Not ruamel's ``load_yaml_guess_indent``: it takes a block sequence's indent for the
    mappings' own, and so turns a file indented by 2 with ``  - item`` lists into 4.
    """
    mapping: int | None = None
    offset: int | None = None
    parent: int | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        here = len(line) - len(line.lstrip(" "))
        if parent is not None:
            dash = _DASH.match(line)
            if dash and offset is None:
                offset = len(dash.group(1)) - parent
            elif not dash and mapping is None and here > parent and _NESTED_KEY.match(line):
                mapping = here - parent
        parent = here if _KEY_LINE.match(line) else None
        if mapping is not None and offset is not None:
            break
    return (mapping or 2), (offset if offset is not None and offset >= 0 else 2)


def _shape_problems(data: dict[str, Any]) -> list[Problem]:
    """What would make the rewrite guess: the v1 keys it reads must have their v1 shape."""
    out: list[Problem] = []
    if data.get("schema") == 2:
        return out
    mapping = "must be a mapping"
    if data.get("infra") is not None and not isinstance(data["infra"], dict):
        out.append(
            Problem(("infra",), f"{mapping} (etcd_nats_dedicated_node, nats_max_payload_mb)")
        )
    if data.get("services") is not None and not isinstance(data["services"], list):
        out.append(Problem(("services",), "must be a list (the migrated entries go into it)"))
    backend = data.get("backend")
    kv = backend.get("mooncake_kv_store") if isinstance(backend, dict) else None
    at = ("backend", "mooncake_kv_store")
    if kv is not None and not isinstance(kv, dict):
        out.append(Problem(at, mapping))
    elif isinstance(kv, dict):
        if kv.get("env") is not None and not isinstance(kv["env"], dict):
            out.append(Problem((*at, "env"), mapping))
        if kv.get("master_extra_args") is not None and not isinstance(
            kv["master_extra_args"], list
        ):
            out.append(Problem((*at, "master_extra_args"), "must be a list of arguments"))
    return out


def migrate_text(text: str, source: str) -> tuple[str, list[str]]:
    """The migrated recipe text and the notes; a RecipeError for text srt cannot read."""
    doc = parse_text(text, source)
    if not isinstance(doc.data, dict):
        raise RecipeError(source, [LocatedProblem("", "a recipe is a mapping of settings")])
    problems = _shape_problems(doc.data)
    if problems:
        raise RecipeError(source, locate(problems, source, doc.data, doc.mark_of))
    from ruamel.yaml.error import YAMLError

    yaml = _round_trip(text)
    kept = ""
    try:
        tree = yaml.load(text)
    except YAMLError as exc:
        # srt's loader (libyaml, YAML 1.1) accepts a few texts that ruamel refuses, such as
        # a tab after a key; the recipe is migrated all the same, from srt's reading of it
        from ruamel.yaml.comments import CommentedMap

        tree = CommentedMap(copy.deepcopy(doc.data))
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        kept = f"comments and layout not kept: ruamel.yaml cannot read this text ({problem})"
    notes = migrate_document(tree, doc.data)
    if kept and notes != [UNCHANGED]:
        notes.append(kept)
    if notes == [UNCHANGED]:
        return text, notes
    if doc.from_json:  # a JSON recipe stays JSON
        return json.dumps(tree, indent=2) + "\n", notes
    out = io.StringIO()
    yaml.dump(tree, out)
    written = out.getvalue()
    # a deleted last key can take the document's final newline with it
    return (written if written.endswith("\n") else written + "\n"), notes


def migrate_file(path: str) -> tuple[str, list[str]]:
    return migrate_text(read_text(path), path)
