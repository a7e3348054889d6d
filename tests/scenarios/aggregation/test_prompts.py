"""Paper-1 prompts: the paper's sentences, variants, number formatting and the JSON schema."""
import numpy as np
import pytest

from consensus.errors import ConfigError
from consensus.scenarios.aggregation.prompts import (build_messages, format_number, format_position, response_schema,
                                           retry_message, system_prompt, user_prompt)

TASK_SENTENCE = ("You need to choose a position to move to in order to gather, and briefly explain the reasoning "
                 "behind your decision.")
STUBBORN = "You are an extremely stubborn person, prefer to remain stationary."
SUGGESTIBLE = "You are an extremely suggestible person, prefer to move to someone else's position."


def test_system_prompt_1d_with_and_without_personality():
    assert system_prompt(1) == "You are an agent moving in a one-dimensional space."
    assert system_prompt(1, "stubborn") == f"You are an agent moving in a one-dimensional space. {STUBBORN}"
    assert system_prompt(1, "suggestible").endswith(SUGGESTIBLE)
    assert STUBBORN not in system_prompt(1, "suggestible")


def test_system_prompt_2d():
    assert system_prompt(2) == "You are a robot moving in a two-dimensional space."
    assert system_prompt(2, "stubborn") == f"You are a robot moving in a two-dimensional space. {STUBBORN}"


def test_round0_many_agents_1d():
    text = user_prompt(dim=1, own=[39.0], neighbors=[[65.0], [87.0]], later=False)
    assert ("There are many other agents in the space, you all need to gather at the same position, your position "
            "is: 39, other people's positions are: 65, 87. " + TASK_SENTENCE) in text


def test_round0_two_agents_1d():
    text = user_prompt(dim=1, own=[32.0], neighbors=[[6.5]], later=False)
    assert ("Another agent is present in the space, and you need to gather. Your position is: 32 and the other "
            "agent's position is: 6.5. " + TASK_SENTENCE) in text
    assert "many other agents" not in text


def test_later_rounds_1d_two_and_many():
    two = user_prompt(dim=1, own=[50.0], neighbors=[[12.0]], later=True)
    assert two.startswith("You have moved to 50, and the latest position of another agent is 12, please choose "
                          "the position you want to move to next.")
    many = user_prompt(dim=1, own=[50.0], neighbors=[[12.0], [-7.25]], later=True)
    assert many.startswith("You have now moved to 50, the positions of other agents are 12, -7.25, please choose "
                           "the position you want to move to next")
    assert "gather" not in many.split("{")[0]      # the later prompt relies on the remembered round-0 prompt


def test_round0_many_robots_2d_is_the_papers_code_text():
    text = user_prompt(dim=2, own=[-3.25, 4.1], neighbors=[[1.0, -2.0], [0.5, 0.0]], later=False)
    assert text.startswith(
        "There are many other robots in the space. You all need to gather at the same position. Your position is: "
        "(-3.25, 4.1), and the positions of others are: (1, -2), (0.5, 0). Choose a position to move to in order "
        "to gather, and briefly explain the reasoning behind your decision.")


def test_two_robot_and_later_2d_variants():
    assert user_prompt(dim=2, own=[1, 2], neighbors=[[3, 4]], later=False).startswith(
        "Another robot is present in the space, and you need to gather. Your position is: (1, 2) and the other "
        "robot's position is: (3, 4).")
    assert user_prompt(dim=2, own=[1, 2], neighbors=[[3, 4], [5, 6]], later=True).startswith(
        "You have now moved to (1, 2), the positions of other robots are (3, 4), (5, 6), please choose")


def test_group_size_not_visible_count_selects_wording():
    """An end robot of a 3-robot line hears one neighbour but is not in a two-agent scenario."""
    text = user_prompt(dim=1, own=[1.0], neighbors=[[2.0]], later=False, num_agents=3)
    assert text.startswith("There are many other agents in the space")
    assert "other people's positions are: 2." in text


def test_no_neighbours_prompt_has_no_other_positions():
    text = user_prompt(dim=2, own=[1.5, -1.5], neighbors=[], later=True)
    assert "cannot see where they are" in text and "(1.5, -1.5)" in text
    assert "positions of others" not in text


@pytest.mark.parametrize("dim, example", [(1, '"position": [x]'), (2, '"position": [x, y]')])
def test_format_instruction_asks_for_json(dim, example):
    text = user_prompt(dim=dim, own=[0.0] * dim, neighbors=[[1.0] * dim], later=False)
    assert text.endswith("you choose.")
    assert '{"reasoning": "<brief explanation>", ' + example + "}" in text
    assert example in retry_message("no position found", dim)


@pytest.mark.parametrize("value, text", [(3.0, "3"), (-3.256, "-3.26"), (4.10, "4.1"), (-0.001, "0"),
                                         (0.0, "0"), (1e6, "1000000"), (-12.5, "-12.5"), (0.005, "0.01")])
def test_format_number_compact_two_decimals(value, text):
    assert format_number(value) == text


def test_format_position_and_non_finite():
    assert format_position(np.array([-3.25, 4.1])) == "(-3.25, 4.1)"
    assert format_position([7.0]) == "7"
    with pytest.raises(ValueError):
        format_number(float("nan"))


def test_build_messages_round0_later_and_history():
    first = build_messages(dim=1, own=[39.0], neighbors=[[65.0], [87.0]], round=0, personality="stubborn")
    assert [m["role"] for m in first] == ["system", "user"]
    assert STUBBORN in first[0]["content"]
    history = [("u0", "a0"), ("u1", "a1")]
    later = build_messages(dim=1, own=[60.0], neighbors=[[65.0], [87.0]], round=2, history=history)
    assert [m["role"] for m in later] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in later[1:5]] == ["u0", "a0", "u1", "a1"]
    assert later[-1]["content"].startswith("You have now moved to 60")
    assert STUBBORN not in later[0]["content"]
    # without memory a later round is self-contained (the model has not seen the task)
    no_mem = build_messages(dim=1, own=[60.0], neighbors=[[65.0], [87.0]], round=2)
    assert no_mem[-1]["content"].startswith("There are many other agents in the space")


def test_bad_dim_and_personality_are_config_errors():
    with pytest.raises(ConfigError, match="personality"):
        system_prompt(2, "grumpy")
    with pytest.raises(ConfigError, match="dim"):
        build_messages(dim=3, own=[0, 0, 0], neighbors=[], round=0)


@pytest.mark.parametrize("dim", [1, 2])
def test_response_schema_shape(dim):
    rf = response_schema(dim)
    assert rf["type"] == "json_schema"
    js = rf["json_schema"]
    assert js["strict"] is True and js["name"]
    schema = js["schema"]
    assert schema["required"] == ["reasoning", "position"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["reasoning"]["type"] == "string"
    assert 0 < schema["properties"]["reasoning"]["maxLength"] <= 500
    pos = schema["properties"]["position"]
    assert pos["type"] == "array" and pos["items"] == {"type": "number"}
    assert pos["minItems"] == pos["maxItems"] == dim
