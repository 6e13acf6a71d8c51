"""CustomerService: store policy, goal databases, a scripted correct assistant per task,
refused actions, turn order, the single-agent view, fuzzing and the checkers."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgym
from xpgym.core.checks import check_env, check_multiagent_env
from xpgym.core.resources import AcquireTimeoutError
from xpgym.envs.multiagent.customer_service import (
    STOP_TOKEN,
    CustomerServiceAssistantEnv,
    CustomerServiceEnv,
)
from xpgym.envs.multiagent.retail import (
    POLICY,
    TOOL_SCHEMAS,
    RetailStore,
    load_retail_db,
    load_retail_tasks,
    retail_store_pool,
)
from xpgym.envs.multiagent.rock_paper_scissors import RockPaperScissorsEnv
from xpgym.envs.multiagent.single_agent import SingleAgentView
from xpgym.envs.multiagent.tic_tac_toe import TicTacToeEnv

MIA = "mia.lopez@example.com"
NOAH = "noah.kim@example.com"


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def logged_in(email: str = MIA) -> RetailStore:
    store = RetailStore(load_retail_db())
    assert store.call("find_user_id_by_email", {"email": email}).status == "ok"
    return store


# A correct assistant for each task, written by hand from the task's user messages: one
# action per assistant turn (a message, after which the scripted user speaks, or a call).
SOLUTIONS: dict[str, list[str]] = {
    "cancel_pending_order": [
        "I can help with that. What is the email address of your account?",
        call("find_user_id_by_email", email=MIA),
        "Thanks, Mia. Which order would you like to cancel, and why?",
        call("get_order_details", order_id="#W1001"),
        "Order #W1001 (desk lamp) is pending. Shall I cancel it as 'no longer needed'?",
        call("cancel_pending_order", order_id="#W1001", reason="no longer needed"),
        "Order #W1001 is cancelled.",
    ],
    "refuse_cancel_delivered_order": [
        "Sure. Please tell me your full name and zip code.",
        call("find_user_id_by_name_zip", first_name="Noah", last_name="Kim", zip="10001"),
        "Thanks. Which order is it?",
        call("get_order_details", order_id="#W2001"),
        "Order #W2001 was already delivered, so it cannot be cancelled; you could return it.",
    ],
    "return_one_item": [
        "Of course. What are your name and zip code?",
        call("find_user_id_by_name_zip", first_name="Ava", last_name="Singh", zip="60601"),
        "Thank you. What would you like to return, from which order?",
        call("get_order_details", order_id="#W3003"),
        "Shall I request the return of the wireless headphones (item 100302) of #W3003?",
        call("return_delivered_order_items", order_id="#W3003", item_ids=["100302"]),
        "The return is requested.",
    ],
    "exchange_shoe_size": [
        "Sure. What is your email address?",
        call("find_user_id_by_email", email="liam.brown@example.com"),
        "Which order, and what would you like instead?",
        call("get_order_details", order_id="#W4001"),
        call("get_product_details", product_id="1004"),
        "Size 11 in grey (item 100403) is available. Shall I exchange your size 10 for it?",
        call(
            "exchange_delivered_order_items",
            order_id="#W4001",
            item_ids=["100402"],
            new_item_ids=["100403"],
        ),
        "The exchange is requested.",
    ],
    "refuse_exchange_for_other_product": [
        "Let me check. What is your email address?",
        call("find_user_id_by_email", email=MIA),
        "Which order is it?",
        call("get_order_details", order_id="#W1002"),
        "Sorry, an item can only be exchanged for another variant of the same product.",
    ],
    "refuse_other_users_order": [
        "I can look into it. What is your email address?",
        call("find_user_id_by_email", email="ava.singh@example.com"),
        "Which order is it?",
        call("get_user_details", user_id="ava_singh_4096"),
        "Order #W1001 is not one of your orders, so I cannot change it; Mia must contact us.",
    ],
    "order_status_and_total": [
        "Happy to check. What is your email address?",
        call("find_user_id_by_email", email=NOAH),
        call("get_order_details", order_id="#W2002"),
        "Order #W2002 is processed (not shipped yet); you paid 91.99 in total.",
    ],
    "exchange_after_unavailable_variant": [
        "Sure. What is your email address?",
        call("find_user_id_by_email", email=MIA),
        "What would you like instead?",
        call("get_order_details", order_id="#W1002"),
        call("get_product_details", product_id="1001"),
        "I'm sorry, the red T-shirt in size L is not available.",
        "Shall I exchange your blue M T-shirt (100101) for the red M one (100103)?",
        call(
            "exchange_delivered_order_items",
            order_id="#W1002",
            item_ids=["100101"],
            new_item_ids=["100103"],
        ),
        "The exchange is requested.",
    ],
    "refuse_return_before_delivery": [
        "Let me check. What is your email address?",
        call("find_user_id_by_email", email=NOAH),
        "Which order is it?",
        call("get_order_details", order_id="#W2002"),
        "Order #W2002 is processed but not delivered yet, so it cannot be returned yet.",
    ],
    "product_question": [
        call("search_products", query="lamp"),
        call("get_product_details", product_id="1005"),
        "Yes: our Desk Lamp comes in black (item 100502).",
        "The black desk lamp costs $32.00.",
    ],
}


def play(env: CustomerServiceAssistantEnv, task_id: str, actions: list[str]) -> tuple:
    """Reset `env` on `task_id`, play `actions`; return (rewards, last step's result)."""
    env.reset(seed=0, options={"task_id": task_id})
    rewards, result = [], None
    for action in actions:
        result = env.step(action)
        rewards.append(result[1])
        if result[2] or result[3]:
            break
    return rewards, result


# --------------------------------------------------------------------- store and policy


def test_tasks_are_enough_and_include_refusals():
    tasks = load_retail_tasks()
    assert len(tasks) >= 6
    assert set(SOLUTIONS) == set(tasks)
    unchanged = [t.id for t in tasks.values() if t.goal_db == load_retail_db()]
    assert len(unchanged) >= 4  # the refusals and the two questions
    assert all(STOP_TOKEN in t.user_messages[-1] for t in tasks.values())


def test_goal_databases_hold_exactly_the_requested_changes():
    initial = load_retail_db()
    tasks = load_retail_tasks()
    expected = {
        "cancel_pending_order": (
            "#W1001",
            {"status": "cancelled", "cancel_reason": "no longer needed"},
        ),
        "return_one_item": (
            "#W3003",
            {"status": "return requested", "return_items": ["100302"]},
        ),
        "exchange_shoe_size": (
            "#W4001",
            {
                "status": "exchange requested",
                "exchange_items": ["100402"],
                "exchange_new_items": ["100403"],
            },
        ),
    }
    for task_id, (order_id, change) in expected.items():
        goal = json.loads(json.dumps(tasks[task_id].goal_db))
        assert goal["orders"][order_id] == {**initial["orders"][order_id], **change}
        goal["orders"][order_id] = initial["orders"][order_id]
        assert goal == initial, task_id


@pytest.mark.parametrize(
    ("email", "name", "arguments", "message"),
    [
        (None, "get_order_details", {"order_id": "#W1001"}, "authenticate the user first"),
        (
            None,
            "cancel_pending_order",
            {"order_id": "#W1001", "reason": "no longer needed"},
            "authenticate",
        ),
        (MIA, "get_user_details", {"user_id": "noah_kim_2048"}, "not the authenticated user"),
        (MIA, "get_order_details", {"order_id": "#W2001"}, "does not belong to the authenticated"),
        (
            NOAH,
            "cancel_pending_order",
            {"order_id": "#W2001", "reason": "no longer needed"},
            "only pending orders can be cancelled; order #W2001 is delivered",
        ),
        (
            NOAH,
            "return_delivered_order_items",
            {"order_id": "#W2002", "item_ids": ["100401"]},
            "only delivered orders can be returned; order #W2002 is processed",
        ),
        (
            MIA,
            "exchange_delivered_order_items",
            {"order_id": "#W1002", "item_ids": ["100201"], "new_item_ids": ["100301"]},
            "not a variant of Water Bottle",
        ),
        (
            MIA,
            "exchange_delivered_order_items",
            {"order_id": "#W1002", "item_ids": ["100101"], "new_item_ids": ["100104"]},
            "item 100104 is not available",
        ),
    ],
)
def test_policy_violations_are_refused_and_change_nothing(email, name, arguments, message):
    store = RetailStore(load_retail_db()) if email is None else logged_in(email)
    outcome = store.call(name, arguments)
    assert outcome.status == "refused"
    assert outcome.text.startswith("Refused by policy: ")
    assert message in outcome.text
    assert store.db == load_retail_db()


@pytest.mark.parametrize(
    ("name", "arguments", "status", "message"),
    [
        ("find_user_id_by_email", {"email": "nobody@example.com"}, "error", "no user found"),
        ("get_order_details", {"order_id": "#W9999"}, "error", "not found"),
        ("get_product_details", {"product_id": "42"}, "error", "not found"),
        (
            "return_delivered_order_items",
            {"order_id": "#W1002", "item_ids": ["100302"]},
            "error",
            "not in order #W1002",
        ),
        ("return_delivered_order_items", {"order_id": "#W1002", "item_ids": []}, "error", "empty"),
        (
            "exchange_delivered_order_items",
            {"order_id": "#W1002", "item_ids": ["100101"], "new_item_ids": []},
            "error",
            "same length",
        ),
        (
            "exchange_delivered_order_items",
            {"order_id": "#W1002", "item_ids": ["100101"], "new_item_ids": ["100101"]},
            "error",
            "for itself",
        ),
        ("refund", {}, "invalid", "unknown tool 'refund'"),
        ("get_order_details", {}, "invalid", "missing required argument 'order_id'"),
        ("get_order_details", {"order_id": 1001}, "invalid", "expected string"),
        ("search_products", {"query": "x", "limit": 3}, "invalid", "unexpected argument 'limit'"),
        (
            "cancel_pending_order",
            {"order_id": "#W1001", "reason": "found it cheaper"},
            "invalid",
            "must be one of",
        ),
    ],
)
def test_bad_calls_are_errors_or_invalid_and_change_nothing(name, arguments, status, message):
    store = logged_in()
    outcome = store.call(name, arguments)
    assert outcome.status == status
    assert outcome.text.startswith("Error: ")
    assert message in outcome.text
    assert store.db == load_retail_db()


def test_lookups_return_json_and_search_needs_no_login():
    store = RetailStore(load_retail_db())
    found = json.loads(store.call("search_products", {"query": "SHOES"}).text)
    assert found == [{"product_id": "1004", "name": "Running Shoes"}]
    assert len(json.loads(store.call("search_products", {"query": ""}).text)) == 5
    order = json.loads(logged_in(NOAH).call("get_order_details", {"order_id": "#W2002"}).text)
    assert order["status"] == "processed"
    assert sum(item["price"] for item in order["items"]) == pytest.approx(91.99)


def test_an_order_changes_only_once():
    store = logged_in(NOAH)
    ok = store.call("return_delivered_order_items", {"order_id": "#W2001", "item_ids": ["100301"]})
    assert ok.status == "ok"
    again = store.call(
        "exchange_delivered_order_items",
        {"order_id": "#W2001", "item_ids": ["100301"], "new_item_ids": ["100302"]},
    )
    assert again.status == "refused"
    assert "order #W2001 is return requested" in again.text


# --------------------------------------------------------------------- episodes


@pytest.mark.parametrize("task_id", sorted(SOLUTIONS))
def test_scripted_correct_assistant_solves_every_task(task_id):
    env = CustomerServiceAssistantEnv(task_ids=[task_id])
    rewards, (obs, reward, terminated, truncated, info) = play(env, task_id, SOLUTIONS[task_id])
    assert len(rewards) == len(SOLUTIONS[task_id])
    assert rewards[:-1] == [0.0] * (len(rewards) - 1)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["correct"] is True
    assert (info["db_match"], info["outputs_found"], info["policy_violations"]) == (True, True, 0)
    assert STOP_TOKEN in obs
    assert env.env.store.db == load_retail_tasks()[task_id].goal_db


def test_each_episode_leases_a_store_that_is_restocked_when_given_back():
    pool = retail_store_pool(1)
    env = CustomerServiceAssistantEnv(store_pool=pool)
    task_id = "cancel_pending_order"
    play(env, task_id, SOLUTIONS[task_id])
    store = env.env.store
    assert store.db == load_retail_tasks()[task_id].goal_db  # kept after the episode's end
    assert pool.metrics()["in_use"] == 1
    env.reset(seed=0, options={"task_id": task_id})
    assert env.env.store is store  # the same store, given back and leased again
    assert store.db == load_retail_db()
    assert store.user_id is None
    assert (pool.metrics()["acquired"], pool.metrics()["created"]) == (2, 1)
    env.close()
    env.close()
    assert pool.metrics()["in_use"] == 0
    assert not pool.closed  # a shared pool stays open


def test_envs_sharing_a_pool_wait_for_its_stores():
    pool = retail_store_pool(1, acquire_timeout_s=0.01)
    first, second = (
        CustomerServiceAssistantEnv(store_pool=pool),
        CustomerServiceAssistantEnv(store_pool=pool),
    )
    first.reset(seed=0)
    with pytest.raises(AcquireTimeoutError):
        second.reset(seed=0)
    first.close()
    second.reset(seed=0)
    assert second.env.store.db == load_retail_db()


def test_the_private_pool_closes_with_the_env():
    env = CustomerServiceAssistantEnv()
    env.reset(seed=0)
    env.close()
    assert env.env.store_pool.closed


def test_attempting_a_refused_action_fails_even_if_the_database_is_right():
    env = CustomerServiceAssistantEnv()
    actions = list(SOLUTIONS["refuse_cancel_delivered_order"])
    actions.insert(4, call("cancel_pending_order", order_id="#W2001", reason="no longer needed"))
    env.reset(seed=0, options={"task_id": "refuse_cancel_delivered_order"})
    results = [env.step(a) for a in actions]
    obs, reward, _, _, info = results[4]
    assert "Refused by policy: only pending orders can be cancelled" in obs
    assert (reward, info["policy_violation"], info["invalid_action"]) == (0.0, True, False)
    _, reward, terminated, _, info = results[-1]
    assert (reward, terminated, info["correct"]) == (0.0, True, False)
    assert (info["db_match"], info["policy_violations"]) == (True, 1)


def test_wrong_change_fails_on_the_database():
    actions = list(SOLUTIONS["cancel_pending_order"])
    actions[5] = call("cancel_pending_order", order_id="#W1001", reason="ordered by mistake")
    _, (_, reward, terminated, _, info) = play(
        CustomerServiceAssistantEnv(), "cancel_pending_order", actions
    )
    assert (reward, terminated, info["db_match"], info["policy_violations"]) == (
        0.0,
        True,
        False,
        0,
    )


def test_required_output_missing_fails():
    actions = list(SOLUTIONS["order_status_and_total"])
    actions[-1] = "Your order #W2002 is processed."
    _, (_, reward, _, _, info) = play(
        CustomerServiceAssistantEnv(), "order_status_and_total", actions
    )
    assert (reward, info["db_match"], info["outputs_found"]) == (0.0, True, False)


def test_doing_nothing_solves_only_refusals_without_required_outputs():
    env = CustomerServiceAssistantEnv()
    for task_id, task in load_retail_tasks().items():
        env.reset(seed=0, options={"task_id": task_id})
        terminated = truncated = False
        while not (terminated or truncated):
            _, reward, terminated, truncated, _ = env.step("Okay.")
        assert terminated
        assert reward == (1.0 if task.goal_db == load_retail_db() and not task.outputs else 0.0)


def test_malformed_tool_calls_are_invalid_and_keep_the_turn():
    env = CustomerServiceEnv(task_ids=["cancel_pending_order"])
    env.reset(seed=0)
    env.step({"user": env.scripted_user_message()})
    for text, error in [
        ("<tool_call>{not json}</tool_call>", "invalid JSON"),
        ('<tool_call>{"name": "wipe_db"}</tool_call>', "unknown tool"),
        (call("get_order_details"), "missing required argument"),
    ]:
        obs, rewards, terms, truncs, infos = env.step({"assistant": text})
        assert terms == truncs == {"user": False, "assistant": False}
        assert infos["assistant"]["invalid_action"] is True
        assert infos["assistant"]["policy_violation"] is False
        assert error in obs["assistant"]
        assert obs["assistant"].startswith("Tool result: Error: ")
        assert env.agent_selector.active_agents() == ["assistant"]
        assert rewards == {"user": 0.0, "assistant": 0.0}


def test_turns_inboxes_and_what_each_agent_sees():
    env = CustomerServiceEnv(task_ids=["order_status_and_total"])
    observations, infos = env.reset(seed=0)
    assert env.agent_selector.active_agents() == ["user"]
    assert "how much you paid" in observations["user"]
    assert STOP_TOKEN in observations["user"]
    assert observations["assistant"].startswith(POLICY)
    assert all(s["function"]["name"] in observations["assistant"] for s in TOOL_SCHEMAS)
    assert infos["assistant"]["tools"] == TOOL_SCHEMAS
    assert infos["user"] == {"task_id": "order_status_and_total"}

    obs, *_ = env.step({"user": "Hi, status of #W2002?"})
    assert obs["assistant"].endswith("User: Hi, status of #W2002?")
    assert obs["user"] == ""
    assert env.agent_selector.active_agents() == ["assistant"]
    obs, *_ = env.step({"assistant": call("find_user_id_by_email", email=NOAH)})
    assert obs["assistant"] == "Tool result: noah_kim_2048"  # the prompt is no longer pending
    assert obs["user"] == ""  # tool traffic is invisible to the user
    assert env.agent_selector.active_agents() == ["assistant"]
    obs, _, _, _, infos = env.step({"assistant": "  You are logged in.  "})
    assert obs == {"user": "Assistant: You are logged in.", "assistant": ""}
    assert infos["assistant"]["tool_calls"] == []
    assert env.agent_selector.active_agents() == ["user"]
    obs, rewards, terms, truncs, infos = env.step({"user": f"bye {STOP_TOKEN}"})
    assert terms == {"user": True, "assistant": True}
    assert truncs == {"user": False, "assistant": False}
    assert rewards == {"user": 0.0, "assistant": 0.0}  # the question was not answered
    assert infos["user"] == {"stop": True, "step": 4}
    assert infos["assistant"]["outputs_found"] is False
    assert obs["assistant"].endswith("[The user ended the conversation.]")
    assert env.agents == []
    assert env.messages == [
        ("user", "Hi, status of #W2002?"),
        ("tool_call", call("find_user_id_by_email", email=NOAH)),
        ("tool_result", "noah_kim_2048"),
        ("assistant", "You are logged in."),
        ("user", f"bye {STOP_TOKEN}"),
    ]


def test_step_limit_truncates_both_agents_and_grades_the_database():
    env = CustomerServiceEnv(task_ids=["refuse_return_before_delivery"], max_steps=3)
    env.reset(seed=0)
    env.step({"user": "hello"})
    env.step({"assistant": "hi"})
    obs, rewards, terms, truncs, infos = env.step({"user": "still there?"})
    assert infos["assistant"]["correct"] is True
    assert truncs == {"user": True, "assistant": True}
    assert terms == {"user": False, "assistant": False}
    assert rewards == {"user": 0.0, "assistant": 1.0}  # a refusal task: nothing to change
    assert "step limit" in obs["user"]


def test_scripted_user_says_its_messages_in_order_then_stops():
    env = CustomerServiceEnv(task_ids=["product_question"])
    env.reset(seed=0)
    said = []
    while env.agents:
        agent = env.agent_selector.selected_agent
        action = env.sample_random_action("user") if agent == "user" else "Hm."
        if agent == "user":
            said.append(action)
        env.step({agent: action})
    assert said == list(load_retail_tasks()["product_question"].user_messages)
    env.user_turns = 10
    assert env.scripted_user_message() == STOP_TOKEN


def test_a_user_policy_plays_the_user():
    seen = []

    def user(observation: str) -> str:
        seen.append(observation)
        return "Cancel order #W3001 please." if len(seen) == 1 else f"Fine. {STOP_TOKEN}"

    env = CustomerServiceAssistantEnv(task_ids=["refuse_other_users_order"], user_policy=user)
    obs, info = env.reset(seed=0)
    assert "Your friend Mia asked you" in seen[0]
    assert obs.endswith("User: Cancel order #W3001 please.")
    _, reward, terminated, _, info = env.step("No, sorry.")
    assert seen[1] == "Assistant: No, sorry."
    assert (reward, terminated, info["correct"]) == (1.0, True, True)


# --------------------------------------------------------------------- fuzz and contracts


_FUZZ_ENV = CustomerServiceAssistantEnv()
_FUZZ_ENV.reset(seed=0, options={"task_id": "cancel_pending_order"})
_FUZZ_START = _FUZZ_ENV.get_state()
_TOOL_NAMES = [s["function"]["name"] for s in TOOL_SCHEMAS]


@settings(max_examples=200, deadline=None)
@given(
    st.text()
    | st.builds(lambda s: f"<tool_call>{s}</tool_call>", st.text())
    | st.builds(
        lambda name, arguments: call(name, **arguments),
        st.sampled_from(_TOOL_NAMES),
        st.dictionaries(
            st.sampled_from(["order_id", "email", "item_ids", "reason", "zip", "x"]),
            st.text(max_size=8) | st.lists(st.text(max_size=6), max_size=2) | st.integers(),
            max_size=3,
        ),
    )
)
def test_any_assistant_text_is_a_valid_step(action):
    env = _FUZZ_ENV
    env.set_state(_FUZZ_START)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str)
    assert reward == 0.0
    assert (terminated, truncated) == (False, False)
    assert type(info["invalid_action"]) is bool
    assert type(info["policy_violation"]) is bool
    assert info["policy_violation"] is False or "Refused by policy" in obs


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_any_user_text_is_a_valid_step(text):
    env = CustomerServiceEnv(task_ids=["product_question"])
    env.reset(seed=0)
    obs, rewards, terms, truncs, infos = env.step({"user": text})
    stopped = STOP_TOKEN in text
    assert infos["user"]["stop"] is stopped
    assert terms == {"user": stopped, "assistant": stopped}
    assert truncs == {"user": False, "assistant": False}
    assert rewards["user"] == 0.0
    assert f"User: {text}" in obs["assistant"]


def test_check_multiagent_env_passes():
    check_multiagent_env(xpgym.make("multiagent:CustomerService-v0"), num_episodes=5)


def test_check_env_passes_on_the_assistant_view():
    check_env(xpgym.make("agent:CustomerService-v0"), num_episodes=5)


def test_seed_draws_the_task_and_options_pick_one():
    env = CustomerServiceAssistantEnv()
    drawn = [env.reset(seed=s)[1]["task_id"] for s in range(40)]
    assert drawn == [env.reset(seed=s)[1]["task_id"] for s in range(40)]
    assert len(set(drawn)) >= 8
    assert env.reset(seed=1, options={"task_id": "product_question"})[1]["task_id"] == (
        "product_question"
    )
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": "nope"})


def test_set_state_round_trip():
    env = CustomerServiceAssistantEnv()
    env.reset(seed=0, options={"task_id": "exchange_shoe_size"})
    solution = SOLUTIONS["exchange_shoe_size"]
    for action in solution[:4]:
        env.step(action)
    snapshot = env.get_state()
    frozen = pickle.dumps(snapshot)
    first = [env.step(action) for action in solution[4:]]
    other = CustomerServiceAssistantEnv()
    other.set_state(snapshot)
    assert [other.step(action) for action in solution[4:]] == first
    assert first[-1][1] == 1.0
    assert pickle.dumps(snapshot) == frozen


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"task_ids": ["nope"]}, ValueError),
        ({"task_ids": []}, ValueError),
        ({"max_steps": 1}, ValueError),
        ({"max_steps": 2.5}, TypeError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        CustomerServiceEnv(**kwargs)


# --------------------------------------------------------------------- SingleAgentView


def test_view_plays_the_other_agent_before_returning():
    env = SingleAgentView(TicTacToeEnv(), "o")
    obs, _ = env.reset(seed=0)
    assert "To move: 'o' (your turn)." in obs
    assert env.env.board.count("x") == 1  # x (random) has moved
    check_env(env)


def test_view_folds_the_others_rewards_into_the_step():
    # x plays the top row; o (the policy) plays the middle row and loses on x's third move.
    moves = iter(["\\boxed{1 1}", "\\boxed{1 2}", "\\boxed{1 3}"])
    env = SingleAgentView(TicTacToeEnv(), "o", policies={"x": lambda obs: next(moves)})
    env.reset(seed=0)
    assert env.step("\\boxed{2 1}")[1:3] == (0.0, False)
    _, reward, terminated, truncated, info = env.step("\\boxed{2 2}")
    assert (reward, terminated, truncated, info["winner"]) == (-1.0, True, False, "x")


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: SingleAgentView(RockPaperScissorsEnv(), "player_0"), "sequential"),
        (lambda: SingleAgentView(TicTacToeEnv(), "z"), "not one of"),
        (lambda: SingleAgentView(TicTacToeEnv(), "x", policies={"x": str}), "only the other"),
    ],
)
def test_view_rejects_bad_arguments(make, error):
    with pytest.raises(ValueError, match=error):
        make()
