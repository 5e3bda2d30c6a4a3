"""BFCL API environments: hand-checked semantics, errors as text, state keys, TRL tool extraction."""

import inspect
import json
from pathlib import Path

import pytest
from transformers.utils import get_json_schema

from gear_trl.envs import (
    API_CLASSES,
    FUNCTION_OWNERS,
    BFCLEnvironment,
    GorillaFileSystem,
    MathAPI,
    MessageAPI,
    TicketAPI,
    TwitterAPI,
    environment_class,
    environment_name,
    tool_names,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "bfcl" / "multi_turn_base.jsonl"

FS_CONFIG = {
    "root": {
        "alex": {
            "type": "directory",
            "contents": {
                "notes.txt": {"type": "file", "content": "beta\nalpha\ngamma"},
                ".hidden": {"type": "file", "content": "secret"},
                "docs": {
                    "type": "directory",
                    "contents": {"report.txt": {"type": "file", "content": "line one\nline two"}},
                },
            },
        }
    }
}


def result(text: str):
    """Parse a tool's JSON result (errors are plain text and fail here)."""
    assert not text.startswith("Error"), text
    return json.loads(text)


def trl_tool_names(env_class: type) -> list[str]:
    """The methods TRL 1.16 turns into tools (GRPOTrainer.__init__ and _generate_and_score_completions)."""
    return [
        name
        for name, _ in inspect.getmembers(env_class, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


@pytest.fixture
def fs():
    return GorillaFileSystem(FS_CONFIG)


# ---- GorillaFileSystem -------------------------------------------------------------------------------------------


def test_fs_starts_in_first_top_level_directory(fs):
    assert result(fs.pwd()) == {"current_working_directory": "/alex"}
    assert result(fs.ls()) == {"current_directory_content": ["notes.txt", "docs"]}
    assert result(fs.ls(a=True)) == {"current_directory_content": ["notes.txt", ".hidden", "docs"]}


def test_fs_cd_mkdir_ls_cat(fs):
    assert result(fs.cd(folder="docs")) == {"current_working_directory": "/alex/docs"}
    assert result(fs.cat(file_name="report.txt")) == {"file_content": "line one\nline two"}
    assert result(fs.mkdir(dir_name="sub")) == {}
    assert result(fs.ls()) == {"current_directory_content": ["report.txt", "sub"]}
    assert result(fs.cd(folder="..")) == {"current_working_directory": "/alex"}
    assert fs.mkdir(dir_name="docs").startswith("Error:")


def test_fs_echo_touch(fs):
    assert result(fs.echo(content="hello")) == {"terminal_output": "hello"}
    assert result(fs.touch(file_name="new.txt")) == {}
    assert result(fs.cat(file_name="new.txt")) == {"file_content": ""}
    assert result(fs.echo(content="written", file_name="new.txt")) == {"terminal_output": None}
    assert result(fs.cat(file_name="new.txt")) == {"file_content": "written"}
    assert result(fs.echo(content="replaced", file_name="new.txt")) == {"terminal_output": None}
    assert result(fs.cat(file_name="new.txt")) == {"file_content": "replaced"}
    assert fs.touch(file_name="new.txt").startswith("Error:")  # touch refuses an existing name
    assert fs.echo(content="x", file_name="docs").startswith("Error:")


def test_fs_mv_cp_rm_rmdir(fs):
    result(fs.mv(source="notes.txt", destination="docs"))  # existing directory: move into it
    assert result(fs.ls())["current_directory_content"] == ["docs"]
    result(fs.cd(folder="docs"))
    result(fs.mv(source="notes.txt", destination="renamed.txt"))  # new name: rename
    assert result(fs.ls())["current_directory_content"] == ["report.txt", "renamed.txt"]
    result(fs.mkdir(dir_name="backup"))
    result(fs.cp(source="report.txt", destination="backup"))
    result(fs.cp(source="report.txt", destination="copy.txt"))
    assert result(fs.cat(file_name="copy.txt")) == {"file_content": "line one\nline two"}
    assert fs.mv(source="report.txt", destination="copy.txt").startswith("Error:")  # no silent overwrite
    assert fs.cp(source="report.txt", destination="backup").startswith("Error:")  # already there
    assert fs.rmdir(dir_name="backup").startswith("Error:")  # not empty
    result(fs.cd(folder="backup"))
    result(fs.rm(file_name="report.txt"))
    result(fs.cd(folder=".."))
    result(fs.rmdir(dir_name="backup"))
    assert result(fs.ls())["current_directory_content"] == ["report.txt", "renamed.txt", "copy.txt"]
    assert fs.rm(file_name="missing.txt").startswith("Error:")


def test_fs_read_only_tools(fs):
    assert result(fs.sort(file_name="notes.txt")) == {"sorted_content": "alpha\nbeta\ngamma"}
    assert result(fs.cat(file_name="notes.txt")) == {"file_content": "beta\nalpha\ngamma"}  # sort does not write
    assert result(fs.grep(file_name="notes.txt", pattern="a")) == {"matching_lines": ["beta", "alpha", "gamma"]}
    assert result(fs.grep(file_name="notes.txt", pattern="alp")) == {"matching_lines": ["alpha"]}
    assert result(fs.wc(file_name="notes.txt")) == {"count": 3, "type": "lines"}
    assert result(fs.wc(file_name="notes.txt", mode="w")) == {"count": 3, "type": "words"}
    assert result(fs.wc(file_name="notes.txt", mode="c")) == {"count": 16, "type": "characters"}
    assert result(fs.tail(file_name="notes.txt", lines=2)) == {"last_lines": "alpha\ngamma"}
    assert result(fs.tail(file_name="notes.txt")) == {"last_lines": "beta\nalpha\ngamma"}
    assert result(fs.du()) == {"disk_usage": f"{16 + 6 + 17} bytes"}
    assert result(fs.find(name="e")) == {"matches": ["./notes.txt", "./.hidden", "./docs/report.txt"]}
    assert result(fs.find(path="docs")) == {"matches": ["docs/report.txt"]}
    result(fs.cd(folder="docs"))
    result(fs.echo(content="line one\nline 2\nline three", file_name="b.txt"))
    diff = result(fs.diff(file_name1="report.txt", file_name2="b.txt"))
    assert diff == {"diff_lines": "- line two\n+ line 2\n+ line three"}
    assert result(fs.diff(file_name1="report.txt", file_name2="report.txt")) == {"diff_lines": ""}


def test_fs_bad_paths_are_error_text_not_exceptions(fs):
    before = fs.state_key()
    for text in [
        fs.cd(folder="nowhere"),
        fs.cd(folder="notes.txt"),
        fs.cd(folder="docs/sub"),
        fs.cat(file_name="docs/report.txt"),
        fs.cat(file_name="missing.txt"),
        fs.cat(file_name="docs"),
        fs.find(path="nowhere"),
        fs.wc(file_name="notes.txt", mode="x"),
        fs.tail(file_name="notes.txt", lines=-1),
        fs.cd(wrong_argument="docs"),
        fs.cd(),
        fs.echo(content=123, file_name="a.txt"),
    ]:
        assert isinstance(text, str) and text.startswith("Error: "), text
    assert fs.state_key() == before


# ---- MathAPI -----------------------------------------------------------------------------------------------------


def test_math_functions():
    m = MathAPI()
    assert result(m.add(a=2, b=3.5)) == {"result": 5.5}
    assert result(m.subtract(a=2, b=3)) == {"result": -1.0}
    assert result(m.multiply(a=4, b=2.5)) == {"result": 10.0}
    assert result(m.divide(a=1, b=4)) == {"result": 0.25}
    assert result(m.absolute_value(number=-3)) == {"result": 3.0}
    assert result(m.power(base=2, exponent=10)) == {"result": 1024.0}
    assert result(m.mean(numbers=[3, 16, 60]))["result"] == pytest.approx(79 / 3)
    assert result(m.standard_deviation(numbers=[2, 4, 4, 4, 5, 5, 7, 9])) == {"result": 2.0}
    assert result(m.max_value(numbers=[1, 7, 3])) == {"result": 7.0}
    assert result(m.min_value(numbers=[1, 7, 3])) == {"result": 1.0}
    assert result(m.sum_values(numbers=[0.1, 0.2, 0.3]))["result"] == pytest.approx(0.6)
    assert result(m.percentage(part=1, whole=4)) == {"result": 25.0}
    assert result(m.round_number(number=3.14159, decimal_places=2)) == {"result": 3.14}
    assert result(m.logarithm(value=36, base=6, precision=4)) == {"result": 2.0}
    assert result(m.logarithm(value=20, base=10, precision=2)) == {"result": 1.3}
    assert result(m.square_root(number=16, precision=5)) == {"result": 4.0}
    assert result(m.si_unit_conversion(value=1.5, unit_in="km", unit_out="m")) == {"result": 1500.0}
    assert result(m.imperial_si_conversion(value=1, unit_in="ft", unit_out="m"))["result"] == pytest.approx(0.3048)
    assert result(m.imperial_si_conversion(value=100, unit_in="celsius", unit_out="fahrenheit"))[
        "result"
    ] == pytest.approx(212.0)
    assert m.state() == {}


@pytest.mark.parametrize(
    "call",
    [
        {"name": "divide", "arguments": {"a": 1, "b": 0}},
        {"name": "mean", "arguments": {"numbers": []}},
        {"name": "mean", "arguments": {"numbers": "1,2"}},
        {"name": "add", "arguments": {"a": "two", "b": 1}},
        {"name": "power", "arguments": {"base": 10, "exponent": 1e9}},
        {"name": "square_root", "arguments": {"number": -1, "precision": 3}},
        {"name": "square_root", "arguments": {"number": 2, "precision": 10**9}},
        {"name": "logarithm", "arguments": {"value": 0, "base": 10, "precision": 3}},
        {"name": "si_unit_conversion", "arguments": {"value": 1, "unit_in": "ft", "unit_out": "m"}},
        {"name": "imperial_si_conversion", "arguments": {"value": 1, "unit_in": "ft", "unit_out": "kg"}},
        {"name": "no_such_function", "arguments": {}},
        {"name": "add", "arguments": "{not json"},
        "garbage",
    ],
)
def test_math_errors_are_text(call):
    assert MathAPI().execute(call).startswith("Error: ")


# ---- TwitterAPI, MessageAPI, TicketAPI ---------------------------------------------------------------------------


def test_twitter_auth_post_comment_follow():
    t = TwitterAPI({"username": "ann", "password": "pw", "tweet_counter": 5})
    assert t.post_tweet(content="hi").startswith("Error:")  # not authenticated
    assert result(t.authenticate_twitter(username="ann", password="wrong")) == {"authentication_status": False}
    assert result(t.authenticate_twitter(username="ann", password="pw")) == {"authentication_status": True}
    tweet = result(t.post_tweet(content="hi", tags=["#a"]))
    assert tweet == {"id": 5, "username": "ann", "content": "hi", "tags": ["#a"], "mentions": []}
    assert result(t.comment(tweet_id=5, comment_content="nice")) == {"comment_status": "Comment added successfully"}
    assert result(t.get_tweet_comments(tweet_id=5)) == {"comments": [{"username": "ann", "content": "nice"}]}
    assert t.comment(tweet_id=99, comment_content="x").startswith("Error:")
    assert result(t.follow_user(username_to_follow="bob")) == {"follow_status": False}  # default following list
    assert result(t.follow_user(username_to_follow="cy")) == {"follow_status": True}
    assert result(t.unfollow_user(username_to_unfollow="alice")) == {"unfollow_status": True}
    assert result(t.list_all_following()) == {"following_list": ["bob", "cy"]}
    assert result(t.retweet(tweet_id=5)) == {"retweet_status": "Successfully retweeted"}
    assert result(t.retweet(tweet_id=5)) == {"retweet_status": "Already retweeted"}
    assert result(t.get_user_stats(username="ann")) == {"tweet_count": 1, "following_count": 2, "retweet_count": 1}
    assert t.state()["tweet_counter"] == 6


def test_message_login_contact_send_delete():
    m = MessageAPI()  # BFCL's default scenario: Alice..Daniel = USR001..USR004, nobody logged in
    assert m.send_message(receiver_id="USR002", message="hi").startswith("Error:")
    assert result(m.message_login(user_id="USR001"))["login_status"] is True
    assert result(m.get_user_id(user="Bob")) == {"user_id": "USR002"}
    assert result(m.add_contact(user_name="John Levy"))["user_id"] == "USR005"
    assert result(m.send_message(receiver_id="USR005", message="Latest numbers"))["sent_status"] is True
    assert m.send_message(receiver_id="USR999", message="x").startswith("Error:")
    sent = result(m.view_messages_sent())["messages"]
    assert sent["USR005"] == ["Latest numbers"]
    assert result(m.search_messages(keyword="latest")) == {
        "results": [{"receiver_id": "USR005", "message": "Latest numbers"}]
    }
    assert result(m.delete_message(receiver_id="USR005"))["deleted_status"] is True
    assert "USR005" not in result(m.view_messages_sent())["messages"]
    assert result(m.delete_message(receiver_id="USR005"))["deleted_status"] is False


def test_ticket_create_edit_resolve_close():
    t = TicketAPI({"ticket_queue": [{"id": 3, "title": "old", "status": "Open", "priority": 2}]})
    assert t.create_ticket(title="x").startswith("Error:")  # not logged in
    assert result(t.ticket_login(username="sam", password="pw")) == {"success": True}
    ticket = result(t.create_ticket(title="outage", description="down", priority=4))
    assert ticket == {
        "id": 1, "title": "outage", "description": "down", "status": "Open", "priority": 4, "created_by": "sam",
    }  # fmt: skip
    assert t.create_ticket(title="bad", priority=9).startswith("Error:")
    assert t.edit_ticket(ticket_id=3, updates={"owner": "me"}).startswith("Error:")
    result(t.edit_ticket(ticket_id=3, updates={"priority": 5}))
    assert result(t.get_ticket(ticket_id=3))["priority"] == 5
    result(t.resolve_ticket(ticket_id=3, resolution="fixed"))
    assert result(t.get_ticket(ticket_id=3))["status"] == "Resolved"
    result(t.close_ticket(ticket_id=1))
    assert t.close_ticket(ticket_id=1).startswith("Error:")
    assert [x["id"] for x in result(t.get_user_tickets())] == [1]
    assert result(t.logout()) == {"success": True}
    assert t.get_ticket(ticket_id=404).startswith("Error:")


# ---- state: keys, serialization, reset ---------------------------------------------------------------------------


def test_state_key_tracks_state(fs):
    other = GorillaFileSystem(FS_CONFIG)
    assert fs.state_key() == other.state_key()
    key = fs.state_key()
    result(fs.mkdir(dir_name="tmp"))
    assert fs.state_key() != key
    result(fs.rmdir(dir_name="tmp"))
    assert fs.state_key() == key
    result(fs.cd(folder="docs"))  # the working directory is part of the anchor state
    assert fs.state_key() != key
    assert json.loads(fs.state_key()) == fs.state()


def test_state_round_trip_and_reset(fs):
    result(fs.cd(folder="docs"))
    result(fs.touch(file_name="t.txt"))
    copy = GorillaFileSystem(fs.state())
    assert copy.state() == fs.state() and copy.state_key() == fs.state_key()
    fs.reset(initial_config=json.dumps({"GorillaFileSystem": FS_CONFIG}))
    assert fs.state() == GorillaFileSystem(FS_CONFIG).state()


def test_bfcl_environment_reset_restores_initial_config():
    row = json.loads(DATA.read_text().splitlines()[0])
    env = BFCLEnvironment()
    assert env.reset(**row) is None
    initial = env.state()
    assert initial == json.loads(row["initial_config"])
    for call in json.loads(row["ground_truth"]):
        env.execute(call)
    assert env.state() != initial
    env.reset(**row)
    assert env.state() == initial and env.state_key() == BFCLEnvironment.from_config(row["initial_config"]).state_key()


def test_bfcl_environment_routes_and_refuses():
    config = {"GorillaFileSystem": FS_CONFIG}
    env = BFCLEnvironment.from_config(json.dumps(config), json.dumps(["GorillaFileSystem", "MathAPI"]))
    assert env.involved_classes == ["GorillaFileSystem", "MathAPI"]
    assert result(env.ls()) == {"current_directory_content": ["notes.txt", "docs"]}
    assert result(env.add(a=1, b=2)) == {"result": 3.0}
    assert env.post_tweet(content="x") == (
        "Error: post_tweet belongs to TwitterAPI, which is not available in this task."
    )
    assert env.execute({"name": "nope", "arguments": {}}).startswith("Error:")
    assert env.execute(None).startswith("Error:")
    # A row's `tools` column limits the functions (BFCL's `excluded_function`).
    tools = json.dumps([{"type": "function", "function": {"name": "ls"}}])
    env.reset(initial_config=json.dumps(config), involved_classes='["GorillaFileSystem"]', tools=tools)
    assert env.cp(source="notes.txt", destination="n2.txt") == "Error: cp is not available in this task."
    assert env.ls().startswith("{")
    fresh = BFCLEnvironment()  # before any reset, every tool answers with an error text
    assert fresh.ls().startswith("Error:")


# ---- TRL compatibility -------------------------------------------------------------------------------------------


ENV_CLASSES = [*API_CLASSES.values(), BFCLEnvironment]


@pytest.mark.parametrize("env_class", ENV_CLASSES, ids=lambda c: c.__name__)
def test_trl_tool_extraction(env_class):
    names = trl_tool_names(env_class)
    assert names and callable(env_class.reset)
    for plumbing in ("state", "state_key", "load_state", "execute", "scored_state"):
        assert plumbing not in names and callable(getattr(env_class(), plumbing))
    env = env_class()
    for name in names:
        schema = get_json_schema(getattr(env, name))  # what TRL renders into the prompt
        assert schema["function"]["name"] == name
        assert schema["function"]["description"]
        for prop in schema["function"]["parameters"].get("properties", {}).values():
            assert prop.get("description")


def test_bfcl_environment_has_every_function_once():
    assert sorted(trl_tool_names(BFCLEnvironment)) == sorted(FUNCTION_OWNERS)
    assert len(FUNCTION_OWNERS) == sum(len(tool_names(cls)) for cls in API_CLASSES.values())


def test_environment_class_exposes_only_its_classes_tools():
    name = environment_name('["MathAPI", "GorillaFileSystem"]')
    assert name == "GorillaFileSystem+MathAPI"
    cls = environment_class(name)
    assert issubclass(cls, BFCLEnvironment) and environment_class(name) is cls
    expected = tool_names(GorillaFileSystem) + tool_names(MathAPI)
    assert sorted(trl_tool_names(cls)) == sorted(expected)
    env = cls()
    env.reset(initial_config=json.dumps({"GorillaFileSystem": FS_CONFIG}), involved_classes=name.split("+"))
    assert result(env.ls())["current_directory_content"] == ["notes.txt", "docs"]
    assert result(env.execute({"name": "add", "arguments": {"a": 1, "b": 1}})) == {"result": 2.0}
    with pytest.raises(ValueError):
        environment_class("NoSuchAPI")


def test_tool_signatures_match_bfcl_docs():
    """Our tools take the parameters BFCL's function docs declare (the committed rows' `tools`), same required set."""
    seen = {}
    for line in DATA.read_text().splitlines():
        for tool in json.loads(json.loads(line)["tools"]):
            seen[tool["function"]["name"]] = tool["function"]["parameters"]
    env = BFCLEnvironment()
    for name, parameters in seen.items():
        ours = get_json_schema(getattr(env, name))["function"]["parameters"]
        assert list(ours.get("properties", {})) == list(parameters.get("properties", {})), name
        assert sorted(ours.get("required", [])) == sorted(parameters.get("required", [])), name
